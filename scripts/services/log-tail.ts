import { readFileSync } from 'node:fs';

/** The last lines of a child's log file, indented, for an error that says why it died. */
export function tail(file: string, lines = 15): string {
  try {
    return readFileSync(file, 'utf8')
      .trimEnd()
      .split('\n')
      .slice(-lines)
      .map((line) => `  | ${line}`)
      .join('\n');
  } catch {
    return '  (no log)';
  }
}
