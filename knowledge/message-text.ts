/**
 * What one message may cost (issue 39): the part of a customer's text that retrieval searches and
 * the model is shown is bounded, so a hostile or pasted 5,000-line email costs what a long
 * ordinary one does. The cut is said — in the prompt (so the model knows it read only the start)
 * and on the ticket (so a person reads the whole message at AgentMail) — never silent.
 */

/**
 * The most of a message's text used for retrieval and the prompt: 12,000 characters, about 2,000
 * words or five printed pages. A support email is far shorter (the bundled and held-out questions
 * are all under 600); past this, the rest is logs, quoted threads or pasted documents, which a
 * person reads better than the model.
 */
export const MESSAGE_TEXT_MAX_CHARS = 12_000;

/** Set when a message's text was cut: how much was kept of how much, in characters. */
export interface TextCut {
  keptChars: number;
  totalChars: number;
}

/**
 * The first MESSAGE_TEXT_MAX_CHARS characters of `text`, cut at the last line break (else the last
 * space) before the limit so no word is halved; `cut` says whether and where. Pure.
 */
export function boundMessageText(
  text: string,
  maxChars: number = MESSAGE_TEXT_MAX_CHARS,
): { text: string; cut: TextCut | null } {
  if (text.length <= maxChars) return { text, cut: null };
  const head = text.slice(0, maxChars);
  const lineBreak = head.lastIndexOf('\n');
  const space = head.search(/\s\S*$/);
  const end = lineBreak >= maxChars / 2 ? lineBreak : space >= maxChars / 2 ? space : maxChars;
  const kept = head.slice(0, end).trimEnd();
  return { text: kept, cut: { keptChars: kept.length, totalChars: text.length } };
}

/** One sentence for the prompt and the ticket note, saying the cut. */
export const textCutNotice = (cut: TextCut): string =>
  `The message is ${cut.totalChars.toLocaleString('en-GB')} characters long; only its first ${cut.keptChars.toLocaleString('en-GB')} were read (the rest is at AgentMail).`;

/**
 * Lines that say nothing about the question and only add words for the search to match: quoted
 * earlier mail (`> …`), greetings and sign-offs on a line of their own ("Hi there,", "Thanks in
 * advance", "Best regards"), and the signature after a sign-off or the `-- ` delimiter. The model
 * is still shown the whole (bounded) text; this is for the search alone.
 */
export function searchableText(text: string): string {
  const kept: string[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '--' || SIGN_OFF.test(line)) break; // what follows is a name, a title, a phone number
    if (line.startsWith('>') || /^On .{4,200} wrote:$/i.test(line) || SENT_FROM.test(line)) continue;
    const unGreeted = line.replace(HEADER_LABEL, '').replace(GREETING, '').trim();
    if (unGreeted !== '') kept.push(unGreeted);
  }
  return kept.join('\n');
}

/**
 * A header's label at the start of a line ("Subject: double payment??", "Re: Re: order 123",
 * "Betreff:", "Objet :"): the subject leads the searched text and is often written out with its
 * label, which is a word every such email shares and no article is about. The label goes; what
 * follows it stays.
 */
const HEADER_LABEL =
  /^(?:(?:subject|re|fwd?|aw|wg|sv|vs|betreff|onderwerp|objet|asunto|oggetto|assunto|emne|ämne|aihe)\s*:\s*)+/iu;

/** A mail app's footer on a line of its own ("Sent from my iPhone", "Von meinem iPhone gesendet"). */
const SENT_FROM =
  /^(?:sent from my |get outlook for |von meinem |envoy[ée] de mon |enviado desde mi |verzonden (?:met|vanaf) )/iu;

/**
 * A greeting at the start of a line, with up to three words of a name after it ("Hi there,",
 * "Hello Fernhill team!", "Hei!", "Guten Tag,"): left out of the search. Only when punctuation or
 * the line's end follows, so "Hi, my parcel…" keeps "my parcel…" and "hi what time do you open?"
 * is a question, not a greeting.
 */
const GREETING =
  /^(?:hi+|hey+|hello+|hiya|dear|good (?:morning|afternoon|evening)|greetings|hei|hallo|hej|moin|guten tag|bonjour|salut|hola|buenos d[ií]as|buongiorno|ciao|hoi|goedemiddag|goedemorgen)(?:\s+[\p{L}'’-]+){0,3}\s*(?:[.!?,:]+|$)/iu;

/** A line that closes a letter: what comes after it is a signature. */
const SIGN_OFF =
  /^(?:(?:many |kind |best |warm )?(?:thanks|thank you|regards|wishes)(?: (?:again|so much|in advance|a lot))?|cheers|best|thx|ta|mvh|med vennlig hilsen|vennlig hilsen|mit freundlichen gr[üu](?:ß|ss)en|viele gr[üu](?:ß|ss)e|liebe gr[üu](?:ß|ss)e|gr[üu](?:ß|ss)e|cordialement|bien [àa] vous|saludos|un saludo|atentamente|met vriendelijke groet(?:en)?|groeten|hilsen)[\s!.,]*(?:\p{L}+[!.]?)?$/iu;
