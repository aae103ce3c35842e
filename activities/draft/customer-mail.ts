import path from 'node:path';
import type { AgentMail } from 'agentmail';
import type { MessageRef } from '../../contract';
import {
  BUNDLED_HELP_CENTRE,
  BUNDLED_HELP_CENTRE_TOPICS,
  bundledQuestionSets,
  type RetrievedSection,
  searchableText,
} from '../../knowledge';
import { type ActivityConfig, collectionEntries } from '../../lib/config';
import type { Db } from '../../lib/db';
import { type AttachmentSource, readAttachments } from './attachment-reader';
import { citedArticles, withArticleLinks, type CitedArticle } from './citations';
import { attachmentHandoff, type DraftAttachment } from './drafting/attachments';
import { customerLanguage } from './drafting/customer-language';
import { type HandoffTopic, readHandoffTopics, topicOf } from '../../lib/handoff-topics';
import { type HandoffExample, learnHandoffs, type LearnedHandoffs } from '../../lib/learned-handoffs';
import { type ExampleFile, readExampleFiles } from '../../lib/learned-handoffs/examples';
import { signatureFor, withSignature } from '../../lib/signature';

/**
 * The draft step's part of mail as customers write it (issue 37): the message's language and
 * attachments read before drafting, the hand-offs decided before any drafter is asked (a language
 * the team does not answer, a topic a person answers, an attachment the message depends on and
 * nobody can read: no model call for any), and the reply finished after the draft check (links to
 * the cited articles, then the signature).
 */

export type CustomerMailConfig = Pick<
  ActivityConfig,
  | 'SUPPORTED_LANGUAGES'
  | 'HANDOFF_TOPICS'
  | 'HANDOFF_EXAMPLES'
  | 'KNOWLEDGE_DIR'
  | 'ATTACHMENT_READERS'
  | 'ATTACHMENT_READ_MAX_KB'
  | 'REPLY_SIGNATURE'
  | 'REPLY_INBOX_SIGNATURES'
  | 'KNOWLEDGE_LINK_BASES'
>;

export interface CustomerMail {
  language: { detected: string | null; reply: string | null };
  /** Why the language is handed off, or null. */
  unsupported: string | null;
  attachments: DraftAttachment[];
}

/** What the stored draft keeps of it for the ticket and the desk: codes, names, sizes, never the attachments' text. */
export interface MailRecord {
  language: { detected: string | null; reply: string | null };
  attachments?: Array<{ id: string; filename: string | null; contentType: string | null; size: number; read: boolean }>;
}

export async function readCustomerMail(
  deps: { agentmail: AttachmentSource; config: CustomerMailConfig },
  ref: MessageRef,
  message: Pick<AgentMail.Message, 'subject' | 'attachments'>,
  text: string,
  signal?: AbortSignal,
): Promise<CustomerMail> {
  // The body says the language; a subject alone ("Re: order 42", "Rechnung") is too little to hand a
  // message off for, so a message without text has no detected language.
  const { unsupported, ...language } = customerLanguage(text, deps.config.SUPPORTED_LANGUAGES);
  const attachments = await readAttachments(deps, ref, message.attachments, signal);
  return { language, unsupported, attachments };
}

export type EarlyHandoff = { kind: 'language' | 'topic' | 'attachment' | 'learned'; reason: string };

/** What decides a hand-off before drafting besides the message: the topics a person answers, the hand-offs learned from examples. */
export interface HandoffRules {
  topics: readonly HandoffTopic[];
  learned: LearnedHandoffs | null;
}

/**
 * A hand-off decided before any drafter is asked: a language the team does not answer, a topic a
 * person answers, an attachment the message depends on and nobody can read, or mail like the
 * examples a person answered (each read in the subject and the customer's own words: not quoted
 * mail, not a signature).
 */
export function handoffBeforeDrafting(
  mail: CustomerMail,
  message: { subject: string; text: string },
  rules: HandoffRules,
): null | EarlyHandoff {
  if (mail.unsupported !== null) return { kind: 'language', reason: mail.unsupported };
  const ownWords = `${message.subject}\n${searchableText(message.text)}`;
  const topic = topicOf(ownWords, rules.topics);
  if (topic !== null)
    return {
      kind: 'topic',
      reason: `the message is about ${topic.topic} ("${topic.phrase}"), a topic HANDOFF_TOPICS gives to a person`,
    };
  const attachment = attachmentHandoff(message.text, mail.attachments);
  if (attachment !== null) return { kind: 'attachment', reason: attachment };
  if (rules.learned === null) return null;
  const likelihood = rules.learned.likelihood(ownWords);
  return likelihood >= rules.learned.threshold
    ? {
        kind: 'learned',
        reason: `the message reads like the mail a person answers in the hand-off examples (likelihood ${likelihood.toFixed(2)}, threshold ${rules.learned.threshold})`,
      }
    : null;
}

let bundledTopics: HandoffTopic[] | undefined;

/**
 * The topics a person answers: HANDOFF_TOPICS's, else — for a worker answering from the bundled
 * help centre, as the eval measures it — the bundled shop's (read once), else none.
 */
export function handoffTopicsFor(config: Pick<ActivityConfig, 'HANDOFF_TOPICS' | 'KNOWLEDGE_DIR'>): HandoffTopic[] {
  if (config.HANDOFF_TOPICS !== null) return config.HANDOFF_TOPICS;
  const bundled = collectionEntries(config.KNOWLEDGE_DIR).some((f) => path.resolve(f.value) === BUNDLED_HELP_CENTRE);
  if (!bundled) return [];
  bundledTopics ??= readHandoffTopics(BUNDLED_HELP_CENTRE_TOPICS);
  return bundledTopics;
}

/** The bundled question sets as read, once per process. */
let bundledExamples: ExampleFile[] | undefined;

/**
 * The examples the hand-offs are learned from: HANDOFF_EXAMPLES's, none for `none`, else — for a
 * worker answering from the bundled help centre, as the eval measures it — the bundled question
 * sets (read once), else none.
 */
export function handoffExamplesFor(config: Pick<ActivityConfig, 'HANDOFF_EXAMPLES' | 'KNOWLEDGE_DIR'>): ExampleFile[] {
  if (config.HANDOFF_EXAMPLES === 'none') return [];
  if (config.HANDOFF_EXAMPLES !== null) return config.HANDOFF_EXAMPLES;
  const bundled = collectionEntries(config.KNOWLEDGE_DIR).some((f) => path.resolve(f.value) === BUNDLED_HELP_CENTRE);
  if (!bundled) return [];
  bundledExamples ??= readExampleFiles(bundledQuestionSets());
  return bundledExamples;
}

/** The examples as learned from: each message's own words, as handoffBeforeDrafting reads a message. */
export const ownWordsOf = (examples: readonly HandoffExample[]): HandoffExample[] =>
  examples.map((e) => ({ text: searchableText(e.text), handoff: e.handoff }));

/** Keyed by the files as read (a config's, or the bundled ones): learned once each. */
const learned = new WeakMap<ExampleFile[], LearnedHandoffs>();

/**
 * The hand-offs learned from handoffExamplesFor(config), once per set of examples: about three
 * seconds for the bundled 3,216, so the worker learns at start-up, before it polls.
 */
export function learnedHandoffsFor(
  config: Pick<ActivityConfig, 'HANDOFF_EXAMPLES' | 'KNOWLEDGE_DIR'>,
): LearnedHandoffs | null {
  const files = handoffExamplesFor(config);
  if (files.length === 0) return null;
  let model = learned.get(files);
  if (model === undefined) {
    model = learnHandoffs(ownWordsOf(files.flatMap((f) => f.examples)));
    learned.set(files, model);
  }
  return model;
}

export function mailRecord(mail: CustomerMail): MailRecord {
  return {
    language: mail.language,
    ...(mail.attachments.length > 0
      ? {
          attachments: mail.attachments.map((a) => ({
            id: a.id,
            filename: a.filename,
            contentType: a.contentType,
            size: a.size,
            read: a.text !== null,
          })),
        }
      : {}),
  };
}

/** The text as stored and sent: the reply, a link line per cited article it lacks, then the inbox's signature. */
export async function finishedReply(
  deps: { db: Db; config: CustomerMailConfig },
  input: { inboxId: string; reply: string; sections: readonly RetrievedSection[]; citations: readonly string[] },
): Promise<{ text: string; cited: CitedArticle[] }> {
  const cited = await citedArticles(deps, input.sections, input.citations);
  const text = withSignature(withArticleLinks(input.reply, cited), signatureFor(deps.config, input.inboxId));
  return { text, cited };
}
