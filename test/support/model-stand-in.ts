import type { AddressInfo } from 'node:net';
import { createDrafter } from '../../activities/draft/drafting/create-drafter';
import type { Drafter } from '../../activities/draft/drafting/drafter';
import { buildModelStandIn } from '../../sandbox/model/app';
import { ModelStandInControl } from '../../sandbox/model/control-client';

/**
 * The model stand-in on a free loopback port, and a drafter that talks to it over real HTTP as
 * an OpenAI-compatible provider: what the model was asked is read back through `control`.
 */
export async function startModelStandIn(
  apiKey: string,
): Promise<{ control: ModelStandInControl; drafter: Drafter; close: () => Promise<void> }> {
  const standIn = buildModelStandIn({ apiKey });
  await standIn.app.listen({ port: 0, host: '127.0.0.1' });
  const control = new ModelStandInControl(`http://127.0.0.1:${(standIn.app.server.address() as AddressInfo).port}`);
  const drafter = createDrafter({
    DRAFT_PROVIDER: 'openai-compatible',
    DRAFT_MODEL: 'stand-in-model',
    DRAFT_BASE_URL: control.apiUrl,
    DRAFT_API_KEY: apiKey,
    DRAFT_TIMEOUT_MS: 5_000,
    DRAFT_MAX_OUTPUT_TOKENS: 1_000,
    DRAFT_INSTRUCTIONS: undefined,
    DRAFT_INBOX_INSTRUCTIONS: {},
  });
  return { control, drafter, close: () => standIn.app.close() };
}
