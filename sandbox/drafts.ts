import { randomUUID } from 'node:crypto';
import type { VirtualClock } from './clock';
import { ApiError } from './errors';
import { omitUndefined } from './views';
import type { Sequenced } from './paging';
import type { DraftRaw } from './wire';

type Generated = 'inbox_id' | 'draft_id' | 'labels' | 'preview' | 'updated_at' | 'created_at';
export type NewDraft = Omit<DraftRaw, Generated> & { labels?: string[] | undefined };

/**
 * Drafts, with AgentMail's client_id idempotency: creating with a client_id that an existing
 * draft carries returns that draft (200) and creates nothing. AgentMail deletes a draft once it
 * is sent, so afterwards the same client_id creates a fresh draft — the documented behaviour,
 * and a trap for callers who treat client_id as "ever created".
 */
export class DraftStore {
  private seq = 0;
  private readonly drafts = new Map<string, Sequenced<DraftRaw>>();

  constructor(private readonly clock: VirtualClock) {}

  create(inboxId: string, input: NewDraft): { draft: DraftRaw; created: boolean } {
    if (input.client_id !== undefined) {
      const existing = this.listOf(inboxId).find((d) => d.value.client_id === input.client_id);
      if (existing) return { draft: existing.value, created: false };
    }
    const now = this.clock.iso();
    const draft: DraftRaw = omitUndefined({
      ...input,
      inbox_id: inboxId,
      draft_id: randomUUID(),
      labels: input.labels ?? [],
      preview: input.text?.slice(0, 100),
      updated_at: now,
      created_at: now,
    });
    this.drafts.set(key(inboxId, draft.draft_id), { seq: ++this.seq, value: draft });
    return { draft, created: true };
  }

  get(inboxId: string, draftId: string): DraftRaw {
    const found = this.drafts.get(key(inboxId, draftId));
    if (!found) throw ApiError.notFound('Draft');
    return found.value;
  }

  listOf(inboxId: string): Sequenced<DraftRaw>[] {
    return [...this.drafts.values()].filter((d) => d.value.inbox_id === inboxId);
  }

  /** Changes the named fields (AgentMail's PATCH: what anyone with the console or the API key can do to a draft). */
  update(
    inboxId: string,
    draftId: string,
    changes: Partial<Pick<DraftRaw, 'to' | 'cc' | 'bcc' | 'reply_to' | 'subject' | 'text' | 'html'>>,
  ): DraftRaw {
    const found = this.drafts.get(key(inboxId, draftId));
    if (!found) throw ApiError.notFound('Draft');
    const text = changes.text ?? found.value.text;
    found.value = omitUndefined({
      ...found.value,
      ...changes,
      preview: text?.slice(0, 100),
      updated_at: this.clock.iso(),
    });
    return found.value;
  }

  /** Whether a draft was there to delete. */
  delete(inboxId: string, draftId: string): boolean {
    return this.drafts.delete(key(inboxId, draftId));
  }

  get size(): number {
    return this.drafts.size;
  }

  reset(): void {
    this.drafts.clear();
  }
}

const key = (inboxId: string, id: string): string => JSON.stringify([inboxId, id]);
