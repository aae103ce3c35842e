import { readFileSync } from 'node:fs';

/**
 * Topics a person answers (HANDOFF_TOPICS; docs/knowledge.md "Topics a person answers"): job
 * applications, press, sponsorship, a legal notice. Help desks route such mail to a person whatever
 * an article says, because an article can share every word with it ("are you hiring at the Leeds
 * shop?" and the rental article's *hire*) and still not answer it: word overlap cannot tell "about
 * this article's topic" from "answered by it" (the relevance floor, knowledge/relevance-floor.ts),
 * but a team can say which subjects are never the agent's.
 *
 * The file: one topic a line, `name: phrase, phrase, …`, a line that ends with a comma going on
 * on the next (a topic in seven languages is long); `#` starts a comment to the end of the line.
 * A phrase is one to six words matched whole, in order and within one sentence ("press enquiry"),
 * case and accents aside ("resume" matches "résumé"); a word ending in `*` matches any word it
 * starts ("sponsor*": sponsor, sponsorship, sponsoring), and `_` between two words any one word
 * ("wrong _ sent": the wrong boots, colour or size sent, which "wrong colour" alone would not tell
 * from a customer who chose the wrong one). Matching is on words as written, not stems, so
 * "hiring" is not "hire". Pure apart from reading the file.
 */

export interface HandoffTopic {
  /** The topic's name as the ticket and the operations query show it (`press`, `jobs`). */
  name: string;
  /** Each phrase's words, normalised; a word ending in `*` is a prefix. */
  phrases: Array<{ text: string; words: string[] }>;
}

export const MAX_TOPIC_FILE_BYTES = 256 * 1024;
export const MAX_TOPICS = 200;
export const MAX_TOPIC_PHRASES = 5_000;
const MAX_PHRASE_WORDS = 6;
/** A prefix shorter than this ("a*", "re*") would match most mail. */
const MIN_PREFIX_LETTERS = 3;
/** In a phrase, any one word. */
const ANY_WORD = '_';
const TOPIC_NAME = /^[a-z0-9][a-z0-9-]{0,39}$/;
/** A line that names a topic (`press:`), as opposed to one that goes on with the phrases of the one before. */
const STARTS_A_TOPIC = /^[a-z0-9][a-z0-9-]{0,39}\s*:/i;

export class HandoffTopicsError extends Error {
  override name = 'HandoffTopicsError';
  constructor(file: string, line: number | null, problem: string) {
    super(`${file}${line === null ? '' : `, line ${line}`}: ${problem}`);
  }
}

/** Lower case, accents and apostrophe styles aside: "Résumé" and "resume", "didn’t" and "didn't" are one word each. */
const normalised = (text: string) =>
  text
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/[\u2018\u2019\u02bc]/g, "'");

/** The words of a text, in order: letters and digits, an apostrophe inside a word kept ("didn't"). */
export const topicWords = (text: string): string[] =>
  normalised(text).match(/[\p{L}\p{N}]+(?:'[\p{L}\p{N}]+)*/gu) ?? [];

export function parseHandoffTopics(text: string, file: string): HandoffTopic[] {
  const topics: HandoffTopic[] = [];
  const names = new Set<string>();
  let phrases = 0;
  for (const { line, content } of logicalLines(text, file)) {
    const fail = (problem: string) => new HandoffTopicsError(file, line, problem);
    const colon = content.indexOf(':');
    if (colon === -1) throw fail('expected `name: phrase, phrase` (e.g. press: journalist, press enquiry)');
    const name = content.slice(0, colon).trim().toLowerCase();
    if (!TOPIC_NAME.test(name))
      throw fail(
        `the topic name ${JSON.stringify(name)} must be letters, digits and hyphens (e.g. press, lost-property)`,
      );
    if (names.has(name)) throw fail(`the topic ${name} is named twice: give each topic one line`);
    const parsed: HandoffTopic['phrases'] = [];
    for (const part of content.slice(colon + 1).split(',')) {
      const words = part
        .trim()
        .split(/\s+/)
        .filter(Boolean)
        .flatMap((word) => {
          if (word === ANY_WORD) return [ANY_WORD];
          const prefix = word.endsWith('*');
          const pieces = topicWords(prefix ? word.slice(0, -1) : word);
          if (prefix && pieces.length > 0) pieces[pieces.length - 1] += '*';
          return pieces;
        });
      if (words.length === 0) throw fail('an empty phrase: every phrase between commas needs a word');
      if (words[0] === ANY_WORD || words[words.length - 1] === ANY_WORD)
        throw fail(
          `${JSON.stringify(part.trim())}: a \`_\` stands for one word between two others (e.g. wrong _ sent)`,
        );
      if (words.length > MAX_PHRASE_WORDS) throw fail(`a phrase longer than ${MAX_PHRASE_WORDS} words`);
      const shortPrefix = words.find((w) => w.endsWith('*') && w.length - 1 < MIN_PREFIX_LETTERS);
      if (shortPrefix !== undefined)
        throw fail(`the prefix ${shortPrefix} is shorter than ${MIN_PREFIX_LETTERS} letters: it would match most mail`);
      parsed.push({ text: part.trim(), words });
    }
    phrases += parsed.length;
    if (topics.length === MAX_TOPICS) throw fail(`more than ${MAX_TOPICS} topics`);
    if (phrases > MAX_TOPIC_PHRASES) throw fail(`more than ${MAX_TOPIC_PHRASES} phrases in all`);
    names.add(name);
    topics.push({ name, phrases: parsed });
  }
  return topics;
}

/**
 * The file's topics, each with the line it starts on: comments and blank lines left out, and a
 * line that ends with a comma joined with the lines that go on from it (before, a trailing comma
 * was an empty phrase, an error: no file that parsed then reads otherwise now).
 */
function logicalLines(text: string, file: string): Array<{ line: number; content: string }> {
  const lines: Array<{ line: number; content: string }> = [];
  let open: { line: number; content: string } | null = null;
  for (const [index, raw] of text.split('\n').entries()) {
    const content = raw.replace(/#.*/, '').trim();
    if (content === '') continue;
    // A comma left at the end of a topic would make the next topic's line its phrases.
    if (open !== null && STARTS_A_TOPIC.test(content))
      throw new HandoffTopicsError(
        file,
        index + 1,
        `a new topic, but line ${open.line}'s topic ends with a comma (it goes on here): remove that comma`,
      );
    if (open === null) open = { line: index + 1, content };
    else open.content += ` ${content}`;
    if (!content.endsWith(',')) {
      lines.push(open);
      open = null;
    }
  }
  if (open !== null) lines.push(open); // a last line ending in a comma: its empty phrase is reported
  return lines;
}

/** Reads and parses a topics file; any problem is a HandoffTopicsError naming the file (and the line). */
export function readHandoffTopics(file: string): HandoffTopic[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new HandoffTopicsError(file, null, `cannot be read (${(error as Error).message})`);
  }
  if (Buffer.byteLength(text) > MAX_TOPIC_FILE_BYTES)
    throw new HandoffTopicsError(file, null, `larger than ${MAX_TOPIC_FILE_BYTES} bytes`);
  return parseHandoffTopics(text, file);
}

const wordMatches = (pattern: string, word: string) =>
  pattern === ANY_WORD || (pattern.endsWith('*') ? word.startsWith(pattern.slice(0, -1)) : word === pattern);

/** The first topic (in the file's order) one of whose phrases the text holds, with that phrase; else null. */
export function topicOf(text: string, topics: readonly HandoffTopic[]): { topic: string; phrase: string } | null {
  // A phrase is matched within one sentence: "Is something wrong? It was sent this morning." is
  // not "wrong _ _ sent".
  const sentences = text.split(SENTENCE_END).map(topicWords);
  for (const topic of topics)
    for (const phrase of topic.phrases)
      for (const words of sentences)
        for (let start = 0; start + phrase.words.length <= words.length; start += 1)
          if (phrase.words.every((pattern, offset) => wordMatches(pattern, words[start + offset]!)))
            return { topic: topic.name, phrase: phrase.text };
  return null;
}

/** Where a sentence ends: . ! ? ; or a line break (a dot between digits, as in "2.5", is not one). */
const SENTENCE_END = /(?<!\d)\.|\.(?!\d)|[!?;\n]+/;
