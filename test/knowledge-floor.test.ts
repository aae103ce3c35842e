import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { before, describe, test } from 'node:test';
import { OfflineDrafter } from '../activities/draft/drafting/offline-drafter';
import { judgeAnswer } from '../activities/draft/drafting/answer';
import {
  DEFAULT_RELEVANCE_FLOOR,
  parseQuestions,
  readFolder,
  readSynonymFile,
  relevanceVerdict,
  retrieve,
  SEARCH_VERSION,
  SHARE_THAT_COVERS_UNKNOWN_WORDS,
  UNKNOWN_WORDS_FOR_HANDOFF,
  retrieveWithRelevance,
  syncCollection,
  syncConfigured,
} from '../knowledge';
import { loadWorkerConfig } from '../lib/config';
import type { Db } from '../lib/db';
import { rehearsalConfiguration } from '../activities/rehearsal/configuration';
import { BUNDLED, BUNDLED_SYNONYMS, calibrateFloor, HELD_OUT_SETS, runEvaluation } from '../scripts/eval';
import { bundledCollection } from './support/knowledge-collection';

// The relevance floor (issue 37): retrieval says when no article is relevant enough, the offline
// drafter hands off below it with the reason, and the eval's hand-off figures are the floor's.
const bundled = bundledCollection('floor', { synonyms: true });
const collection = bundled.name;
let db: Db;
before(() => {
  db = bundled.db;
});

async function draftFor(text: string) {
  const retrieval = await retrieveWithRelevance(db, { collections: [collection], text, limit: 5 });
  const request = {
    inboxId: 'floor@replyonce.invalid',
    messageId: 'm1',
    subject: '',
    text,
    timestamp: new Date(),
    thread: [],
    knowledge: true,
    articles: retrieval.sections.map((s) => ({ id: s.id, title: s.title, heading: s.heading, text: s.body })),
    relevance: relevanceVerdict(retrieval.relevance, {}),
  };
  return { retrieval, judged: judgeAnswer(await new OfflineDrafter().draft(request), request) };
}

describe('the relevance floor', () => {
  test('a question no article covers is below the floor: the offline drafter hands off, the reason names the floor', async () => {
    const { retrieval, judged } = await draftFor('Is the Alpine 45 backpack allowed as cabin luggage on Ryanair?');
    assert.ok(retrieval.relevance[0]!.score < DEFAULT_RELEVANCE_FLOOR);
    assert.equal(judged.handoff?.kind, 'model');
    assert.match(judged.handoff.reason, /no article is relevant enough/);
    assert.ok(!judged.handoff.reason.includes('Ryanair'), 'the reason holds numbers and names, no customer text');
  });

  test('a covered question is above it: answered from the best article, cited', async () => {
    const { retrieval, judged } = await draftFor('Do you ship to Norway?');
    assert.ok(retrieval.relevance[0]!.score >= DEFAULT_RELEVANCE_FLOOR);
    assert.equal(judged.handoff, null);
    assert.deepEqual(judged.citations, [retrieval.sections[0]!.id]);
    assert.equal(retrieval.sections[0]!.source, 'shipping/countries.md');
  });

  test('per collection: one collection above its floor is enough; `*` and the default for the others', () => {
    const relevance = [
      { collection: 'billing', score: 0.5 },
      { collection: 'default', score: 0.2 },
    ];
    assert.equal(relevanceVerdict(relevance, { billing: 0.6 }).below, true);
    assert.equal(relevanceVerdict(relevance, { billing: 0.4 }).below, false);
    assert.equal(relevanceVerdict(relevance, { '*': 0.6, default: 0.1 }).below, false);
    const verdict = relevanceVerdict(relevance, { '*': 0.9 });
    assert.match(verdict.reason ?? '', /billing 0\.50 < 0\.90, default 0\.20 < 0\.90/);
    assert.equal(relevanceVerdict([], {}).below, true);
  });

  test('the relevance is a share, not a rank: a one-article collection is not below the floor for its size', async () => {
    const tiny = `floor-tiny-${randomUUID().slice(0, 8)}`;
    const { documents } = await readFolder(BUNDLED.knowledge);
    await syncCollection(db, {
      collection: tiny,
      language: 'english',
      documents: documents.filter((d) => d.source === 'company/contact.md'),
    });
    try {
      const { relevance } = await retrieveWithRelevance(db, {
        collections: [tiny],
        text: 'What are your opening hours?',
        limit: 5,
      });
      assert.ok(relevance[0]!.score >= DEFAULT_RELEVANCE_FLOOR, String(relevance[0]!.score));
    } finally {
      await db.query('DELETE FROM knowledge_collections WHERE name = $1', [tiny]);
    }
  });

  test("a question in another language is measured in its words, not its language's stop words", async () => {
    // Read as English, "wie", "die", "bei", "euch" are words the articles lack: a covered German
    // question used to score below the floor and be handed off for its language alone.
    const covered = await draftFor('Wie funktioniert die Rückgabe bei euch?');
    assert.ok(
      covered.retrieval.relevance[0]!.score >= DEFAULT_RELEVANCE_FLOOR,
      String(covered.retrieval.relevance[0]!.score),
    );
    assert.equal(covered.judged.handoff, null);
    assert.match(covered.retrieval.sections[0]!.source, /^returns\//);
    // An uncovered one in the same language is still below it.
    const uncovered = await draftFor(
      'Ich möchte mich beim Geschäftsführer über einen unfreundlichen Mitarbeiter beschweren.',
    );
    assert.ok(
      uncovered.retrieval.relevance[0]!.score < DEFAULT_RELEVANCE_FLOOR,
      String(uncovered.retrieval.relevance[0]!.score),
    );
    assert.equal(uncovered.judged.handoff?.kind, 'model');
  });
});

describe("the eval's hand-off figures", () => {
  test("with the offline drafter they are the floor's: real figures, and a floor of 0 hands off nothing found only", async () => {
    const report = await runEvaluation(db, {
      ...BUNDLED,
      language: 'english',
      topK: 5,
      drafter: new OfflineDrafter(),
      synonyms: BUNDLED_SYNONYMS,
    });
    assert.notEqual(report.scores.handoffPrecision, null);
    assert.notEqual(report.scores.handoffRecall, null);
    assert.equal(report.floor, DEFAULT_RELEVANCE_FLOOR);
    assert.equal(report.relevance.length, report.scores.questions);
    const lower = await runEvaluation(db, {
      ...BUNDLED,
      language: 'english',
      topK: 5,
      drafter: new OfflineDrafter(),
      synonyms: BUNDLED_SYNONYMS,
      floor: 0,
    });
    assert.ok((lower.scores.handoffRecall ?? 0) <= (report.scores.handoffRecall ?? 0));
  });

  test('calibration: the best F1 among floors that hand off few answerable questions', () => {
    assert.deepEqual(calibrateFloor([0.1, 0.2, 0.9, 0.8, 0.7], [true, true, false, false, false]), {
      floor: 0.21,
      precision: 1,
      recall: 1,
    });
    assert.equal(calibrateFloor([0.5], [false]), null);
  });

  test('calibration counts what the topics hand off: a floor must add to them, not only beat nothing', () => {
    // Two hand-offs the topics catch (scores 0.6, 0.7), one they leave (0.1), answerable 0.2 and up.
    const scores = [0.6, 0.7, 0.1, 0.2, 0.3, 0.8, 0.9, 0.9, 0.9, 0.9, 0.9];
    const handoff = [true, true, true, false, false, false, false, false, false, false, false];
    const decided = [true, true, false, false, false, false, false, false, false, false, false];
    assert.deepEqual(calibrateFloor(scores, handoff, decided), { floor: 0.11, precision: 1, recall: 1 });
    // The one the topics leave scores like the answerable mail: no floor adds F1, so none is chosen (0).
    const alike = [0.6, 0.7, 0.5, 0.2, 0.3, 0.5, 0.9, 0.9, 0.9, 0.9, 0.9];
    assert.deepEqual(calibrateFloor(alike, handoff, decided), { floor: 0, precision: 1, recall: 2 / 3 });
  });
});

describe('a rehearsal names the relevance rules it ran under', () => {
  test('the built-in floor, the unknown-words rule and how articles are read, beside the configured floors', async () => {
    const config = loadWorkerConfig({ DATABASE_URL: 'postgres://unused@127.0.0.1:1/x', AGENTMAIL_API_KEY: 'k' });
    const configuration = await rehearsalConfiguration(
      { db, drafter: new OfflineDrafter(), config },
      'rehearse@replyonce.invalid',
    );
    const knowledge = configuration.knowledge as Record<string, unknown>;
    assert.deepEqual(knowledge.relevanceFloors, {});
    assert.deepEqual(knowledge.relevanceDefaults, {
      floor: DEFAULT_RELEVANCE_FLOOR,
      unknownWords: UNKNOWN_WORDS_FOR_HANDOFF,
      coveringShare: SHARE_THAT_COVERS_UNKNOWN_WORDS,
    });
    assert.equal(knowledge.searchVersion, SEARCH_VERSION);
  });
});

describe('the live default runs what the figures measured', () => {
  test('a collection synced from the bundled help centre loads its synonyms, as npm run eval does; a file named for it wins', async () => {
    const live = `floor-live-${randomUUID().slice(0, 8)}`;
    const sources = (synonyms?: string) => ({
      KNOWLEDGE_DIR: `${live}=${BUNDLED.knowledge}`,
      KNOWLEDGE_SYNONYMS: synonyms,
      KNOWLEDGE_LANGUAGE: 'english',
      KNOWLEDGE_COLLECTION_LANGUAGES: {},
    });
    try {
      const report = await syncConfigured(db, sources());
      const groups = (await readSynonymFile(BUNDLED_SYNONYMS)).length;
      assert.deepEqual(report.collections[0]?.synonyms, { groups, change: 'loaded' });
      const hire = await retrieve(db, { collections: [live], text: 'Can I hire a tent?', limit: 3 });
      assert.equal(hire[0]?.source, 'products/rental.md');
      const own = folderWithSynonyms('rent, borrow\n');
      const replaced = await syncConfigured(db, sources(`${live}=${own}`));
      assert.deepEqual(replaced.collections[0]?.synonyms, { groups: 1, change: 'replaced' });
    } finally {
      await db.query('DELETE FROM knowledge_collections WHERE name = $1', [live]);
    }
  });
});

function folderWithSynonyms(text: string): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'synonyms-')), 'synonyms.txt');
  writeFileSync(file, text);
  return file;
}

describe('the other held-out sets', () => {
  for (const [set, file] of Object.entries(HELD_OUT_SETS).filter(([set]) => set !== 'held-out'))
    test(`npm run eval -- --${set} is well-formed: every expected article exists, some questions expect a hand-off`, async () => {
      const questions = parseQuestions(readFileSync(file, 'utf8'));
      assert.ok(questions.length >= 40, `${questions.length} questions`);
      const { documents } = await readFolder(BUNDLED.knowledge);
      const sources = new Set(documents.map((d) => d.source));
      assert.deepEqual(
        questions.flatMap((q) => q.expected_sources).filter((s) => !sources.has(s)),
        [],
      );
      assert.ok(questions.some((q) => q.handoff && q.expected_sources.length === 0));
    });
});
