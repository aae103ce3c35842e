import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { compareRehearsals } from '../activities/rehearsal/compare';
import { buildReport } from '../activities/rehearsal/report';
import type { Rehearsal } from '../activities/rehearsal/store';
import type { RehearsedRow } from '../activities/rehearsal/report';
import type { RehearsalResult } from '../activities/rehearsal/result';
import { rehearsedTurn, type TurnMessage } from '../activities/rehearsal/turns';

// The rehearsal's pure parts, without a server: the turn rules as a function of a thread's
// messages, and the comparison of two rehearsals.

const at = (seconds: number) => new Date(Date.UTC(2026, 10, 20, 9, 0, seconds));
const mail = (messageId: string, from: string, seconds: number, labels: string[] = []): TurnMessage => ({
  messageId,
  from,
  labels,
  timestamp: at(seconds),
});

describe('the turn rules of a rehearsal', () => {
  const thread = [
    mail('a1', 'Ada <ada@example.com>', 0),
    mail('a2', 'ada+orders@example.com', 20),
    mail('c1', 'colleague@example.com', 25),
    mail('a3', 'ada@example.com', 45),
    mail('us', 'support@ours.example', 300, ['sent']),
    mail('a4', 'ada@example.com', 310),
  ];

  test("a sender's burst is answered once, by its newest message, across a colleague's reply-all", () => {
    assert.deepEqual(rehearsedTurn(thread, 'a1', 30_000), { kind: 'covered', by: 'a3' });
    assert.deepEqual(rehearsedTurn(thread, 'a2', 30_000), { kind: 'covered', by: 'a3' });
    assert.deepEqual(rehearsedTurn(thread, 'a3', 30_000), { kind: 'go', covers: ['a1', 'a2', 'a3'] });
    // The colleague's message is its own: bursts coalesce per sender mailbox.
    assert.deepEqual(rehearsedTurn(thread, 'c1', 30_000), { kind: 'go', covers: ['c1'] });
  });

  test('a message of ours ends a burst, and without a window every message is its own', () => {
    assert.deepEqual(rehearsedTurn(thread, 'a4', 3_600_000), { kind: 'go', covers: ['a4'] });
    assert.deepEqual(rehearsedTurn(thread, 'a1', 0), { kind: 'go', covers: ['a1'] });
    assert.deepEqual(rehearsedTurn(thread, 'a2', 10_000), { kind: 'go', covers: ['a2'] });
  });
});

const result = (draft: string | null, citations: string[] = []): RehearsalResult => ({
  threadId: 't',
  subject: 'Where is my order?',
  text: 'Where is my order?',
  receivedAt: at(0).toISOString(),
  draft:
    draft === null
      ? null
      : {
          text: draft,
          drafter: 'm',
          citations,
          considered: citations,
          handoffReason: null,
          holds: [],
          approval: false,
        },
  covers: [],
  coveredBy: null,
  failure: null,
  team: null,
  usage: null,
  elapsedMs: 1,
  modelMs: 1,
});
const row = (
  messageId: string,
  outcome: RehearsedRow['outcome'],
  reason: string | null,
  r: RehearsalResult,
): RehearsedRow => ({
  messageId,
  position: 0,
  outcome,
  reason,
  result: r,
});

describe('comparing two rehearsals', () => {
  test('lists exactly the messages whose outcome, draft or citations changed', () => {
    const a = [
      row('same', 'answered', null, result('Hello', ['kb:a#1'])),
      row('flip', 'answered', null, result('Hello', ['kb:a#1'])),
      row('text', 'answered', null, result('Hello', ['kb:a#1'])),
      row('cites', 'answered', null, result('Hello', ['kb:a#1'])),
      row('skip', 'skipped', 'robot-sender', result(null)),
    ];
    const b = [
      row('same', 'answered', null, result('Hello', ['kb:a#1'])),
      row('flip', 'held', 'link', result('Hello', ['kb:a#1'])),
      row('text', 'answered', null, result('Hello there', ['kb:a#1'])),
      row('cites', 'answered', null, result('Hello', ['kb:b#1'])),
      row('skip', 'skipped', 'robot-sender', result(null)),
    ];
    const comparison = compareRehearsals('A', a, 'B', b);
    assert.equal(comparison.compared, 5);
    const changes = Object.fromEntries(comparison.changed.map((c) => [c.messageId, c.changes]));
    assert.deepEqual(changes, {
      flip: ['decision flipped: answered → held (link)', 'new held'],
      text: ['draft changed'],
      cites: ['citations gained: kb:b#1', 'citations lost: kb:a#1'],
    });
  });
});

describe('the report', () => {
  test('estimates the cost from the tokens and the configured prices, and counts time per message', () => {
    const rehearsal: Rehearsal = {
      rehearsalId: 'r',
      inboxId: 'support@ours.example',
      from: at(0),
      to: at(60),
      limit: 10,
      sampled: false,
      configuration: { drafter: 'm' },
      configurationHash: '0'.repeat(64),
      listedAt: at(1),
      listedTotal: 2,
      truncated: false,
      finishedAt: at(2),
      createdAt: at(0),
      expiresAt: at(90),
    };
    const drafted = (tokens: [number, number], elapsedMs: number) => ({
      ...result('Hello', ['kb:a#1']),
      usage: { inputTokens: tokens[0], outputTokens: tokens[1], estimated: false },
      elapsedMs,
      modelMs: elapsedMs / 2,
    });
    const rows = [
      row('one', 'answered', null, drafted([1_000_000, 100_000], 400)),
      row('two', 'answered', null, drafted([500_000, 50_000], 200)),
    ];
    const report = buildReport(rehearsal, 2, rows, { slowAnswerMs: 1, inputPricePerMTok: 2, outputPricePerMTok: 10 });
    assert.equal(report.model.calls, 2);
    assert.equal(report.model.inputTokens, 1_500_000);
    assert.equal(report.model.costUsd, 1.5 * 2 + 0.15 * 10);
    assert.equal(report.model.msPerMessage, 300);
    assert.equal(report.model.modelMsPerCall, 150);
    assert.equal(buildReport(rehearsal, 2, rows, { slowAnswerMs: 1 }).model.costUsd, null, 'no prices: no estimate');
    // Answered where the team never did: listed.
    assert.equal(report.agentWouldAnswer.length, 2);
  });
});
