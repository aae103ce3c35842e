import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { formatOf, type ArticleFormat } from './sections';

/**
 * Where articles come from: a folder (Markdown, HTML or text files, e.g. an exported help centre;
 * each file's path relative to the folder is its source) and pages fetched once per sync (the URL
 * is the source). Untrusted input all of it: it is only ever text shown to the model.
 */

export interface SourceDocument {
  /** Relative path (with `/`) or URL: the article's identity in its collection. */
  source: string;
  format: ArticleFormat;
  content: string;
  fallbackTitle: string;
}

/** Larger than any help-centre article; a bigger file is skipped with a warning rather than loaded. */
const MAX_DOCUMENT_BYTES = 2 * 1024 * 1024;

export interface SourceProblem {
  source: string;
  problem: string;
}

export async function readFolder(root: string): Promise<{ documents: SourceDocument[]; problems: SourceProblem[] }> {
  const documents: SourceDocument[] = [];
  const problems: SourceProblem[] = [];
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    const full = path.join(entry.parentPath, entry.name);
    const source = path.relative(root, full).split(path.sep).join('/');
    if (source.split('/').some((part) => part.startsWith('.'))) continue;
    const format = formatOf(entry.name);
    if (format === null) continue;
    const content = await readFile(full);
    if (content.length > MAX_DOCUMENT_BYTES) {
      problems.push({ source, problem: `larger than ${MAX_DOCUMENT_BYTES} bytes; skipped` });
      continue;
    }
    documents.push({
      source,
      format,
      content: content.toString('utf8'),
      fallbackTitle: path.basename(entry.name, path.extname(entry.name)).replace(/[-_]+/g, ' '),
    });
  }
  documents.sort((a, b) => (a.source < b.source ? -1 : a.source > b.source ? 1 : 0));
  return { documents, problems };
}

/**
 * Fetches each page once. A page that cannot be fetched this time is reported and *kept* as it
 * was (the sync does not retire an article because its server was down for a minute).
 */
export async function fetchPages(
  urls: readonly string[],
  options: { timeoutMs?: number; fetch?: typeof fetch } = {},
): Promise<{ documents: SourceDocument[]; problems: SourceProblem[]; unreachable: string[] }> {
  const documents: SourceDocument[] = [];
  const problems: SourceProblem[] = [];
  const unreachable: string[] = [];
  const get = options.fetch ?? fetch;
  for (const url of urls) {
    try {
      const response = await get(url, {
        signal: AbortSignal.timeout(options.timeoutMs ?? 15_000),
        headers: { accept: 'text/html, text/markdown, text/plain;q=0.9' },
      });
      if (!response.ok) throw new Error(`answered ${response.status}`);
      const body = Buffer.from(await response.arrayBuffer());
      if (body.length > MAX_DOCUMENT_BYTES) throw new Error(`larger than ${MAX_DOCUMENT_BYTES} bytes`);
      const format = formatOf(new URL(url).pathname, response.headers.get('content-type') ?? undefined) ?? 'html';
      documents.push({
        source: url,
        format,
        content: body.toString('utf8'),
        fallbackTitle: decodeURIComponent(new URL(url).pathname.split('/').filter(Boolean).at(-1) ?? url),
      });
    } catch (error) {
      unreachable.push(url);
      problems.push({ source: url, problem: error instanceof Error ? error.message : String(error) });
    }
  }
  return { documents, problems, unreachable };
}
