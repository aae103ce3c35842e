import { ApplicationFailure } from '@temporalio/activity';
import type { AgentMailClient } from 'agentmail';
import {
  FailureType,
  type MessageRef,
  OperationKind,
  type OperationReport,
  RetryableFailureType,
} from '../../contract';
import type { ActivityConfig } from '../../lib/config';
import { inboundWorkflowId, providerIdempotencyKey } from '../../lib/hashing';
import { fetchMessage } from '../agentmail/reads';
import { providerFailure } from '../agentmail/failures';
import { storedDraft } from '../draft/draft-store';
import { runOperation } from '../operation-store/run-operation';
import type { OperationStore } from '../operation-store/store';

/**
 * Tells people that a reply waits for them (and again when it is escalated): a Slack-compatible
 * incoming webhook (REVIEW_NOTIFY_WEBHOOK_URL) and/or an email through AgentMail
 * (REVIEW_NOTIFY_ADDRESS). Each notification is one operation under its own key
 * (…/notify-waiting/v1, …/notify-escalated/v1), so a retry, a worker crash after it was stored,
 * or a replay of the message finds it done and tells no one twice. The email carries an
 * Idempotency-Key from that key, so a retry after a lost answer is one email too; a webhook has no
 * such key, so only a crash between its 2xx and the stored result can repeat it.
 * Without REVIEW_NOTIFY_INCLUDE_TEXT the notification holds ids and a link to the desk, no customer text.
 */

export type NotifyEvent = 'waiting' | 'escalated';

export interface NotifyInput extends MessageRef {
  /** This notification's operation key, from the workflow. */
  key: string;
  event: NotifyEvent;
  /** Why a person must look (`approval required`, `held: …`): our words, not the customer's. */
  reason: string;
  /** The draft waiting, for the text when REVIEW_NOTIFY_INCLUDE_TEXT is on. */
  draftKey: string;
}

export interface NotifyDeps {
  store: OperationStore;
  agentmail: AgentMailClient;
  config: Pick<
    ActivityConfig,
    | 'OPERATION_LEASE_MS'
    | 'REVIEW_NOTIFY_WEBHOOK_URL'
    | 'REVIEW_NOTIFY_ADDRESS'
    | 'REVIEW_NOTIFY_INCLUDE_TEXT'
    | 'DESK_PUBLIC_URL'
  >;
}

export interface NotifyResult {
  webhook: boolean;
  email: string | null;
  operation: OperationReport;
}

const WEBHOOK_TIMEOUT_MS = 10_000;

export async function notifyReviewers(deps: NotifyDeps, input: NotifyInput): Promise<NotifyResult> {
  const { config } = deps;
  const link = `${config.DESK_PUBLIC_URL.replace(/\/$/, '')}/messages/${encodeURIComponent(inboundWorkflowId(input))}`;
  const channels = { webhook: config.REVIEW_NOTIFY_WEBHOOK_URL ?? null, email: config.REVIEW_NOTIFY_ADDRESS ?? null };
  const outcome = await runOperation<{ webhook: boolean; email: string | null }>(
    deps.store,
    {
      key: input.key,
      kind: OperationKind.notify,
      request: { inboxId: input.inboxId, messageId: input.messageId, event: input.event, link, channels },
      leaseMs: config.OPERATION_LEASE_MS,
    },
    async () => {
      if (channels.webhook === null && channels.email === null) return { webhook: false, email: null };
      const headline =
        input.event === 'waiting'
          ? `A reply in ${input.inboxId} waits for a reviewer (${input.reason}).`
          : `A reply in ${input.inboxId} has waited past its approval timeout: escalated (${input.reason}).`;
      const lines = [headline, `Review it: ${link}`];
      if (config.REVIEW_NOTIFY_INCLUDE_TEXT) {
        const [inbound, draft] = await Promise.all([
          fetchMessage(deps.agentmail, input),
          storedDraft(deps.store, input.draftKey),
        ]);
        lines.push(
          '',
          `Subject: ${inbound.subject ?? ''}`,
          '',
          inbound.extractedText ?? inbound.text ?? '',
          '',
          'Draft:',
          draft.text,
        );
      }
      const text = lines.join('\n');
      // The email first: it is idempotent at AgentMail, so a retry after the webhook failed sends it once.
      let email: string | null = null;
      if (channels.email !== null) {
        try {
          const sent = await deps.agentmail.inboxes.messages.send(
            input.inboxId,
            { to: [channels.email], subject: headline, text },
            { idempotencyKey: providerIdempotencyKey(input.key) },
          );
          email = sent.messageId;
        } catch (error) {
          throw providerFailure(error, `sending the ${input.event} notification ${input.key}`);
        }
      }
      if (channels.webhook !== null) await postWebhook(channels.webhook, slackEscaped(text), input.key);
      return { webhook: channels.webhook !== null, email };
    },
  );
  return { ...outcome.result, operation: outcome.operation };
}

/**
 * The text as Slack shows it literally: Slack reads `<…>` as markup (`<!channel>` pings everyone,
 * `<https://evil|Open desk>` is a link dressed in our words) and asks senders to escape exactly
 * these three characters (api.slack.com, "Escaping text"). Our own lines use no markup, so the
 * whole message is escaped: the customer's words and the draft arrive inert.
 */
export const slackEscaped = (text: string): string =>
  text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');

/** Slack's incoming-webhook body ({"text"}); a 4xx other than 408/429 will not pass by retrying. */
async function postWebhook(url: string, text: string, key: string): Promise<void> {
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text }),
      signal: AbortSignal.timeout(WEBHOOK_TIMEOUT_MS),
    });
  } catch (error) {
    throw ApplicationFailure.create({
      type: RetryableFailureType.NotifyUnavailable,
      message: `the review notification webhook did not answer for ${key}: ${error instanceof Error ? error.name : 'error'}`,
    });
  }
  await response.body?.cancel();
  if (response.ok) return;
  const final = response.status >= 400 && response.status < 500 && response.status !== 408 && response.status !== 429;
  throw ApplicationFailure.create({
    type: final ? FailureType.NotifyRejected : RetryableFailureType.NotifyUnavailable,
    message: `the review notification webhook answered ${response.status} for ${key}`,
    nonRetryable: final,
  });
}
