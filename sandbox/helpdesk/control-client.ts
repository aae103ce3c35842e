import type { HelpdeskAudit, HelpdeskComment, HelpdeskRequestRecord, HelpdeskTicket } from './app';
import { controlCall } from '../control-call';
import type { HelpdeskFault, HelpdeskFaultInput } from './faults';

/** Typed client for the help-desk stand-in's /_helpdesk control API (plain fetch, for tests and scripts). */
export class HelpdeskControl {
  constructor(readonly baseUrl: string) {}

  async tickets(filter: { external_id?: string } = {}): Promise<HelpdeskTicket[]> {
    const { tickets } = await this.call<{ tickets: HelpdeskTicket[] }>('GET', '/_helpdesk/tickets');
    return filter.external_id === undefined ? tickets : tickets.filter((t) => t.external_id === filter.external_id);
  }

  /** Every comment of a ticket, oldest first (the ticket's audits' Comment events). */
  async comments(ticketId: string | number): Promise<HelpdeskComment[]> {
    const { audits } = await this.call<{ audits: HelpdeskAudit[] }>('GET', `/_helpdesk/tickets/${ticketId}/audits`);
    return audits.flatMap((a) => a.events.filter((e): e is HelpdeskComment => e.type === 'Comment'));
  }

  /** What a person does in Zendesk: solve or close a ticket. */
  setStatus(ticketId: string | number, status: HelpdeskTicket['status']): Promise<{ ticket: HelpdeskTicket }> {
    return this.call('POST', `/_helpdesk/tickets/${ticketId}/status`, { status });
  }

  async requests(): Promise<HelpdeskRequestRecord[]> {
    return (await this.call<{ requests: HelpdeskRequestRecord[] }>('GET', '/_helpdesk/requests')).requests;
  }

  /** Replaces every rule; `[]` clears. */
  async setFaults(rules: HelpdeskFaultInput | HelpdeskFaultInput[]): Promise<HelpdeskFault[]> {
    return (
      await this.call<{ rules: HelpdeskFault[] }>('POST', '/_helpdesk/faults', {
        rules: Array.isArray(rules) ? rules : [rules],
      })
    ).rules;
  }

  async clearFaults(): Promise<void> {
    await this.call('DELETE', '/_helpdesk/faults');
  }

  advanceClock(ms: number): Promise<{ offset_ms: number }> {
    return this.call('POST', '/_helpdesk/clock/advance', { ms });
  }

  private call<T>(method: string, path: string, body?: unknown): Promise<T> {
    return controlCall<T>('help-desk stand-in', this.baseUrl, method, path, body);
  }
}
