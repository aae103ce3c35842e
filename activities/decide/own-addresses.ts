import { ApplicationFailure, log } from '@temporalio/activity';
import { AgentMailError, type AgentMailClient } from 'agentmail';
import { RetryableFailureType } from '../../contract';
import { mailboxOf } from '../agentmail/mailbox';

/**
 * Our own addresses (DESIGN.md, "Whom we write to"): every inbox of the AgentMail organisation,
 * plus REPLYONCE_OWN_ADDRESSES. Mail from any of them is never answered, and none of them is
 * ever a recipient — an agent answering its own other inbox is a loop of one. Compared as
 * mailboxes (activities/agentmail/mailbox.ts): `support+x@our-domain` is `support@our-domain`.
 *
 * The organisation's inboxes are listed from AgentMail (`inboxes.list`, every page) and cached in
 * the worker. The cache is refreshed when it is older than the refresh interval (five minutes by
 * default) and at once when a message arrives for an inbox the cache does not hold (a new inbox is
 * the likeliest moment for its mail to reach a sibling). Refreshes are single-flight: concurrent
 * decisions share one listing. When a refresh fails, the last good list is kept (logged) and the
 * receiving inbox and configured addresses still count; with no list at all yet, the decision
 * fails (`OwnInboxesUnavailable`, retried) — we never answer on the guess that a sender is not ours.
 */

/** Five minutes: inboxes are created rarely, and a listing is one request per page of 100. */
export const OWN_INBOXES_REFRESH_MS = 5 * 60 * 1000;
const PAGE_SIZE = 100;

/** What the listing needs of the client: a rehearsal hands in a read-only one (activities/rehearsal/reads.ts). */
export interface InboxLister {
  inboxes: { list: AgentMailClient['inboxes']['list'] };
}

export class OwnAddresses {
  private inboxes: ReadonlySet<string> | null = null;
  private loadedAt = 0;
  private inFlight: { startedAt: number; done: Promise<void> } | null = null;
  private readonly configured: ReadonlySet<string>;

  constructor(
    private readonly agentmail: InboxLister,
    configured: readonly string[],
    private readonly refreshMs: number = OWN_INBOXES_REFRESH_MS,
    private readonly now: () => number = Date.now,
  ) {
    this.configured = new Set(
      configured
        .map((a) => a.trim())
        .filter(Boolean)
        .map(mailboxOf),
    );
  }

  /**
   * Whether `address` (bare, any case) is ours, as seen from a message that arrived in
   * `receivingInbox`: that inbox, the configured addresses and every inbox of the organisation.
   */
  async isOwn(address: string, receivingInbox: string): Promise<boolean> {
    const wanted = mailboxOf(address);
    if (wanted === mailboxOf(receivingInbox) || this.configured.has(wanted)) return true;
    const known = await this.current(receivingInbox.trim().toLowerCase());
    return known.has(wanted);
  }

  /** The cached inboxes' mailboxes, refreshed first when stale or when `receivingInbox` is not among them. */
  private async current(receivingInbox: string): Promise<ReadonlySet<string>> {
    const requestedAt = this.now();
    const stale = this.inboxes === null || requestedAt - this.loadedAt >= this.refreshMs;
    if (stale || !this.inboxes?.has(mailboxOf(receivingInbox))) await this.refresh(requestedAt);
    if (this.inboxes === null) throw new Error('the list of our AgentMail inboxes could not be loaded yet');
    return this.inboxes;
  }

  /** Joins a listing that started at or after `requestedAt`; otherwise waits for it and starts one. */
  private async refresh(requestedAt: number): Promise<void> {
    while (this.inFlight !== null && this.inFlight.startedAt < requestedAt) await this.inFlight.done;
    if (this.inFlight === null) {
      const startedAt = this.now();
      const done = this.load(startedAt).finally(() => {
        this.inFlight = null;
      });
      this.inFlight = { startedAt, done };
    }
    await this.inFlight.done;
  }

  private async load(startedAt: number): Promise<void> {
    try {
      const addresses = new Set<string>();
      let pageToken: string | undefined;
      do {
        const page = await this.agentmail.inboxes.list({ limit: PAGE_SIZE, pageToken });
        for (const inbox of page.inboxes) {
          addresses.add(mailboxOf(inbox.inboxId));
          addresses.add(mailboxOf(inbox.email));
        }
        pageToken = page.nextPageToken;
      } while (pageToken);
      this.inboxes = addresses;
      this.loadedAt = startedAt;
    } catch (error) {
      // The last good list stays in use; the next decision tries again. Status and name only:
      // the SDK's message carries the response body.
      const status = error instanceof AgentMailError ? error.statusCode : undefined;
      const name = error instanceof Error ? error.name : 'unknown';
      log.warn('could not list our AgentMail inboxes; keeping the last list', {
        status,
        error: name,
        cachedInboxes: this.inboxes?.size ?? 0,
      });
      if (this.inboxes === null) {
        throw ApplicationFailure.create({
          type: RetryableFailureType.OwnInboxesUnavailable,
          message:
            `cannot list the organisation's AgentMail inboxes (${status ?? name}); no message is answered until ` +
            'we know which senders are ours (the API key must be allowed to list inboxes)',
          nonRetryable: false,
        });
      }
    }
  }
}
