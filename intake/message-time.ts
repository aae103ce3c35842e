/**
 * A message's time as the payload (or AgentMail's listing) states it is the sender's claim: a
 * clock that is off, or a forged event, can say the year 9999. The inbox's catch-up cursor only
 * ever moves forward, so one such time would push it out of reach for good (every later resume
 * would list nothing). Times further ahead than this are clamped to now before they move a
 * cursor or order anything; five minutes is the skew Svix itself tolerates on its signatures.
 */
export const MAX_FUTURE_SKEW_MS = 5 * 60 * 1000;

export interface MessageTime {
  at: Date;
  /** The time as given, when it was clamped (for the log line). */
  clampedFrom?: Date;
}

export function clampMessageTime(at: Date, now = Date.now()): MessageTime {
  return at.getTime() > now + MAX_FUTURE_SKEW_MS ? { at: new Date(now), clampedFrom: at } : { at };
}
