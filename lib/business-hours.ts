import { DateTime, IANAZone } from 'luxon';

/**
 * A team's business hours (BUSINESS_HOURS, per inbox), and when a person will have answered a
 * message that arrives now: `answerWithinHours` hours of opening time later, counted in the team's
 * time zone, skipping closed days and holidays (luxon does the calendar: time zones, daylight
 * saving, month lengths). Pure.
 */

const DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
type Day = (typeof DAYS)[number];

export interface BusinessHours {
  /** An IANA time zone, e.g. Europe/London. */
  zone: string;
  /** Opening hours per weekday, `HH:MM-HH:MM`; a day not listed is closed. As minutes after midnight. */
  hours: Partial<Record<Day, { open: number; close: number }>>;
  /** Closed dates, `YYYY-MM-DD` in the team's zone. */
  holidays: ReadonlySet<string>;
  /** Opening hours a person takes to answer (default 8: a working day). */
  answerWithinHours: number;
}

export const BUSINESS_HOURS_EXAMPLE =
  '{"*": {"zone": "Europe/London", "hours": {"mon": "09:00-17:30", "tue": "09:00-17:30", "wed": "09:00-17:30", "thu": "09:00-17:30", "fri": "09:00-17:00"}, "holidays": ["2026-12-25", "2026-12-28"], "answerWithinHours": 8}}';

const RANGE = /^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-4]):([0-5]\d)$/;

/** One inbox's entry, checked: the hours, or what is wrong with it (named for the start-up error). */
export function parseBusinessHours(value: unknown): BusinessHours | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return 'must be an object {"zone", "hours", "holidays"?, "answerWithinHours"?}';
  const entry = value as Record<string, unknown>;
  const unknownKey = Object.keys(entry).find((k) => !['zone', 'hours', 'holidays', 'answerWithinHours'].includes(k));
  if (unknownKey !== undefined) return `has an unknown field ${JSON.stringify(unknownKey)}`;
  if (typeof entry.zone !== 'string' || !IANAZone.isValidZone(entry.zone))
    return `zone ${JSON.stringify(entry.zone)} is not an IANA time zone (e.g. Europe/London)`;
  if (typeof entry.hours !== 'object' || entry.hours === null || Array.isArray(entry.hours))
    return 'hours must be an object like {"mon": "09:00-17:00"}';
  const hours: BusinessHours['hours'] = {};
  for (const [day, range] of Object.entries(entry.hours)) {
    if (!(DAYS as readonly string[]).includes(day))
      return `hours has ${JSON.stringify(day)}, not one of ${DAYS.join(', ')}`;
    const match = typeof range === 'string' ? RANGE.exec(range) : null;
    if (!match) return `hours.${day} ${JSON.stringify(range)} is not HH:MM-HH:MM`;
    const open = Number(match[1]) * 60 + Number(match[2]);
    const close = Number(match[3]) * 60 + Number(match[4]);
    if (close <= open || close > 24 * 60) return `hours.${day} ${JSON.stringify(range)} closes before it opens`;
    hours[day as Day] = { open, close };
  }
  if (Object.keys(hours).length === 0) return 'hours names no open day';
  const holidays = entry.holidays ?? [];
  if (!Array.isArray(holidays)) return 'holidays must be a list of dates like ["2026-12-25"]';
  for (const date of holidays)
    if (
      typeof date !== 'string' ||
      !DateTime.fromISO(date, { zone: entry.zone }).isValid ||
      !/^\d{4}-\d{2}-\d{2}$/.test(date)
    )
      return `holidays has ${JSON.stringify(date)}, not a date YYYY-MM-DD`;
  const within = entry.answerWithinHours ?? 8;
  if (typeof within !== 'number' || !Number.isFinite(within) || within <= 0 || within > 24 * 14)
    return 'answerWithinHours must be a number of hours above 0 (at most two weeks of them)';
  return { zone: entry.zone, hours, holidays: new Set(holidays as string[]), answerWithinHours: within };
}

/** The hours of this inbox: its own entry, else `*`, else none (then "as soon as possible"). */
export function businessHoursFor(
  map: Readonly<Record<string, BusinessHours>>,
  inboxId: string,
): BusinessHours | undefined {
  return map[inboxId.toLowerCase()] ?? map['*'];
}

/** Days looked ahead: a team closed for longer than a year has no "by when". */
const MAX_DAYS_AHEAD = 370;

/** When `answerWithinHours` opening hours after `now` have passed, or null when the calendar has none. */
export function answerBy(now: Date, hours: BusinessHours): DateTime | null {
  let remaining = hours.answerWithinHours * 60;
  let cursor = DateTime.fromJSDate(now, { zone: hours.zone });
  for (let day = 0; day < MAX_DAYS_AHEAD; day++) {
    const today = hours.hours[DAYS[cursor.weekday - 1]!];
    if (today && !hours.holidays.has(cursor.toISODate() ?? '')) {
      const midnight = cursor.startOf('day');
      const open = midnight.plus({ minutes: today.open });
      const close = midnight.plus({ minutes: today.close });
      const start = cursor > open ? cursor : open;
      if (start < close) {
        const available = close.diff(start, 'minutes').minutes;
        if (remaining <= available) return start.plus({ minutes: remaining });
        remaining -= available;
      }
    }
    cursor = cursor.startOf('day').plus({ days: 1 });
  }
  return null;
}
