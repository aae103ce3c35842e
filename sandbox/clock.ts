/**
 * The sandbox's notion of "now": real time plus an offset the control API can move forward.
 * Idempotency-key expiry and every timestamp the API returns read this clock, so a test can
 * jump past AgentMail's 24 h key window without waiting. Webhook signatures do NOT use it:
 * receivers check svix-timestamp against their own real clock (5 min tolerance).
 */
export class VirtualClock {
  private offset = 0;

  now(): Date {
    return new Date(Date.now() + this.offset);
  }

  nowMs(): number {
    return Date.now() + this.offset;
  }

  iso(): string {
    return this.now().toISOString();
  }

  get offsetMs(): number {
    return this.offset;
  }

  /** Only forwards: a clock that runs backwards would "un-expire" keys and confuse everyone. */
  advance(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError('the clock only moves forwards');
    this.offset += ms;
  }

  reset(): void {
    this.offset = 0;
  }
}
