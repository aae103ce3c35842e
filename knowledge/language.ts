import { detectAll } from 'tinyld';
import type { Db } from '../lib/db';

/**
 * The language a customer wrote in (issue 37), and the Postgres text-search configuration that
 * stems it. Detection is tinyld's: it runs offline and in process (no service, nothing of the
 * customer's text leaves the worker), it is small (its "normal" profile is a few hundred kB, pure
 * JS, no dependency), it is maintained, and it answers in ISO 639-1 codes ("de", "nb"/"no"), which
 * is what the ticket, the `CustomerLanguage` search attribute and `SUPPORTED_LANGUAGES` speak.
 */

/** An ISO 639-1 code (`en`, `de`, `no`), lower case. */
export type LanguageCode = string;

/**
 * Below this many letters a guess is a coin toss ("Hi?", "ok", "Thanks!"): tinyld still names a
 * language for some, with nothing to go on. Twelve letters is two or three short words.
 */
export const MIN_LETTERS_FOR_LANGUAGE = 12;

/**
 * The best guess must be this many times as likely as the next: close neighbours (Norwegian and
 * Danish, Spanish and Catalan) on a short text are not told apart reliably, and an honest
 * `undefined` hands the decision to the caller rather than a wrong language to the prompt.
 */
const MIN_MARGIN = 1.25;

/** How much of a message is read to detect its language: the start says it, and tinyld's cost grows with the text. */
const DETECTION_SAMPLE_CHARS = 2_000;

/**
 * The language of `text` as an ISO 639-1 code, or `undefined` when the text is too short or the
 * detector is unsure (a mixed-language text is named by the language most of it is in, if that
 * one is clearly ahead). Pure; never throws on any string.
 */
export function detectLanguage(text: string): LanguageCode | undefined {
  // The same line again and again (a pasted log, a quoted footer) throws tinyld's n-gram counts
  // off (40 copies of one English line read as Afrikaans): each distinct line counts once.
  const sample = [...new Set(text.slice(0, DETECTION_SAMPLE_CHARS * 4).split('\n'))]
    .join('\n')
    .slice(0, DETECTION_SAMPLE_CHARS);
  const letters = sample.match(/\p{L}/gu)?.length ?? 0;
  if (letters < MIN_LETTERS_FOR_LANGUAGE) return undefined;
  const [best, next] = detectAll(sample);
  if (!best || best.accuracy <= 0) return undefined;
  if (next && best.accuracy < next.accuracy * MIN_MARGIN) return undefined;
  return best.lang.toLowerCase();
}

/**
 * ISO 639-1 → the name Postgres gives the text-search configuration for that language (its
 * snowball stemmers are named after the language in English). Which of these a server actually
 * has is asked of `pg_ts_config` at run time (textSearchConfigFor), so a server with more or fewer
 * configurations is taken as it is.
 */
const CONFIGURATION_NAMES: Readonly<Record<string, string>> = {
  ar: 'arabic',
  hy: 'armenian',
  eu: 'basque',
  ca: 'catalan',
  da: 'danish',
  nl: 'dutch',
  en: 'english',
  fi: 'finnish',
  fr: 'french',
  de: 'german',
  el: 'greek',
  hi: 'hindi',
  hu: 'hungarian',
  id: 'indonesian',
  ga: 'irish',
  it: 'italian',
  lt: 'lithuanian',
  ne: 'nepali',
  no: 'norwegian', // tinyld's code for Norwegian; Bokmål and Nynorsk are Norwegian to Postgres too
  nb: 'norwegian',
  nn: 'norwegian',
  pt: 'portuguese',
  ro: 'romanian',
  ru: 'russian',
  sr: 'serbian',
  es: 'spanish',
  sv: 'swedish',
  ta: 'tamil',
  tr: 'turkish',
  yi: 'yiddish',
};

/** The configuration name a language would have, whether or not this server has it. */
export const configurationNameFor = (code: LanguageCode): string | undefined => CONFIGURATION_NAMES[code.toLowerCase()];

/** The server's text-search configurations, asked once per pool: they change only with an extension or a DBA. */
const configurationsByDb = new WeakMap<Db, Promise<ReadonlySet<string>>>();

/** The names of the text-search configurations this Postgres has (`SELECT cfgname FROM pg_ts_config`). */
export function textSearchConfigurations(db: Db): Promise<ReadonlySet<string>> {
  let known = configurationsByDb.get(db);
  if (!known) {
    known = db
      .query<{ cfgname: string }>('SELECT cfgname FROM pg_ts_config')
      .then((result) => new Set(result.rows.map((row) => row.cfgname)));
    // A failed look-up is not remembered: the next message asks again.
    known.catch(() => configurationsByDb.delete(db));
    configurationsByDb.set(db, known);
  }
  return known;
}

/**
 * The text-search configuration for a detected language, if this Postgres has one; `undefined`
 * for no language, a language with no stemmer (Japanese, Polish…), or a server without it.
 */
export async function textSearchConfigFor(db: Db, code: LanguageCode | undefined): Promise<string | undefined> {
  if (code === undefined) return undefined;
  const name = configurationNameFor(code);
  if (name === undefined) return undefined;
  return (await textSearchConfigurations(db)).has(name) ? name : undefined;
}
