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

export const FAILPOINTS = [
  'decision.after-effect',
  'decision.after-store',
  'draft.after-effect',
  'draft.after-store',
  'ticket.after-effect',
  'ticket.after-store',
  'reply.after-effect',
  'reply.after-store',
  'intake.after-commit',
] as const;
export type Failpoint = (typeof FAILPOINTS)[number];

function armedFromEnv(): ReadonlySet<string> {
  const names = (process.env.REPLYONCE_FAILPOINTS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = names.filter((name) => !(FAILPOINTS as readonly string[]).includes(name));
  if (unknown.length > 0)
    throw new Error(
      `REPLYONCE_FAILPOINTS names unknown failpoints: ${unknown.join(', ')} (known: ${FAILPOINTS.join(', ')})`,
    );
  return new Set(names);
}

const armed = armedFromEnv();

export function failpoint(name: Failpoint): void {
  // SIGKILL, not an exception: nothing after this line runs, no finally, no cleanup — a crash.
  if (armed.has(name)) process.kill(process.pid, 'SIGKILL');
}
