import type { FastifySchemaCompiler } from 'fastify';
import { z } from 'zod';
import { draftProblem, normalizedDraft } from '../contract';

/**
 * The desk's forms and the one place their rules live. Each route declares its body as a zod
 * schema (`schema: { body: … }`); the validator compiler below runs it before the handler, so a
 * handler only ever sees a well-formed body. What a verdict *means* — approve as drafted, approve
 * an edit, show the diff first, refuse — is `verdictOf`, used by every route that decides.
 */

/** Fastify's validator compiler for zod schemas: the parsed value replaces the body, an error answers 400. */
export const zodValidatorCompiler: FastifySchemaCompiler<z.ZodType> =
  ({ schema }) =>
  (data: unknown) => {
    const parsed = schema.safeParse(data);
    if (parsed.success) return { value: parsed.data };
    const error = new Error(parsed.error.issues.map((i) => `${i.path.join('.') || 'form'}: ${i.message}`).join('; '));
    return { error };
  };

/** A browser submits a textarea's line breaks as CRLF; the draft and the sent text use LF. */
export const lineFeeds = (text: string): string => text.replace(/\r\n?/g, '\n');

const revision = z.coerce.number().int().min(1, 'the form names no revision');
const csrf = z.string().optional();
/** A reply's text as a form sends it: line feeds, at most a generous bound (the reply rule checks the rest). */
const replyText = z.string().max(100_000, 'the text is far too long').transform(lineFeeds);

export const signInForm = z.object({
  _csrf: csrf,
  token: z
    .string()
    .max(200)
    .default('')
    .transform((t) => t.trim()),
});

export const signOutForm = z.object({ _csrf: csrf });

/** "Show my changes": the editor's text against the revision the page showed. */
export const previewForm = z.object({ _csrf: csrf, revision, text: replyText });
export type PreviewForm = z.output<typeof previewForm>;

/**
 * A verdict. `text` is what the editor held when the reviewer pressed the button (the message
 * page's approve is in the editor's form, so the browser always sends it); `edit=confirmed` comes
 * only from the diff page, where the reviewer has seen the edit against the draft.
 */
export const reviewForm = z.discriminatedUnion('verdict', [
  z.object({
    _csrf: csrf,
    verdict: z.literal('approve'),
    revision,
    text: replyText,
    edit: z.literal('confirmed').optional(),
  }),
  z.object({ _csrf: csrf, verdict: z.literal('reject'), revision, text: z.string().optional() }),
]);
export type ReviewForm = z.output<typeof reviewForm>;

/** What a verdict form amounts to, judged against the draft awaiting a verdict. */
export type Verdict =
  /** The editor holds the draft unchanged: approve it as drafted. */
  | { kind: 'approve'; revision: number }
  /** An edit the reviewer has seen in the diff: approve it, sent as the next version. */
  | { kind: 'approve-edit'; revision: number; text: string }
  /** An edit not yet seen as a diff (the plain approve pressed after typing): show the diff, send nothing. */
  | { kind: 'show-diff'; revision: number; text: string }
  /** An edit that cannot be sent (the reply rule): said, with the text kept in the editor. */
  | { kind: 'refuse'; reason: string; text: string }
  | { kind: 'reject'; revision: number }
  /** No draft awaits a verdict (decided already, or not yet drafted): nothing to judge against. */
  | { kind: 'not-awaited' };

/**
 * The verdict rules. `drafted` is the stored text of the draft awaiting a verdict, or null when
 * none is (a verdict stands, or the reply is not drafted yet: a verdict then judges nothing). The editor's text counts as unchanged when
 * it equals the draft once both are normalized as a sent reply is (contract/draft-text.ts).
 */
export function verdictOf(form: ReviewForm | (PreviewForm & { verdict: 'preview' }), drafted: string | null): Verdict {
  if (drafted === null) return { kind: 'not-awaited' };
  if (form.verdict === 'reject') return { kind: 'reject', revision: form.revision };
  const text = normalizedDraft(form.text);
  if (text === normalizedDraft(drafted) && form.verdict === 'approve')
    return { kind: 'approve', revision: form.revision };
  const problem = draftProblem(text);
  if (problem !== null) return { kind: 'refuse', reason: `it ${problem}`, text: form.text };
  if (form.verdict === 'approve' && form.edit === 'confirmed')
    return { kind: 'approve-edit', revision: form.revision, text };
  return { kind: 'show-diff', revision: form.revision, text };
}
