import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { type CustomerMail, handoffBeforeDrafting, handoffTopicsFor } from '../activities/draft/customer-mail';
import { BUNDLED_HELP_CENTRE, BUNDLED_HELP_CENTRE_TOPICS } from '../knowledge';
import { ConfigError, loadWorkerConfig } from '../lib/config';
import { parseHandoffTopics, readHandoffTopics, topicOf } from '../lib/handoff-topics';
import { searchableText } from '../knowledge/message-text';

// Topics a person answers (HANDOFF_TOPICS, issue 37 point 3): the file's rules, the matching, and
// where the draft step reads it. The whole path (no model call, the ticket's reason) is in
// customer-mail.test.ts; the eval's figures with the bundled file in docs/knowledge.md.

const TOPICS = parseHandoffTopics(
  [
    '# topics a person answers',
    'jobs: hiring, job application, stage   # a comment after the phrases',
    'press: journalist, press enquiry',
    'sponsorship: sponsor*',
    'accessibility: step-free, wheelchair',
    "fraud: didn't place",
    'jobs-fr: candidature',
  ].join('\n'),
  'topics.txt',
);

const mail = (over: Partial<CustomerMail> = {}): CustomerMail => ({
  language: { detected: 'en', reply: 'en' },
  unsupported: null,
  attachments: [],
  ...over,
});

describe('topics a person answers', () => {
  test('the file: one topic a line, phrases comma-separated, comments and blank lines skipped', () => {
    assert.deepEqual(
      TOPICS.map((t) => t.name),
      ['jobs', 'press', 'sponsorship', 'accessibility', 'fraud', 'jobs-fr'],
    );
    assert.deepEqual(
      TOPICS[0]!.phrases.map((p) => p.words),
      [['hiring'], ['job', 'application'], ['stage']],
    );
    assert.deepEqual(TOPICS[2]!.phrases[0]!.words, ['sponsor*']);
    assert.deepEqual(TOPICS[3]!.phrases[0]!.words, ['step', 'free'], 'a hyphen separates words, as in the mail');
  });

  test('a line that ends with a comma goes on on the next; a comment or a blank line between is skipped', () => {
    const [jobs, press] = parseHandoffTopics(
      ['jobs: hiring, a job,', '  # in German', '', '  bewerbung,', '  stellenangebot', 'press: journalist'].join('\n'),
      'topics.txt',
    );
    assert.deepEqual(
      jobs!.phrases.map((p) => p.text),
      ['hiring', 'a job', 'bewerbung', 'stellenangebot'],
    );
    assert.deepEqual(
      press!.phrases.map((p) => p.text),
      ['journalist'],
    );
    assert.throws(() => parseHandoffTopics('press: journalist,\nreporter,', 'topics.txt'), {
      message: /line 1: an empty phrase/,
    });
    assert.throws(() => parseHandoffTopics('jobs: hiring,\n\npress: journalist', 'topics.txt'), {
      message: /line 3: a new topic, but line 1's topic ends with a comma .*: remove that comma/,
    });
  });

  test('a `_` between two words matches any one word, within one sentence', () => {
    const topics = parseHandoffTopics('order-problem: wrong _ sent, sent _ _ wrong', 'topics.txt');
    assert.deepEqual(topics[0]!.phrases[0]!.words, ['wrong', '_', 'sent']);
    const about = (text: string) => topicOf(text, topics)?.phrase ?? null;
    assert.equal(about('Wrong boots sent, order 30214'), 'wrong _ sent');
    assert.equal(about('you sent me the wrong size'), 'sent _ _ wrong');
    assert.equal(about('the wrong one was sent'), null, 'one word, not two');
    assert.equal(about('Is it the wrong one? Sent today.'), null, 'within one sentence');
    assert.equal(about('Is it the wrong one. Sent today'), null);
    assert.equal(about('they sent 2.5 wrong'), 'sent _ _ wrong', 'a decimal point ends no sentence');
    assert.equal(about('I chose the wrong colour, can I send it back?'), null);
    for (const phrase of ['_ sent', 'wrong _', '_'])
      assert.throws(() => parseHandoffTopics(`order-problem: ${phrase}`, 'topics.txt'), {
        message: /line 1: .*a `_` stands for one word between two others/,
      });
  });

  test('a malformed file is refused naming the file, the line and the fix', () => {
    for (const [text, says] of [
      ['jobs hiring, careers', /topics\.txt, line 1: expected `name: phrase, phrase`/],
      ['Press Office: journalist', /line 1: the topic name "press office" must be letters, digits and hyphens/],
      ['press: journalist\npress: reporter', /line 2: the topic press is named twice/],
      ['press: journalist, , reporter', /line 1: an empty phrase/],
      ['press: one two three four five six seven', /line 1: a phrase longer than 6 words/],
      ['everything: re*', /line 1: the prefix re\* is shorter than 3 letters/],
    ] as const)
      assert.throws(() => parseHandoffTopics(text, 'topics.txt'), { name: 'HandoffTopicsError', message: says }, text);
    assert.throws(() => readHandoffTopics('/nonexistent/topics.txt'), {
      name: 'HandoffTopicsError',
      message: /^\/nonexistent\/topics\.txt: cannot be read/,
    });
  });

  test('matching: whole words in order, case and accents aside, a `*` word as a prefix; words as written, not stems', () => {
    const about = (text: string) => topicOf(text, TOPICS)?.topic ?? null;
    assert.equal(about('Are you HIRING for the summer?'), 'jobs');
    assert.equal(
      about('Can I hire a tent for the weekend?'),
      null,
      '"hiring" is not "hire": the rental article answers it',
    );
    assert.equal(about('I sent a job application last week'), 'jobs');
    assert.equal(
      about('Is there a job? Any application form?'),
      null,
      'the words of a phrase in order, next to each other',
    );
    assert.equal(about('Would you sponsor our club?'), 'sponsorship');
    assert.equal(about('A sponsorship request'), 'sponsorship');
    assert.equal(about('Is the shop step free?'), 'accessibility');
    assert.equal(about('Is the shop step-free?'), 'accessibility');
    assert.equal(about('I didn’t place this order'), 'fraud', 'a typographic apostrophe is an apostrophe');
    assert.equal(about('Objet : Candidature spontanée'), 'jobs-fr');
    assert.equal(about('a press enquiry'), 'press');
    assert.equal(about('I pressed enter twice'), null);
    // Accents on either side: a phrase written without them matches the customer's, and the other way round.
    const accented = parseHandoffTopics('jobs: résumé\npress: presseanfrage', 'topics.txt');
    assert.equal(topicOf('I attach my resume', accented)?.topic, 'jobs');
    assert.equal(topicOf('Presseanfrage: ein Interview', accented)?.topic, 'press');
    assert.equal(topicOf('anything at all', []), null, 'no topics, no hand-off');
  });

  test('before drafting: the subject and the customer’s own words count, not quoted mail or a signature; a language hand-off comes first', () => {
    const early = (subject: string, text: string, over: Partial<CustomerMail> = {}) =>
      handoffBeforeDrafting(mail(over), { subject, text }, { topics: TOPICS, learned: null });
    assert.deepEqual(early('Press enquiry', 'Hello, could we talk about your shop?'), {
      kind: 'topic',
      reason: 'the message is about press ("press enquiry"), a topic HANDOFF_TOPICS gives to a person',
    });
    assert.equal(
      early(
        'Re: my order',
        'Thanks, that answers it. Where do I send the return?\n\n> We are hiring in Leeds, by the way.',
      ),
      null,
      'quoted mail is ours or someone else’s, not the customer’s question',
    );
    assert.equal(
      early('Returns', 'How long do I have to return a jacket?\n\nThanks,\nJo Bloggs\nJournalist, Trail magazine'),
      null,
      'what follows a sign-off is a signature',
    );
    assert.equal(
      early('Presse', 'Bonjour, je suis journaliste.', { unsupported: 'the message is in French (fr)…' })?.kind,
      'language',
    );
  });

  test('HANDOFF_TOPICS: a file read at start-up; unset, the bundled shop’s topics only for a worker answering from the bundled help centre', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'topics-'));
    const good = path.join(dir, 'topics.txt');
    writeFileSync(good, 'press: journalist\n');
    const bad = path.join(dir, 'bad.txt');
    writeFileSync(bad, 'press: journalist\nlegal solicitor\n');
    const env = { DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/db', AGENTMAIL_API_KEY: 'k' };
    const configured = loadWorkerConfig({ ...env, HANDOFF_TOPICS: good });
    assert.deepEqual(
      handoffTopicsFor(configured).map((t) => t.name),
      ['press'],
    );
    assert.equal(loadWorkerConfig(env).HANDOFF_TOPICS, null);
    assert.deepEqual(handoffTopicsFor(loadWorkerConfig(env)), [], 'unset, and no bundled folder: no topics');
    const bundled = handoffTopicsFor(loadWorkerConfig({ ...env, KNOWLEDGE_DIR: `shop=${BUNDLED_HELP_CENTRE}` }));
    assert.deepEqual(bundled, readHandoffTopics(BUNDLED_HELP_CENTRE_TOPICS), 'what `npm run eval` measures runs');
    assert.ok(bundled.length >= 10);
    assert.deepEqual(
      handoffTopicsFor(loadWorkerConfig({ ...env, KNOWLEDGE_DIR: BUNDLED_HELP_CENTRE, HANDOFF_TOPICS: good })).map(
        (t) => t.name,
      ),
      ['press'],
      "the team's own file wins",
    );
    for (const [value, says] of [
      [bad, /HANDOFF_TOPICS .*bad\.txt, line 2: expected `name: phrase, phrase`.*e\.g\. press: journalist/],
      [path.join(dir, 'missing.txt'), /HANDOFF_TOPICS .*missing\.txt: cannot be read/],
    ] as const)
      assert.throws(
        () => loadWorkerConfig({ ...env, HANDOFF_TOPICS: value }),
        (error: unknown) => error instanceof ConfigError && says.test(error.message),
        value,
      );
  });

  test('the bundled shop’s topics on mail its articles’ words would answer wrongly', () => {
    const bundled = readHandoffTopics(BUNDLED_HELP_CENTRE_TOPICS);
    const topic = (text: string) => topicOf(searchableText(text), bundled)?.topic ?? null;
    // "the Leeds shop" is the click-and-collect article's title: retrieval alone answers from it.
    assert.equal(topic('Can I park a caravan at the Leeds shop overnight?'), 'accessibility');
    assert.equal(topic('Is there a car park near the shop?'), 'accessibility');
    assert.equal(topic('Hi, I have ended up with two accounts, can you merge them?'), 'account-change');
    assert.equal(topic('What is the packed weight of the Ridge 2?'), 'product-details');
    // A car's MOT is another business's mail; the French "mot de passe" (password) is not.
    assert.equal(topic('Hi, can you fit my car in for an MOT next Tuesday?'), 'misdirected');
    assert.equal(topic("Bonjour, j'ai oublié mon mot de passe et le lien ne marche plus."), null);
    // The articles answer these: no topic.
    assert.equal(topic('Can I collect my order from the Leeds shop?'), null);
    assert.equal(topic('Which size should I get, I am between a medium and a large?'), null);
    assert.equal(topic('How do I check my points balance?'), null);
  });
});
