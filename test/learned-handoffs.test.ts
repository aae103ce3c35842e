import assert from 'node:assert/strict';
import { randomInt, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  type CustomerMail,
  handoffBeforeDrafting,
  handoffExamplesFor,
  learnedHandoffsFor,
  ownWordsOf,
} from '../activities/draft/customer-mail';
import { OfflineDrafter } from '../activities/draft/drafting/offline-drafter';
import { draftKey, operationsQuery, type MessageRef } from '../contract';
import { BUNDLED_HELP_CENTRE, bundledQuestionSets, parseQuestions, readFolder, syncCollection } from '../knowledge';
import { ConfigError, loadWorkerConfig } from '../lib/config';
import { createDb, type Db } from '../lib/db';
import { inboundWorkflowId } from '../lib/hashing';
import { DEFAULT_THRESHOLD, learnHandoffs, type LearnedHandoffs } from '../lib/learned-handoffs';
import { readExampleFiles } from '../lib/learned-handoffs/examples';
import { countFeatures, wordsOf } from '../lib/learned-handoffs/features';
import type { ModelStandInControl } from '../sandbox/model/control-client';
import { BUNDLED, BUNDLED_SYNONYMS, HELD_OUT_SETS, runEvaluation } from '../scripts/eval';
import { Harness } from './support/harness';
import { startModelStandIn } from './support/model-stand-in';
import { testEnv } from './support/env';

// Hand-offs learned from labelled mail (issue 37): a customer's own case told in an article's
// words, which the topics cannot name and the relevance floor cannot see, learned from the bundled
// question sets; measured on a set the model did not learn from, never on its own examples.

const env = { DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/db', AGENTMAIL_API_KEY: 'k' };
const examplesOf = (file: string) => parseQuestions(readFileSync(file, 'utf8'));
/** The last bundled set, and the hand-offs learned from every other one. */
const measuredSet = Object.values(HELD_OUT_SETS).at(-1)!;

describe('hand-offs learned from examples, without a server', () => {
  let learned: LearnedHandoffs;
  before(() => {
    const others = bundledQuestionSets().filter((f) => f !== measuredSet);
    learned = learnHandoffs(ownWordsOf(others.flatMap(examplesOf)));
  });

  test('the features: words and pairs of words, three- to five-letter pieces, every digit read as 0', () => {
    assert.deepEqual(wordsOf('Order FH-30788: £54.99, didn’t arrive'), [
      'order',
      'fh',
      '00000',
      '00',
      '00',
      "didn't",
      'arrive',
    ]);
    const { words, pieces } = countFeatures('Refund refund short');
    assert.equal(words.get('w refund'), 2);
    assert.equal(words.get('b refund short'), 1);
    assert.equal(pieces.get('c  re'), 2, 'a piece at the start of a word');
    assert.equal(pieces.get('c ort '), 1, 'a piece at its end');
    assert.equal(pieces.get('c refun'), 2);
    assert.equal(pieces.get('c refund'), undefined, 'at most five letters');
  });

  test('on a set it did not learn from: most hand-offs caught, answerable mail rarely taken', () => {
    const questions = examplesOf(measuredSet);
    const taken = (handoff: boolean) =>
      questions.filter(
        (q) => q.handoff === handoff && learned.likelihood(ownWordsOf([q])[0]!.text) >= learned.threshold,
      ).length;
    const handoffs = questions.filter((q) => q.handoff).length;
    // On the twelve blind sets measured once, alone it caught 0.70-1.00 of each set's hand-offs
    // (topics and floor aside); a model that learned nothing catches none.
    assert.ok(taken(true) >= 0.6 * handoffs, `caught ${taken(true)} of ${handoffs} hand-offs`);
    assert.ok(taken(false) <= 3, `took ${taken(false)} answerable questions`);
    const ownCase = learned.likelihood(
      'Subject: refund is short\nHi, I got my refund for order FH-33901 but it is £10 less than I paid. Can someone look into this?',
    );
    const policy = learned.likelihood('Subject: returns\nHi, how long do I have to send back boots that do not fit?');
    assert.ok(ownCase >= DEFAULT_THRESHOLD && policy < DEFAULT_THRESHOLD, `${ownCase} and ${policy}`);
  });

  test('the same examples learn the same model: no random order, no seed', () => {
    const examples = ownWordsOf(
      examplesOf(HELD_OUT_SETS['held-out-10']!).concat(examplesOf(HELD_OUT_SETS['held-out-11']!)),
    );
    const [a, b] = [learnHandoffs(examples), learnHandoffs(examples)];
    for (const q of examplesOf(measuredSet).slice(0, 20)) assert.equal(a.likelihood(q.text), b.likelihood(q.text));
  });

  test('too few of either kind is refused, saying how many', () => {
    const few = Array.from({ length: 30 }, (_, i) => ({ text: `question ${i}`, handoff: i < 5 }));
    assert.throws(
      () => learnHandoffs(few),
      /5 hand-offs and 25 answerable messages; learning needs at least 20 of each/,
    );
  });

  test('before drafting: a learned hand-off names its likelihood; a language, a topic or an attachment comes first', () => {
    const mail: CustomerMail = { language: { detected: 'en', reply: 'en' }, unsupported: null, attachments: [] };
    const always: LearnedHandoffs = { examples: 40, handoffs: 20, threshold: 0.7, likelihood: () => 0.83 };
    const message = { subject: 'refund short', text: 'My refund is £10 less than I paid.' };
    assert.deepEqual(handoffBeforeDrafting(mail, message, { topics: [], learned: always }), {
      kind: 'learned',
      reason:
        'the message reads like the mail a person answers in the hand-off examples (likelihood 0.83, threshold 0.7)',
    });
    assert.equal(
      handoffBeforeDrafting(mail, message, { topics: [], learned: { ...always, likelihood: () => 0.69 } }),
      null,
      'below the threshold',
    );
    assert.equal(handoffBeforeDrafting(mail, message, { topics: [], learned: null }), null, 'no examples, no learning');
    const topics = [{ name: 'refunds', phrases: [{ text: 'refund', words: ['refund'] }] }];
    assert.equal(handoffBeforeDrafting(mail, message, { topics, learned: always })?.kind, 'topic');
    assert.equal(
      handoffBeforeDrafting({ ...mail, unsupported: 'fr is not supported' }, message, { topics, learned: always })
        ?.kind,
      'language',
    );
  });

  test('HANDOFF_EXAMPLES: files read at start-up, `none` for none; unset, the bundled sets only for a worker answering from the bundled help centre', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'examples-'));
    const good = path.join(dir, 'good.jsonl');
    writeFileSync(good, readFileSync(measuredSet, 'utf8'));
    const configured = loadWorkerConfig({ ...env, HANDOFF_EXAMPLES: ` ${good} ` });
    assert.deepEqual(
      handoffExamplesFor(configured).map((f) => [f.file, f.examples.length]),
      [[good, examplesOf(measuredSet).length]],
    );
    assert.equal(learnedHandoffsFor(configured)?.examples, examplesOf(measuredSet).length);
    assert.equal(learnedHandoffsFor(configured), learnedHandoffsFor(configured), 'learned once');
    assert.equal(loadWorkerConfig(env).HANDOFF_EXAMPLES, null);
    assert.equal(learnedHandoffsFor(loadWorkerConfig(env)), null, 'unset, and no bundled folder: nothing learned');
    const bundled = loadWorkerConfig({ ...env, KNOWLEDGE_DIR: `shop=${BUNDLED_HELP_CENTRE}` });
    assert.deepEqual(
      handoffExamplesFor(bundled).map((f) => f.file),
      bundledQuestionSets(),
      'what `npm run eval` learns from runs',
    );
    assert.ok(bundledQuestionSets().length >= 30);
    const off = loadWorkerConfig({ ...env, KNOWLEDGE_DIR: BUNDLED_HELP_CENTRE, HANDOFF_EXAMPLES: 'none' });
    assert.equal(learnedHandoffsFor(off), null, '`none` learns nothing, even for the bundled folder');

    const malformed = path.join(dir, 'malformed.jsonl');
    writeFileSync(malformed, '{"text": "hi", "expected_sources": [], "handoff": true}\n{"text": "hello"}\n');
    const few = path.join(dir, 'few.jsonl');
    writeFileSync(few, '{"text": "hi", "expected_sources": [], "handoff": true}\n');
    for (const [value, says] of [
      [malformed, /HANDOFF_EXAMPLES .*malformed\.jsonl: line 2 is not \{"text".*the eval's question format\), or none/],
      [`${good},${path.join(dir, 'missing.jsonl')}`, /HANDOFF_EXAMPLES .*missing\.jsonl: no such file/],
      [few, /HANDOFF_EXAMPLES .*1 hand-offs and 0 answerable messages; learning needs at least 20 of each/],
    ] as const)
      assert.throws(
        () => loadWorkerConfig({ ...env, HANDOFF_EXAMPLES: value }),
        (error: unknown) => error instanceof ConfigError && says.test(error.message),
        value,
      );
  });
});

describe('the eval never judges a question by a model that learned it', () => {
  let db: Db;
  before(() => {
    db = createDb(testEnv.databaseUrl, { queryTimeoutMs: 120_000 });
  });
  after(() => db.end());

  test('the measured set among the examples is left out, and the learned hand-offs add to the topics and the floor', async () => {
    const options = {
      knowledge: BUNDLED.knowledge,
      questions: measuredSet,
      language: 'english',
      topK: 5,
      drafter: new OfflineDrafter(),
      synonyms: BUNDLED_SYNONYMS,
    };
    const measured = examplesOf(measuredSet).length;
    const others = [HELD_OUT_SETS['held-out-10']!, HELD_OUT_SETS['held-out-11']!];
    const learning = await runEvaluation(db, { ...options, handoffExamples: [...others, measuredSet] });
    assert.deepEqual(learning.handoffExamples, {
      files: 3,
      examples: others.flatMap(examplesOf).length,
      leftOut: measured,
    });
    const without = await runEvaluation(db, options);
    assert.equal(without.handoffExamples, null);
    assert.ok(
      (learning.scores.handoffRecall ?? 0) > (without.scores.handoffRecall ?? 0),
      `${learning.scores.handoffRecall} with, ${without.scores.handoffRecall} without`,
    );
    assert.equal(learning.scores.recallAt3, without.scores.recallAt3, 'retrieval is not what changed');
  });
});

describe('learned hand-offs, end to end', () => {
  const API_KEY = 'learned-handoffs-key';
  const inbox = 'learned@replyonce.test';
  const collection = `learned-${randomUUID().slice(0, 8)}`;
  let h: Harness;
  let model: ModelStandInControl;
  let closeModel: () => Promise<void>;

  before(async () => {
    const standIn = await startModelStandIn(API_KEY);
    closeModel = standIn.close;
    model = standIn.control;
    h = await Harness.start({
      drafter: standIn.drafter,
      handoff: 'ticket',
      knowledgeInboxCollections: { [inbox]: [collection] },
      activityConfig: { HANDOFF_EXAMPLES: readExampleFiles(bundledQuestionSets()) },
    });
    await syncCollection(h.db, {
      collection,
      language: 'english',
      documents: (await readFolder(BUNDLED.knowledge)).documents,
    });
  });
  after(async () => {
    await h?.db.query('DELETE FROM knowledge_collections WHERE name = $1', [collection]);
    await h?.close();
    await closeModel?.();
  });

  const arrive = async (subject: string, text: string) => {
    const inbound = await h.sandbox.inbound({
      inbox_id: inbox,
      from: `Ada <ada-${randomUUID().slice(0, 8)}@customer.example>`,
      subject,
      text,
    });
    return { inboxId: inbox, messageId: inbound.message.message_id } satisfies MessageRef;
  };

  test('a customer’s own case in an article’s words goes to a person without a model call; a question the articles answer is answered', async () => {
    // Digits only in the marker: the subject is searched too, and a number is never spell-corrected.
    const marker = randomInt(1e9, 9e9);
    const short = await arrive(
      `refund is short ${marker}`,
      "Hi, I got my refund for the returned boots but it's £10 less than I paid. I'm in Leeds so the return should have been free. Order FH-33901. Can someone look into this?\nCheers, Tom",
    );
    const norway = await arrive(`shipping ${marker}`, 'Hello, do you ship to Norway? Thanks, Ada');

    assert.equal((await h.resultOf(short)).status, 'handed_off');
    assert.equal((await model.calls({ contains: 'FH-33901' })).length, 0, 'no model call');
    const draft = (await h.client.workflow.getHandle(inboundWorkflowId(short)).query(operationsQuery)).find(
      (v) => v.kind === 'draft',
    );
    assert.match(draft?.summary ?? '', /handoff: learned/);
    const [ticket] = await h.ticketsFor(short);
    assert.match(
      ticket!.note,
      /Handed off to a person: the message reads like the mail a person answers in the hand-off examples \(likelihood 0\.\d\d, threshold 0\.7\)/,
    );
    const stored = await h.db.query<{ result: { handoff?: { kind: string } } }>(
      'SELECT result FROM operations WHERE operation_key = $1',
      [draftKey(short)],
    );
    assert.equal(stored.rows[0]?.result.handoff?.kind, 'learned');

    assert.equal((await h.resultOf(norway)).status, 'sent', 'the shipping question is answered');
    assert.equal((await model.calls({ contains: 'ship to Norway' })).length, 1);
  });
});
