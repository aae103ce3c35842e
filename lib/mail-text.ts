/**
 * How mail as customers write it is shown to the model, on tickets and in the desk (issue 37):
 * a language's name, and an attachment's name, type and size as untrusted text. Pure.
 */

const names = new Intl.DisplayNames(['en'], { type: 'language', fallback: 'none' });

/** `de` → `German`; the code itself when Intl has no name for it. */
export const languageName = (code: string): string => names.of(code) ?? code;

const MAX_NAME_CHARACTERS = 120;

/** A filename as the prompt and the ticket show it: a JSON string, no control or bidi characters, clipped. */
export function quotedName(filename: string | null): string {
  if (filename === null || filename.trim() === '') return '(no name)';
  // eslint-disable-next-line no-control-regex -- removing control characters is the point.
  const clean = filename.replace(/[\u0000-\u001F\u007F\u200E\u200F\u202A-\u202E\u2066-\u2069]/g, ' ').trim();
  const clipped = clean.length > MAX_NAME_CHARACTERS ? `${clean.slice(0, MAX_NAME_CHARACTERS)}…` : clean;
  return JSON.stringify(clipped);
}

/** A MIME type as shown: `type/subtype` of safe characters, else `unknown type`. */
export function shownType(contentType: string | null): string {
  const bare = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  return /^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}$/.test(bare) ? bare : 'unknown type';
}

export function shownSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}
