import { detectLanguage, type LanguageCode } from '../../../knowledge/language';
import { languageAlias } from '../../../lib/config';
import { languageName } from '../../../lib/mail-text';

/**
 * The customer's language, as the draft uses it: the language the message is written in (tinyld,
 * knowledge/language.ts), the language to reply in, and whether the team answers it at all
 * (SUPPORTED_LANGUAGES). Pure.
 *
 * A message the detector cannot name (too short, "Hi?"; or unsure) is not handed off: nothing says
 * it is in a language the team does not speak, and the model is then told to reply in the
 * language of the message. A message in several languages (a German customer quoting an English
 * order confirmation) is answered when any of its paragraphs is in a supported language, in that
 * language: a person is needed only when nothing in it is.
 */

export interface CustomerLanguage {
  /** The language of the whole message (ISO 639-1), or null when the detector cannot name it. */
  detected: LanguageCode | null;
  /** The language the reply is written in; null: "the language of the customer's message". */
  reply: LanguageCode | null;
  /** Set when the team does not answer the message's language: why, for the hand-off. */
  unsupported: string | null;
}

export { languageName };

export function customerLanguage(text: string, supported: readonly LanguageCode[] | null): CustomerLanguage {
  const detected = detectLanguage(text) ?? null;
  if (detected === null || supported === null) return { detected, reply: detected, unsupported: null };
  if (supported.includes(languageAlias(detected))) return { detected, reply: detected, unsupported: null };
  const alsoIn = paragraphLanguages(text).find((code) => supported.includes(languageAlias(code)));
  if (alsoIn !== undefined) return { detected, reply: alsoIn, unsupported: null };
  return {
    detected,
    reply: null,
    unsupported: `the message is in ${languageName(detected)} (${detected}), which is not among SUPPORTED_LANGUAGES (${supported.join(', ')})`,
  };
}

/** The languages of the message's paragraphs that the detector can name, most text first. */
function paragraphLanguages(text: string): LanguageCode[] {
  const weight = new Map<LanguageCode, number>();
  for (const paragraph of text.split(/\n\s*\n|(?<=[.!?])\s+(?=\p{Lu})/u).slice(0, 50)) {
    const code = detectLanguage(paragraph);
    if (code !== undefined) weight.set(code, (weight.get(code) ?? 0) + paragraph.length);
  }
  return [...weight.entries()].sort((a, b) => b[1] - a[1]).map(([code]) => code);
}
