import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { parseSynonyms, retrieve, syncCollection, syncSynonyms } from '../knowledge';
import {
  configurationNameFor,
  detectLanguage,
  textSearchConfigFor,
  textSearchConfigurations,
} from '../knowledge/language';
import { createDb, type Db } from '../lib/db';
import { testEnv } from './support/env';

// The customer's language (issue 37): tinyld's guess, `undefined` when there is too little to go
// on, and the Postgres text-search configuration that stems it, asked of the suite's real Postgres.
describe('detecting the language of a message', () => {
  test('names the language of an ordinary customer email (ISO 639-1)', () => {
    assert.equal(detectLanguage('Hallo, ich möchte meine Bestellung zurückschicken. Wie geht das?'), 'de');
    assert.equal(detectLanguage('Hoe kan ik mijn bestelling annuleren?'), 'nl');
    assert.equal(detectLanguage('Bonjour, je voudrais retourner ma tente, elle est trop petite.'), 'fr');
    assert.equal(detectLanguage('¿Hacen envíos a España? ¿Cuánto cuesta el envío?'), 'es');
    assert.equal(detectLanguage('Where is my order FH-10293? It has not arrived yet.'), 'en');
    assert.equal(
      detectLanguage('Hei, jeg bestilte et telt forrige uke, men det har ikke kommet ennå. Hvor er pakken min?'),
      'no',
    );
  });

  test('too short or nothing to go on → undefined, never a guess', () => {
    for (const text of ['Hi?', 'ok', 'Thanks!', '', '   ', '12345 67890 !!!', '👍👍👍👍👍👍👍👍👍👍👍👍👍'])
      assert.equal(detectLanguage(text), undefined, JSON.stringify(text));
  });

  test('mixed languages: the one most of the text is in', () => {
    const text =
      'Guten Tag, ich habe gestern ein Zelt bestellt und es ist noch nicht angekommen. Können Sie mir sagen, wo es ist? Thanks';
    assert.equal(detectLanguage(text), 'de');
  });

  test('a huge message is read from its start only, and answers at once', () => {
    const text = 'Where is my parcel? I ordered a tent last week.\n'.repeat(50_000);
    assert.equal(detectLanguage(text), 'en');
  });
});

describe('the text-search configuration for a language', () => {
  let db: Db;
  before(() => {
    db = createDb(testEnv.databaseUrl);
  });
  after(() => db.end());

  test('the names come from pg_ts_config at run time, not a list of ours', async () => {
    const known = await textSearchConfigurations(db);
    const rows = (await db.query<{ cfgname: string }>('SELECT cfgname FROM pg_ts_config')).rows;
    assert.deepEqual([...known].sort(), rows.map((r) => r.cfgname).sort());
    assert.ok(known.has('english'));
  });

  test('a language Postgres stems → its configuration; one it does not, or none → undefined', async () => {
    assert.equal(await textSearchConfigFor(db, 'de'), 'german');
    assert.equal(await textSearchConfigFor(db, 'nl'), 'dutch');
    assert.equal(await textSearchConfigFor(db, 'no'), 'norwegian');
    assert.equal(await textSearchConfigFor(db, 'ja'), undefined); // no stemmer for Japanese
    assert.equal(await textSearchConfigFor(db, undefined), undefined);
  });

  test('a name a server lacks is not offered, though it has a name', async () => {
    // Every mapped name is checked against the server: one it does not list is never returned.
    const known = await textSearchConfigurations(db);
    for (const code of ['ar', 'hy', 'eu', 'ca', 'el', 'ta', 'yi']) {
      const name = configurationNameFor(code);
      assert.ok(name);
      assert.equal(await textSearchConfigFor(db, code), known.has(name) ? name : undefined);
    }
  });
});

// Retrieval in the message's language (issue 37, point 1): a collection is searched in its own
// configuration, and its synonym phrases are also looked for in the customer's words read in the
// message's language, through unaccent — so a German question finds the English article its
// German phrase points to, inflected ("Rücksendungen") or typed without its accent ("Ruckgabe").
describe('searching in the message language too', () => {
  let db: Db;
  const collection = `lang-${randomUUID().slice(0, 8)}`;
  before(async () => {
    db = createDb(testEnv.databaseUrl);
    const documents = Object.entries({
      'returns.md': '# Returns\nReturn any unused item within 30 days for a full refund.',
      'shipping.md': '# Shipping\nWe ship to Norway, Sweden and Denmark within a week.',
      'rentals.md': '# Rentals\nWe rent out tents and canoes by the day.',
    }).map(([source, content]) => ({ source, content, format: 'markdown' as const, fallbackTitle: source }));
    await syncCollection(db, { collection, language: 'english', documents });
    await syncSynonyms(db, collection, parseSynonyms('return, rückgabe, rücksendung, retoure\n', 'synonyms.txt'));
  });
  after(async () => {
    await db.query('DELETE FROM knowledge_collections WHERE name = $1', [collection]);
    await db.end();
  });

  const best = async (text: string) =>
    (await retrieve(db, { collections: [collection], text, limit: 3 })).map((s) => s.source);

  test('a German question finds the English article its inflected German word names', async () => {
    const text = 'Wie lange dauern Rücksendungen bei euch normalerweise?';
    assert.equal(detectLanguage(text), 'de');
    // Read as English, "rücksendungen" is not the phrase "rücksendung"; read as German, it is.
    assert.deepEqual((await best(text)).slice(0, 1), ['returns.md']);
  });

  test('unaccent: "Ruckgabe" finds what "Rückgabe" finds', async () => {
    const accented = 'Wie funktioniert die Rückgabe bei euch genau?';
    const plain = 'Wie funktioniert die Ruckgabe bei euch genau?';
    assert.equal(detectLanguage(plain), 'de');
    assert.deepEqual((await best(accented)).slice(0, 1), ['returns.md']);
    assert.deepEqual(await best(plain), await best(accented));
  });

  test('a compound in the message language starts with the phrase: "Rückgabefrist" finds the returns article', async () => {
    const text = 'Wie lang ist eigentlich die Rückgabefrist bei euch?';
    assert.equal(detectLanguage(text), 'de');
    assert.deepEqual((await best(text)).slice(0, 1), ['returns.md']);
  });

  test('an English question is read as before: the German phrases do not fire on English words', async () => {
    assert.deepEqual((await best('How do I return an unused tent?')).slice(0, 1), ['returns.md']);
    assert.deepEqual((await best('Can I rent a canoe for the day?')).slice(0, 1), ['rentals.md']);
  });
});
