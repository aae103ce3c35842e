import { readFile, stat } from 'node:fs/promises';
import { wordsOf } from './retrieve';

/**
 * A collection's synonym groups (KNOWLEDGE_SYNONYMS), in Solr's "equivalent synonyms" format: one
 * group a line, its phrases comma-separated (`return, send back, send it back`); `#` starts a
 * comment to the end of the line; blank lines are skipped. A phrase is one or more words, kept as
 * the customer's text is: letters and digits, lower case (`E-mail` is the two words `e mail`).
 * The sync stores the groups (synonym-store.ts); retrieval applies them (retrieve.ts).
 */

export interface SynonymGroup {
  /** The group's line in its file: its identity in the collection, and what an error names. */
  line: number;
  phrases: string[];
}

/** Far above a help centre's list (Solr's own examples hold a few hundred); a bigger file is a mistake. */
export const MAX_SYNONYM_FILE_BYTES = 1024 * 1024;
export const MAX_SYNONYM_GROUPS = 2_000;
/**
 * The stored match of a phrase spells out every placement of its words (synonym-store.ts), which
 * doubles with each word: six keeps it at 32, and a longer "phrase" is a sentence, not a synonym.
 */
export const MAX_PHRASE_WORDS = 6;
const MAX_PHRASE_CHARACTERS = 200;

export class SynonymFileError extends Error {
  override name = 'SynonymFileError';
  constructor(file: string, line: number | null, problem: string) {
    super(`${file}${line === null ? '' : `, line ${line}`}: ${problem}`);
  }
}

/** The groups of a synonyms file; a malformed line stops the parse with its number. */
export function parseSynonyms(text: string, file: string): SynonymGroup[] {
  const groups: SynonymGroup[] = [];
  for (const [index, raw] of text.split('\n').entries()) {
    const line = index + 1;
    const content = raw.replace(/#.*/, '').trim();
    if (content === '') continue;
    const fail = (problem: string) => new SynonymFileError(file, line, problem);
    if (content.includes('=>'))
      throw fail('`=>` mappings are not supported: list the phrases that mean the same, comma-separated');
    const phrases = content.split(',').map((part) => wordsOf(part).join(' '));
    if (phrases.includes('')) throw fail('an empty phrase: every phrase between commas needs a word');
    const distinct = [...new Set(phrases)];
    if (distinct.length < 2)
      throw fail('a group needs two different phrases or more, comma-separated (return, send back)');
    const long = distinct.find(
      (phrase) => phrase.split(' ').length > MAX_PHRASE_WORDS || phrase.length > MAX_PHRASE_CHARACTERS,
    );
    if (long !== undefined)
      throw fail(`a phrase longer than ${MAX_PHRASE_WORDS} words or ${MAX_PHRASE_CHARACTERS} characters`);
    if (groups.length === MAX_SYNONYM_GROUPS) throw fail(`more than ${MAX_SYNONYM_GROUPS} groups`);
    groups.push({ line, phrases: distinct });
  }
  return groups;
}

/** Reads and parses a synonyms file; any problem is a SynonymFileError naming the file (and the line). */
export async function readSynonymFile(file: string): Promise<SynonymGroup[]> {
  let text: string;
  try {
    if ((await stat(file)).size > MAX_SYNONYM_FILE_BYTES)
      throw new SynonymFileError(file, null, `larger than ${MAX_SYNONYM_FILE_BYTES} bytes`);
    text = await readFile(file, 'utf8');
  } catch (error) {
    if (error instanceof SynonymFileError) throw error;
    throw new SynonymFileError(file, null, `cannot be read (${(error as Error).message})`);
  }
  return parseSynonyms(text, file);
}
