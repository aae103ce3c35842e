// Every workflow the worker runs. Deterministic code only: no I/O, no clocks but Temporal's, no node:crypto.
export { inboundMessageWorkflow } from './inbound-message';
export { retentionWorkflow } from './retention';
export { webhookWatchdogWorkflow } from './webhook-watchdog';
export { knowledgeSyncWorkflow } from './knowledge-sync';
export { rehearsalWorkflow } from './rehearsal';
