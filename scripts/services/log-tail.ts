import { readFileSync } from 'node:fs';

/** The last lines of a child's log file, indented (each cut at 400 characters: servers log long JSON lines), for an error that says why it died. */
export function tail(file: string, lines = 15): string {
  try {
    return readFileSync(file, 'utf8')
      .trimEnd()
      .split('\n')
      .slice(-lines)
      .map((line) => `  | ${line.slice(0, 400)}`)
      .join('\n');
  } catch {
    return '  (no log)';
  }
}
