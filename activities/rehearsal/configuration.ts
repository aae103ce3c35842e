import { createHash } from 'node:crypto';
import type { ActivityConfig } from '../../lib/config';
import type { Db } from '../../lib/db';
import { signatureFor } from '../../lib/signature';
import { collectionsFor, liveCollections, SEARCH_VERSION } from '../../knowledge';
import {
  DEFAULT_RELEVANCE_FLOOR,
  SHARE_THAT_COVERS_UNKNOWN_WORDS,
  UNKNOWN_WORDS_FOR_HANDOFF,
} from '../../knowledge/relevance-floor';
import { handoffExamplesFor, handoffTopicsFor } from '../draft/customer-mail';
import type { Drafter } from '../draft/drafting/drafter';

export type RehearsalConfig = Pick<
  ActivityConfig,
  | 'OPERATION_LEASE_MS'
  | 'REPLYONCE_INBOXES'
  | 'REPLYONCE_OWN_ADDRESSES'
  | 'REPLYONCE_REPLY_TO_DOMAINS'
  | 'REPLY_MAX_AGE'
  | 'REPLY_COALESCE_MS'
  | 'APPROVAL_REQUIRED_INBOXES'
  | 'DRAFT_ALLOWED_LINK_DOMAINS'
  | 'DRAFT_PHONE_REGION'
  | 'SUPPORTED_LANGUAGES'
  | 'HANDOFF_TOPICS'
  | 'HANDOFF_EXAMPLES'
  | 'KNOWLEDGE_DIR'
  | 'ATTACHMENT_READERS'
  | 'ATTACHMENT_READ_MAX_KB'
  | 'REPLY_SIGNATURE'
  | 'REPLY_INBOX_SIGNATURES'
  | 'KNOWLEDGE_LINK_BASES'
  | 'KNOWLEDGE_INBOX_COLLECTIONS'
  | 'KNOWLEDGE_TOP_K'
  | 'KNOWLEDGE_RELEVANCE_FLOORS'
  | 'REHEARSAL_ESCALATION_LABELS'
>;

const sha = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16);

/**
 * What is rehearsed, as the report and the comparison show it: the drafter and its instructions
 * (a hash), the knowledge (its collections and a hash of their live sections and synonyms), the
 * rules, and what is added to every draft (a hash of the signature, the collections' link bases).
 * No secret, no text. A rehearsal's messages are all rehearsed under one configuration: a worker
 * whose configuration differs refuses to go on (docs/rehearsal.md).
 */
export async function rehearsalConfiguration(
  deps: { db: Db; drafter: Drafter; config: RehearsalConfig },
  inboxId: string,
): Promise<Record<string, unknown>> {
  const { config } = deps;
  const collections = await liveCollections(deps.db, collectionsFor(inboxId, config.KNOWLEDGE_INBOX_COLLECTIONS));
  const knowledge = await deps.db.query<{ sections: number; content: string | null; synonyms: string | null }>(
    `SELECT (SELECT count(*)::int FROM knowledge_sections s JOIN knowledge_articles a USING (collection, source)
              WHERE s.collection = ANY($1::text[]) AND a.retired_at IS NULL) AS sections,
            (SELECT md5(string_agg(s.content_hash, ',' ORDER BY s.id)) FROM knowledge_sections s
               JOIN knowledge_articles a USING (collection, source)
              WHERE s.collection = ANY($1::text[]) AND a.retired_at IS NULL) AS content,
            (SELECT md5(string_agg(coalesce(c.synonyms_hash, ''), ',' ORDER BY c.name)) FROM knowledge_collections c
              WHERE c.name = ANY($1::text[])) AS synonyms`,
    [collections],
  );
  const row = knowledge.rows[0];
  const inbox = inboxId.toLowerCase();
  return {
    drafter: deps.drafter.name,
    instructions: sha(deps.drafter.instructionsFor?.(inboxId) ?? ''),
    knowledge: {
      collections,
      sections: row?.sections ?? 0,
      content: row?.content ?? null,
      synonyms: row?.synonyms ?? null,
      topK: config.KNOWLEDGE_TOP_K,
      relevanceFloors: config.KNOWLEDGE_RELEVANCE_FLOORS,
      // The built-in rules too, not only what is configured: an upgrade that moves the default
      // floor changes which mail is handed off as much as a configured floor would.
      relevanceDefaults: {
        floor: DEFAULT_RELEVANCE_FLOOR,
        unknownWords: UNKNOWN_WORDS_FOR_HANDOFF,
        coveringShare: SHARE_THAT_COVERS_UNKNOWN_WORDS,
      },
      // How articles and mail are read for search (numbers, knowledge/sync.ts): a build that reads
      // them otherwise retrieves other articles for the same mail.
      searchVersion: SEARCH_VERSION,
    },
    approvalRequired:
      config.APPROVAL_REQUIRED_INBOXES.includes('*') || config.APPROVAL_REQUIRED_INBOXES.includes(inbox),
    allowedLinkDomains: [...config.DRAFT_ALLOWED_LINK_DOMAINS].sort(),
    phoneRegion: config.DRAFT_PHONE_REGION,
    supportedLanguages: config.SUPPORTED_LANGUAGES,
    // The topics a person answers, as a hash: a changed file changes which mail is handed off.
    handoffTopics: sha(JSON.stringify(handoffTopicsFor(config))),
    // The examples the hand-offs are learned from, as a hash: other examples, another model.
    handoffExamples: sha(JSON.stringify(handoffExamplesFor(config).map((f) => f.examples))),
    attachmentReaders: [...config.ATTACHMENT_READERS].sort(),
    ownAddresses: sha([...config.REPLYONCE_OWN_ADDRESSES].sort().join(',')),
    replyToDomains: [...config.REPLYONCE_REPLY_TO_DOMAINS].sort(),
    inboxServed: config.REPLYONCE_INBOXES.length === 0 || config.REPLYONCE_INBOXES.includes(inbox),
    replyMaxAgeMs: config.REPLY_MAX_AGE,
    coalesceMs: config.REPLY_COALESCE_MS,
    escalationLabels: [...config.REHEARSAL_ESCALATION_LABELS].sort(),
    // What is added to every draft after the model: the inbox's signature and its articles' links.
    signature: sha(signatureFor(config, inboxId) ?? ''),
    linkBases: Object.fromEntries(
      collections.flatMap((c) => {
        const base = config.KNOWLEDGE_LINK_BASES[c];
        return base === undefined ? [] : [[c, base]];
      }),
    ),
  };
}
