import assert from 'node:assert/strict';
import { test } from 'node:test';
import { draftProblem, MAX_DRAFT_CHARACTERS, normalizedDraft } from '../contract';

// The one rule for a reply's text (drafter, the review Update, the admin route): plain text,
// which may hold angle brackets, but no markup a mail client would render.

test('plain text with angle-bracketed addresses and links, comparisons and arrows is a reply', () => {
  for (const text of [
    'Write to <billing@example.com> or see <https://example.com/x?y=1&z=<2>>.',
    'Our address: Support <support@example.com>',
    'If a < b and c > d, then <mailto:ops@example.com> it.',
    'Use <order number> in the subject -> we find it.',
    '<3 thanks',
    'x'.repeat(MAX_DRAFT_CHARACTERS),
  ]) {
    assert.equal(draftProblem(text), null, text);
  }
});

test('markup, emptiness, control characters and excess length are not', () => {
  const cases: Array<[string, RegExp]> = [
    ['Hello <b>there</b>', /HTML/],
    ['Line one<br>line two', /HTML/],
    ['Line one<br/>line two', /HTML/],
    ['<p class="x">Hi</p>', /HTML/],
    ['<a href="https://example.com">click</a>', /HTML/],
    ['Hi <img src=x onerror=alert(1)>', /HTML/],
    ['Hi</DIV >', /HTML/],
    ['Hi <!-- hidden -->', /HTML/],
    ['<!DOCTYPE html>', /HTML/],
    ['  \n ', /empty/],
    ['Hello\u0000world', /control/],
    ['x'.repeat(MAX_DRAFT_CHARACTERS + 1), /longer than/],
  ];
  for (const [text, problem] of cases) assert.match(draftProblem(text) ?? 'accepted', problem, JSON.stringify(text));
});

test('the rule judges the text as it is stored: trimmed', () => {
  assert.equal(normalizedDraft('  Hello,\n\nThanks.  \n'), 'Hello,\n\nThanks.');
  assert.equal(draftProblem(`  ${'x'.repeat(MAX_DRAFT_CHARACTERS)}  `), null);
});
