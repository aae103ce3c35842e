/**
 * Failpoints: named places where a test can make the process die on the spot, to prove that
 * no crash window turns one effect into two (the technique of FoundationDB's and TiKV's
 * failpoints). Off unless REPLYONCE_FAILPOINTS names them, e.g.
 *   REPLYONCE_FAILPOINTS=reply.after-effect   → SIGKILL after AgentMail accepted the send,
 *                                              before the operation row was completed.
 *   REPLYONCE_FAILPOINTS=intake.after-commit  → SIGKILL after the webhook's intake row committed,
 *                                              before its answer and its workflow start.
 * Never set in production; an unknown name is a typo and stops the process at start-up.
 */

/** The effects that have failpoints around their store (runOperation): crash before and after the row is completed. */
export const EFFECT_FAILPOINT_KINDS = ['decision', 'draft', 'thread-ticket', 'ticket', 'reply', 'notify'] as const;
export type EffectFailpointKind = (typeof EFFECT_FAILPOINT_KINDS)[number];
export type EffectStage = 'after-effect' | 'after-store';

export type Failpoint =
  `${EffectFailpointKind}.${EffectStage}` | 'intake.after-commit' | 'turn.after-request' | 'erasure.after-tombstones';

/** Every failpoint: a closed set, so a typo is a type error in code and a start-up error in REPLYONCE_FAILPOINTS. */
export const FAILPOINTS: readonly Failpoint[] = [
  ...EFFECT_FAILPOINT_KINDS.flatMap((kind): Failpoint[] => [`${kind}.after-effect`, `${kind}.after-store`]),
  'intake.after-commit',
  // After a message's ask changed its thread's row (committed), before its answers were told and the local activity returned.
  'turn.after-request',
  // An erasure (privacy/erase.ts) after its messages were tombstoned, before their content was erased.
  'erasure.after-tombstones',
];

/** The failpoint of an effect's stage, or undefined for an effect that has none (provider-draft, review, …). */
export function effectFailpoint(kind: string, stage: EffectStage): Failpoint | undefined {
  return FAILPOINTS.find((name) => name === `${kind}.${stage}`);
}

function armedFromEnv(): ReadonlySet<string> {
  const names = (process.env.REPLYONCE_FAILPOINTS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = names.filter((name) => !FAILPOINTS.some((known) => known === name));
  if (unknown.length > 0)
    throw new Error(
      `REPLYONCE_FAILPOINTS names unknown failpoints: ${unknown.join(', ')} (known: ${FAILPOINTS.join(', ')})`,
    );
  return new Set(names);
}

const armed = armedFromEnv();

/** Dies here when `name` is armed; undefined (an effect without failpoints) is never armed. */
export function failpoint(name: Failpoint | undefined): void {
  // SIGKILL, not an exception: nothing after this line runs, no finally, no cleanup — a crash.
  if (name !== undefined && armed.has(name)) process.kill(process.pid, 'SIGKILL');
}
