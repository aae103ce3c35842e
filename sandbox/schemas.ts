import { z } from 'zod';
import { ApiError } from './errors';

/**
 * Request bodies as the SDK serializes them (serialization/resources/messages/types/*).
 * Unknown keys are ignored, as AgentMail's API does for forward compatibility.
 */

/** Addresses.Raw = string | string[]. */
const addresses = z
  .union([z.string().min(1), z.array(z.string().min(1))])
  .transform((v) => (Array.isArray(v) ? v : [v]));
const labelList = z.union([z.string(), z.array(z.string())]).transform((v) => (Array.isArray(v) ? v : [v]));
const headers = z.record(z.string(), z.string());

export const replySchema = z.object({
  labels: z.array(z.string()).nullish(),
  reply_to: addresses.nullish(),
  to: addresses.nullish(),
  cc: addresses.nullish(),
  bcc: addresses.nullish(),
  reply_all: z.boolean().nullish(),
  text: z.string().nullish(),
  html: z.string().nullish(),
  headers: headers.nullish(),
});

export const sendSchema = z.object({
  labels: z.array(z.string()).nullish(),
  reply_to: addresses.nullish(),
  to: addresses.nullish(),
  cc: addresses.nullish(),
  bcc: addresses.nullish(),
  subject: z.string().nullish(),
  text: z.string().nullish(),
  html: z.string().nullish(),
  headers: headers.nullish(),
});

/** UpdateMessageRequest; drafts.send takes the same body (labels for the sent message). */
export const updateLabelsSchema = z.object({
  add_labels: labelList.nullish(),
  remove_labels: labelList.nullish(),
});

export const createDraftSchema = z.object({
  labels: z.array(z.string()).nullish(),
  reply_to: z.array(z.string()).nullish(),
  to: z.array(z.string()).nullish(),
  cc: z.array(z.string()).nullish(),
  bcc: z.array(z.string()).nullish(),
  subject: z.string().nullish(),
  text: z.string().nullish(),
  html: z.string().nullish(),
  in_reply_to: z.string().nullish(),
  send_at: z.string().nullish(),
  /** AgentMail's idempotency guide: client_id may not contain "@". */
  client_id: z
    .string()
    .min(1)
    .refine((v) => !v.includes('@'), 'client_id must not contain "@"')
    .nullish(),
});

export const updateDraftSchema = createDraftSchema.pick({
  to: true,
  cc: true,
  bcc: true,
  reply_to: true,
  subject: true,
  text: true,
  html: true,
});

export const updateWebhookSchema = z.object({
  event_types: z.array(z.string()).nullish(),
  add_inbox_ids: z.array(z.string()).nullish(),
  remove_inbox_ids: z.array(z.string()).nullish(),
  /** Not in the SDK's UpdateWebhookRequest (it strips it); accepted for raw HTTP callers. */
  enabled: z.boolean().nullish(),
});

export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  const result = schema.safeParse(body ?? {});
  if (result.success) return result.data;
  const errors = result.error.issues.map((issue) => ({ field: issue.path.join('.'), message: issue.message }));
  throw ApiError.validation(errors.map((e) => (e.field ? `${e.field}: ${e.message}` : e.message)).join('; '), errors);
}

/** null and undefined both mean "absent" on AgentMail's wire. */
export const present = <T>(value: T | null | undefined): T | undefined => value ?? undefined;
