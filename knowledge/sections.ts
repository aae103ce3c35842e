/**
 * An article split into the sections the model is shown and cites: Markdown at its `##`
 * headings, HTML at its `<h2>`s, plain text whole. Each section keeps the article's title (the
 * first `#` heading, `<h1>` or `<title>`, else the file name) and its own heading. Pure.
 */

export interface ParsedArticle {
  title: string;
  sections: Array<{ heading: string | null; body: string }>;
}

export type ArticleFormat = 'markdown' | 'html' | 'text';

/**
 * The article's address for people (the reply links it, the desk shows it): a Markdown article's
 * front matter `url: https://…`, or the page itself for a fetched page (its source is its URL).
 */
export function articleUrl(document: { source: string; format: ArticleFormat; content: string }): string | null {
  const frontMatter = document.format === 'markdown' ? /^---\r?\n([\s\S]*?)\r?\n---\r?\n/.exec(document.content) : null;
  const declared = frontMatter ? /^url:\s*["']?(https?:\/\/[^\s"']+)["']?\s*$/m.exec(frontMatter[1]!)?.[1] : undefined;
  const url = declared ?? (/^https?:\/\//i.test(document.source) ? document.source : null);
  return url !== null && url.length <= 2000 && URL.canParse(url) ? url : null;
}

/** Longest section body kept: a help-centre section is short; a huge one is cut, not refused. */
const MAX_SECTION_CHARACTERS = 6_000;

export function formatOf(name: string, contentType?: string): ArticleFormat | null {
  const lower = name.toLowerCase();
  if (contentType?.includes('text/html') || /\.html?$/.test(lower)) return 'html';
  if (contentType?.includes('text/markdown') || /\.(md|markdown)$/.test(lower)) return 'markdown';
  if (contentType?.includes('text/plain') || /\.txt$/.test(lower)) return 'text';
  return null;
}

export function parseArticle(content: string, format: ArticleFormat, fallbackTitle: string): ParsedArticle {
  if (format === 'html') return parseMarkdown(htmlToMarkdownish(content), fallbackTitle);
  if (format === 'markdown') return parseMarkdown(content, fallbackTitle);
  const text = content.replace(/\r\n?/g, '\n').trim();
  const [first = '', ...rest] = text.split('\n');
  const title = first.trim() || fallbackTitle;
  return finish(title, [{ heading: null, body: rest.join('\n').trim() || first.trim() }]);
}

function parseMarkdown(content: string, fallbackTitle: string): ParsedArticle {
  const lines = content
    .replace(/\r\n?/g, '\n')
    .replace(/^---\n[\s\S]*?\n---\n/, '')
    .split('\n');
  let title: string | null = null;
  const sections: Array<{ heading: string | null; lines: string[] }> = [{ heading: null, lines: [] }];
  for (const line of lines) {
    const h1 = /^#\s+(.+?)\s*#*\s*$/.exec(line);
    const h2 = /^##\s+(.+?)\s*#*\s*$/.exec(line);
    if (h1 && title === null) title = h1[1]!.trim();
    else if (h2) sections.push({ heading: h2[1]!.trim(), lines: [] });
    else sections.at(-1)!.lines.push(line);
  }
  return finish(
    title ?? fallbackTitle,
    sections.map((s) => ({ heading: s.heading, body: s.lines.join('\n').trim() })),
  );
}

function finish(title: string, sections: Array<{ heading: string | null; body: string }>): ParsedArticle {
  const kept = sections
    .filter((s) => s.body !== '' || s.heading !== null)
    .map((s) => ({ heading: s.heading, body: clip(s.body || s.heading || '') }));
  return { title: title.trim() || 'Untitled', sections: kept.length > 0 ? kept : [{ heading: null, body: title }] };
}

function clip(text: string): string {
  return text.length > MAX_SECTION_CHARACTERS ? `${text.slice(0, MAX_SECTION_CHARACTERS)}…` : text;
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };

/** Enough HTML for an exported help centre: headings become Markdown headings, tags go, entities decode. */
function htmlToMarkdownish(html: string): string {
  const titleTag = /<title[^>]*>([\s\S]*?)<\/title>/i.exec(html)?.[1]?.trim();
  let body = html
    .replace(/<(script|style|head|nav|footer)[^>]*>[\s\S]*?<\/\1>/gi, '')
    .replace(/<!--[\s\S]*?-->/g, '')
    .replace(/<h1[^>]*>([\s\S]*?)<\/h1>/gi, (_m, t: string) => `\n# ${inline(t)}\n`)
    .replace(/<h2[^>]*>([\s\S]*?)<\/h2>/gi, (_m, t: string) => `\n## ${inline(t)}\n`)
    .replace(/<h[3-6][^>]*>([\s\S]*?)<\/h[3-6]>/gi, (_m, t: string) => `\n${inline(t)}\n`)
    .replace(/<li[^>]*>/gi, '\n- ')
    .replace(/<(br|\/p|\/div|\/li|\/tr)\s*\/?>/gi, '\n')
    .replace(/<[^>]+>/g, '');
  body = decode(body)
    .replace(/[ \t]+/g, ' ')
    .replace(/\n\s*\n\s*\n+/g, '\n\n');
  if (titleTag && !/^#\s/m.test(body)) body = `# ${decode(titleTag)}\n${body}`;
  return body;
}

const inline = (html: string) =>
  decode(html.replace(/<[^>]+>/g, ''))
    .replace(/\s+/g, ' ')
    .trim();
const decode = (text: string) =>
  text.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (match, entity: string) => {
    if (entity.startsWith('#x') || entity.startsWith('#X')) return String.fromCodePoint(parseInt(entity.slice(2), 16));
    if (entity.startsWith('#')) return String.fromCodePoint(Number(entity.slice(1)));
    return ENTITIES[entity.toLowerCase()] ?? match;
  });
