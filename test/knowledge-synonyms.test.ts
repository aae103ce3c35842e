import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  parseSynonyms,
  phraseQuery,
  readFolder,
  readSynonymFile,
  retrieve,
  syncCollection,
  syncConfigured,
  syncSynonyms,
} from '../knowledge';
import { ConfigError, loadKnowledgeConfig } from '../lib/config';
import { createDb, type Db } from '../lib/db';
import { OfflineDrafter } from '../activities/draft/drafting/offline-drafter';
import { runEvaluation } from '../scripts/eval';
import { testEnv } from './support/env';

// Synonym groups per collection (docs/knowledge.md, "Synonyms") on the suite's real Postgres: the
// file's format, the sync's idempotence, the matching rule at search time, and the eval's flags.
let db: Db;
const scratch: string[] = [];
before(() => {
  db = createDb(testEnv.databaseUrl);
});
after(async () => {
  await db.end();
  for (const folder of scratch) rmSync(folder, { recursive: true, force: true });
});

const unique = (name: string) => `${name}-${randomUUID().slice(0, 8)}`;

function folderWith(files: Record<string, string>): string {
  const root = mkdtempSync(path.join(tmpdir(), 'synonyms-'));
  scratch.push(root);
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    writeFileSync(path.join(root, name), text);
  }
  return root;
}

/** A synonyms file of its own folder (outside the articles' folder, as a team would keep it). */
const fileWith = (text: string) => path.join(folderWith({ 'synonyms.txt': text }), 'synonyms.txt');

const ARTICLES = {
  'rentals.md': '# Rentals\nWe rent out canoes by the day.',
  'returns.md': '# Returns\nReturn any unused item within 30 days for a full refund.',
  'shipping.md': '# Shipping\nWe ship to Norway and Sweden.',
  'walks.md': '# Guided walks\nOur guides lead a hike every Sunday.',
  'restocking.md': '# Restocking\nWe email you when a tent is back.',
};
const SYNONYMS = 'rent, hire\nreturn, send back\n';

async function syncArticles(collection: string, files: Record<string, string> = ARTICLES) {
  const { documents } = await readFolder(folderWith(files));
  return syncCollection(db, { collection, language: 'english', documents });
}

describe('the synonyms file', () => {
  test("one group a line, `#` comments and blank lines skipped; phrases kept as the customer's words are", () => {
    const groups = parseSynonyms(
      '# what customers say\nReturn, Send  back,send it back # the usual three\n\n  hire ,rent\r\nE-mail, mail, mail\n',
      'synonyms.txt',
    );
    assert.deepEqual(groups, [
      { line: 2, phrases: ['return', 'send back', 'send it back'] },
      { line: 4, phrases: ['hire', 'rent'] },
      { line: 5, phrases: ['e mail', 'mail'] },
    ]);
  });

  test('a malformed line is refused with the file and its line number', () => {
    const malformed: Array<[string, RegExp]> = [
      ['return, send back\nrefund\n', /^synonyms\.txt, line 2: a group needs two different phrases or more/],
      ['# returns\nreturn,, send back', /^synonyms\.txt, line 2: an empty phrase/],
      ['return, send back,', /^synonyms\.txt, line 1: an empty phrase/],
      ['return, !!!', /^synonyms\.txt, line 1: an empty phrase/],
      ['Return, return', /^synonyms\.txt, line 1: a group needs two different phrases/],
      ['hire => rent', /^synonyms\.txt, line 1: `=>` mappings are not supported/],
      ['hire, rent\nmoney back, i would like to have my money back', /^synonyms\.txt, line 2: a phrase longer than 6/],
    ];
    for (const [text, message] of malformed)
      assert.throws(() => parseSynonyms(text, 'synonyms.txt'), { name: 'SynonymFileError', message }, text);
  });

  test('past 2,000 groups or 1 MB, or unreadable, the file is refused by name', async () => {
    const many = Array.from({ length: 2_001 }, (_, i) => `word${i}, other${i}`).join('\n');
    assert.throws(() => parseSynonyms(many, 'big.txt'), { message: 'big.txt, line 2001: more than 2000 groups' });
    const huge = fileWith(`rent, hire # ${'x'.repeat(1024 * 1024)}\n`);
    await assert.rejects(readSynonymFile(huge), { message: `${huge}: larger than 1048576 bytes` });
    await assert.rejects(readSynonymFile('/nonexistent/synonyms.txt'), {
      message: /^\/nonexistent\/synonyms\.txt: cannot be read \(ENOENT/,
    });
  });

  test('KNOWLEDGE_SYNONYMS: a file or name=path pairs, one file per collection; a malformed value stops start-up naming it', () => {
    const env = { DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/db' };
    assert.equal(
      loadKnowledgeConfig({ ...env, KNOWLEDGE_SYNONYMS: '/srv/synonyms.txt' }).KNOWLEDGE_SYNONYMS,
      '/srv/synonyms.txt',
    );
    loadKnowledgeConfig({ ...env, KNOWLEDGE_SYNONYMS: 'billing=/srv/billing.txt,/srv/synonyms.txt' });
    for (const value of ['billing=/srv/a.txt, billing=/srv/b.txt', '/srv/a.txt,default=/srv/b.txt', ' , '])
      assert.throws(
        () => loadKnowledgeConfig({ ...env, KNOWLEDGE_SYNONYMS: value }),
        (error: unknown) =>
          error instanceof ConfigError &&
          /KNOWLEDGE_SYNONYMS names (collection "(billing|default)" twice|no file).*e\.g\. \/srv\/synonyms\.txt/.test(
            error.message,
          ),
        value,
      );
  });

  test("the matching rule as a phrase's stored tsquery: each lexeme one or two positions after the one before", () => {
    assert.equal(phraseQuery(['hire']), "('hire')");
    assert.equal(phraseQuery(['send', 'back']), "('send' <1> 'back') | ('send' <2> 'back')");
    assert.equal(phraseQuery(['a', 'b', 'c']).split(' | ').length, 4);
  });
});

describe("the sync stores each collection's groups", () => {
  const sources = (collection: string, articles: string, synonyms?: string) => ({
    KNOWLEDGE_DIR: `${collection}=${articles}`,
    KNOWLEDGE_SYNONYMS: synonyms === undefined ? undefined : `${collection}=${synonyms}`,
    KNOWLEDGE_LANGUAGE: 'english',
    KNOWLEDGE_COLLECTION_LANGUAGES: {},
  });
  const synonymRows = async (collection: string) =>
    (
      await db.query<{ line: number; phrase: string; lexemes: string[]; xmin: string }>(
        'SELECT line, phrase, lexemes, xmin::text AS xmin FROM knowledge_synonyms WHERE collection = $1 ORDER BY line, phrase',
        [collection],
      )
    ).rows;
  const sectionVersions = async (collection: string) =>
    (
      await db.query<{ id: string; xmin: string }>(
        'SELECT id, xmin::text AS xmin FROM knowledge_sections WHERE collection = $1 ORDER BY id',
        [collection],
      )
    ).rows;

  test('loaded; twice → unchanged, no row rewritten; edited or another language → replaced; setting removed → cleared', async () => {
    const collection = unique('ks-sync');
    const articles = folderWith(ARTICLES);
    const file = fileWith('# ours\nreturn, send it back\nrent, hire, hiring out\n');

    const first = await syncConfigured(db, sources(collection, articles, file));
    assert.deepEqual(first.collections[0]?.synonyms, { groups: 2, change: 'loaded' });
    const loaded = await synonymRows(collection);
    assert.deepEqual(
      loaded.map((r) => [r.line, r.phrase, r.lexemes]),
      [
        [2, 'return', ['return']],
        [2, 'send it back', ['send', 'back']],
        [3, 'hire', ['hire']],
        [3, 'hiring out', ['hire']],
        [3, 'rent', ['rent']],
      ],
      "each phrase's lexemes in the collection's language, in order; stop words left out",
    );

    const second = await syncConfigured(db, sources(collection, articles, file));
    assert.deepEqual(second.collections[0]?.synonyms, { groups: 2, change: 'unchanged' });
    assert.deepEqual(await synonymRows(collection), loaded, 'same rows, same row versions (xmin)');

    writeFileSync(file, 'return, send back, money back\n');
    const third = await syncConfigured(db, sources(collection, articles, file));
    assert.deepEqual(third.collections[0]?.synonyms, { groups: 1, change: 'replaced' });
    assert.deepEqual(
      (await synonymRows(collection)).map((r) => r.phrase),
      ['money back', 'return', 'send back'],
    );

    const simple = await syncConfigured(db, {
      ...sources(collection, articles, file),
      KNOWLEDGE_COLLECTION_LANGUAGES: { [collection]: 'simple' },
    });
    assert.deepEqual(simple.collections[0]?.synonyms, { groups: 1, change: 'replaced' }, 'a new language, new lexemes');
    assert.deepEqual(
      (await synonymRows(collection)).map((r) => r.lexemes),
      [['money', 'back'], ['return'], ['send', 'back']],
    );
    await syncConfigured(db, sources(collection, articles, file));

    const fourth = await syncConfigured(db, sources(collection, articles));
    assert.deepEqual(fourth.collections[0]?.synonyms, { groups: 1, change: 'cleared' });
    assert.deepEqual(await synonymRows(collection), []);
    const fifth = await syncConfigured(db, sources(collection, articles));
    assert.equal(fifth.collections[0]?.synonyms, undefined, 'none configured, none stored: nothing to say');
    assert.deepEqual(
      [fifth.collections[0]?.added, fifth.collections[0]?.changed, fifth.collections[0]?.unchanged],
      [0, 0, 5],
    );
  });

  test("a malformed file is reported with its file and line; the groups loaded before and the collection's articles stay as they were", async () => {
    const collection = unique('ks-bad');
    const articles = folderWith(ARTICLES);
    const file = fileWith(SYNONYMS);
    await syncConfigured(db, sources(collection, articles, file));
    const [groups, sections] = [await synonymRows(collection), await sectionVersions(collection)];

    writeFileSync(file, 'rent, hire\nreturn, send back\nrefund\n');
    const report = await syncConfigured(db, sources(collection, articles, file));
    assert.deepEqual(report.problems, [
      {
        source: `synonyms of ${collection}`,
        problem: `${file}, line 3: a group needs two different phrases or more, comma-separated (return, send back); the groups loaded before are kept`,
      },
    ]);
    const stats = report.collections[0]!;
    assert.deepEqual([stats.added, stats.changed, stats.unchanged, stats.retired], [0, 0, 5, 0]);
    assert.deepEqual(stats.synonyms, { groups: 2, change: 'kept' });
    assert.deepEqual(await synonymRows(collection), groups);
    assert.deepEqual(await sectionVersions(collection), sections, 'no article rewritten or retired');

    const elsewhere = await syncConfigured(db, {
      ...sources(collection, articles),
      KNOWLEDGE_SYNONYMS: `${collection}-other=${file}`,
    });
    assert.match(elsewhere.problems[0]?.problem ?? '', /fill no collection ".*-other"; not loaded$/);
  });
});

describe('synonyms at search time', () => {
  let withSynonyms: string;
  let without: string;
  before(async () => {
    withSynonyms = unique('ks-with');
    without = unique('ks-without');
    await syncArticles(withSynonyms);
    await syncArticles(without);
    await syncSynonyms(db, withSynonyms, parseSynonyms(SYNONYMS, 'synonyms.txt'));
  });
  const top = async (collection: string | string[], text: string) =>
    (await retrieve(db, { collections: [collection].flat(), text, limit: 3 })).map((s) => s.id);
  const article = (collection: string, source: string) => `${collection}:${source}#1`;

  test("a customer's word finds the article that uses the shop's word only through a synonym, and not without it", async () => {
    const question = 'Can I hire one for the weekend?';
    assert.deepEqual(
      await top(without, question),
      [article(without, 'walks.md')],
      'without: "hire" is taken for "hike"',
    );
    assert.deepEqual(
      await top(withSynonyms, question),
      [article(withSynonyms, 'rentals.md')],
      'a word of the synonyms is expanded, not corrected',
    );
    assert.deepEqual(await top(withSynonyms, 'Do you rent out canoes?'), [article(withSynonyms, 'rentals.md')]);
  });

  test('a phrase of several words, with at most one word between its words in the text', async () => {
    for (const question of ['How do I send it back?', 'Can I send back a tent?', 'I will send this back']) {
      assert.equal((await top(withSynonyms, question))[0], article(withSynonyms, 'returns.md'), question);
      assert.ok(!(await top(without, question)).includes(article(without, 'returns.md')), question);
    }
  });

  test('a phrase of several words joins the query whole: "return" counts "send back" only where both words stand together', async () => {
    assert.deepEqual(await top(withSynonyms, 'Can I return it?'), [article(withSynonyms, 'returns.md')]);
  });

  test('stemmed in the collection\'s language: "hiring", "hired", "sends them back"', async () => {
    assert.deepEqual(await top(withSynonyms, 'Are you hiring?'), [article(withSynonyms, 'rentals.md')]);
    assert.deepEqual(await top(withSynonyms, 'We hired before'), [article(withSynonyms, 'rentals.md')]);
    assert.equal((await top(withSynonyms, 'What if she sends them back?'))[0], article(withSynonyms, 'returns.md'));
  });

  test('part of a phrase, or its words too far apart or out of order, does not expand', async () => {
    for (const question of [
      'Please send me an invoice',
      'I want my money back',
      'Can I send the parcel back?',
      'Back then I could send it',
    ])
      assert.ok(!(await top(withSynonyms, question)).includes(article(withSynonyms, 'returns.md')), question);
  });

  test("a word only a synonym brought in counts less than the customer's own: the article in their words comes first", async () => {
    const collection = unique('ks-weight');
    await syncArticles(collection, {
      'a-money-back.md': '# Money back promise\nMoney back on anything that lets you down outdoors.',
      'b-refunds.md': '# Refunds\nWe refund to the card you paid with.',
    });
    await syncSynonyms(db, collection, parseSynonyms('refund, money back\n', 'synonyms.txt'));
    // At full weight the two expanded words (each in a title) outscore the customer's one word.
    assert.deepEqual(await top(collection, 'When do I get my refund?'), [
      article(collection, 'b-refunds.md'),
      article(collection, 'a-money-back.md'),
    ]);
    assert.equal((await top(collection, 'Is there a money back promise?'))[0], article(collection, 'a-money-back.md'));
  });

  test("collections do not see each other's synonyms, even searched together", async () => {
    assert.deepEqual(await top([withSynonyms, without], 'Can I hire one for the weekend?'), [
      article(withSynonyms, 'rentals.md'),
    ]);
  });
});

describe('the eval with synonyms', () => {
  const repoRoot = path.resolve(__dirname, '..');
  const evalCli = (args: string[]) => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'scripts', 'eval.ts'), ...args], {
      cwd: repoRoot,
      encoding: 'utf8',
      env: { ...process.env, DATABASE_URL: testEnv.databaseUrl, DRAFT_PROVIDER: '', KNOWLEDGE_EMBEDDINGS_URL: '' },
    });
    return { code: run.status, stdout: run.stdout, stderr: run.stderr };
  };
  const team = () => {
    const knowledge = folderWith(ARTICLES);
    const questions = path.join(knowledge, '..', 'questions.jsonl');
    writeFileSync(
      questions,
      [
        { text: 'Can I hire one for the weekend?', expected_sources: ['rentals.md'], handoff: false },
        { text: 'How do I send it back?', expected_sources: ['returns.md'], handoff: false },
      ]
        .map((q) => JSON.stringify(q))
        .join('\n'),
    );
    return { knowledge, questions };
  };

  test('npm run eval -- --knowledge … --questions … --synonyms <file>: names the file and its groups; --no-synonyms measures without', () => {
    const { knowledge, questions } = team();
    const file = fileWith(SYNONYMS);
    const withFile = evalCli(['--knowledge', knowledge, '--questions', questions, '--synonyms', file]);
    assert.equal(withFile.code, 0, withFile.stderr);
    assert.ok(withFile.stdout.includes(`synonyms: ${file} (2 groups)\n`), withFile.stdout);
    assert.equal(
      withFile.stdout.trim().split('\n').at(-1),
      'recall@3=1.00 mrr=1.00 handoff_precision=n/a handoff_recall=n/a questions=2',
    );

    const none = evalCli(['--knowledge', knowledge, '--questions', questions, '--no-synonyms']);
    assert.equal(none.code, 0, none.stderr);
    assert.ok(none.stdout.includes('synonyms: none\n'), none.stdout);
    assert.equal(
      none.stdout.trim().split('\n').at(-1),
      'recall@3=0.00 mrr=0.00 handoff_precision=n/a handoff_recall=n/a questions=2',
    );

    const both = evalCli(['--knowledge', knowledge, '--questions', questions, '--synonyms', file, '--no-synonyms']);
    assert.notEqual(both.code, 0);
    assert.match(both.stderr, /give --synonyms <file> or --no-synonyms, not both/);
  });

  test('a malformed synonyms file stops the eval with its file and line, and leaves no scratch collection', async () => {
    const { knowledge, questions } = team();
    const file = fileWith('rent, hire\nrefund\n');
    await assert.rejects(
      runEvaluation(db, {
        knowledge,
        questions,
        language: 'english',
        topK: 3,
        drafter: new OfflineDrafter(),
        synonyms: file,
      }),
      { message: `${file}, line 2: a group needs two different phrases or more, comma-separated (return, send back)` },
    );
    const left = await db.query("SELECT count(*)::int AS n FROM knowledge_collections WHERE name LIKE 'eval-%'");
    assert.equal(left.rows[0]?.n, 0);
  });
});
