import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseQuestions } from '../../knowledge/eval';
import type { HandoffExample } from '.';

/** One file of labelled mail, in the eval's question format: only `text` and `handoff` are read here. */
export interface ExampleFile {
  file: string;
  examples: HandoffExample[];
}

export class HandoffExamplesError extends Error {
  override name = 'HandoffExamplesError';
}

/** Reads each file whole, or throws naming the file (and the line, for a malformed one). */
export function readExampleFiles(files: readonly string[]): ExampleFile[] {
  return files.map((given) => {
    const file = path.resolve(given);
    if (!existsSync(file)) throw new HandoffExamplesError(`${given}: no such file`);
    try {
      const examples = parseQuestions(readFileSync(file, 'utf8')).map(({ text, handoff }) => ({ text, handoff }));
      return { file, examples };
    } catch (error) {
      throw new HandoffExamplesError(`${given}: ${(error as Error).message}`);
    }
  });
}
