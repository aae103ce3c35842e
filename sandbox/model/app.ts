import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { z } from 'zod';
import { behaviourSchema, Behaviours, type Behaviour } from './behaviours';

/**
 * A local stand-in for a language model's HTTP API, for development and tests: OpenAI's Chat
 * Completions (`POST /v1/chat/completions`, which Ollama, vLLM, llama.cpp and LM Studio also
 * speak) and Anthropic's Messages (`POST /v1/messages`), non-streaming. It counts every request
 * it receives and can be slow, fail, rate-limit, refuse or answer badly on demand (/_model).
 *
 * A request for structured output (OpenAI's `response_format`, Anthropic's `json` tool or
 * `output_format`) gets the replyonce answer `{ reply, citations, handoff }`: by default the
 * reply cites the first article the prompt shows (`[article <id>]`) and hands off when the
 * prompt says no article matches; behaviours script hand-offs, bad citations and broken JSON.
 */

export interface ModelStandInOptions {
  /** When set, requests must carry it (`Authorization: Bearer …` or `x-api-key`); else 401. */
  apiKey?: string | undefined;
  logger?: FastifyBaseLogger | boolean | undefined;
}

export type ModelApi = 'openai-chat' | 'anthropic-messages';

export interface ModelCall {
  seq: number;
  at: string;
  api: ModelApi;
  model: string;
  /** The system prompt and every message's text, as received. */
  system: string;
  messages: Array<{ role: string; text: string }>;
  /** What the stand-in did: `reply`, or the rule's action. */
  outcome: string;
  /** Whether the request asked for structured output (the answer was JSON). */
  structured: boolean;
}

export interface ModelStandIn {
  app: FastifyInstance;
  calls: ModelCall[];
  /** Every `/v1/embeddings` request's inputs (kept apart from the chat calls, which tests count per message). */
  embeddingCalls: string[][];
  behaviours: Behaviours;
}

const textOf = (content: unknown): string =>
  typeof content === 'string'
    ? content
    : Array.isArray(content)
      ? content.map((part: { text?: unknown }) => (typeof part?.text === 'string' ? part.text : '')).join('')
      : '';

const openAiBody = z
  .object({
    model: z.string(),
    messages: z.array(z.object({ role: z.string(), content: z.unknown() }).passthrough()).min(1),
  })
  .passthrough();
const anthropicBody = z
  .object({
    model: z.string(),
    max_tokens: z.number().int().positive(),
    system: z.unknown().optional(),
    messages: z.array(z.object({ role: z.string(), content: z.unknown() }).passthrough()).min(1),
  })
  .passthrough();

/** The answer when no rule applies: plain text, the same for the same prompt. */
export function defaultReply(prompt: string): string {
  const reference = createHash('sha256').update(prompt).digest('hex').slice(0, 8);
  return `Hello,\n\nThank you for your message. We are looking into it and will get back to you shortly.\n\nBest regards,\nThe support team\n(reference ${reference})`;
}

export function buildModelStandIn(options: ModelStandInOptions = {}): ModelStandIn {
  const app = Fastify({
    ...(typeof options.logger === 'object' ? { loggerInstance: options.logger } : { logger: options.logger ?? false }),
    bodyLimit: 10 * 1024 * 1024,
  });
  const calls: ModelCall[] = [];
  const embeddingCalls: string[][] = [];
  const behaviours = new Behaviours();

  /** Records the call and decides the answer; undefined means "already answered" (dropped). */
  async function handle(
    api: ModelApi,
    request: FastifyRequest,
    reply: FastifyReply,
    parsed: { model: string; system: string; messages: ModelCall['messages']; structured: Structured },
  ) {
    const prompt = [parsed.system, ...parsed.messages.map((m) => m.text)].join('\n');
    const rule = behaviours.draw(prompt);
    calls.push({
      seq: calls.length + 1,
      at: new Date().toISOString(),
      api,
      model: parsed.model,
      system: parsed.system,
      messages: parsed.messages,
      structured: parsed.structured !== 'none',
      outcome: rule?.action ?? 'reply',
    });
    if (options.apiKey !== undefined) {
      const given =
        api === 'openai-chat' ? request.headers.authorization : `Bearer ${String(request.headers['x-api-key'] ?? '')}`;
      if (given !== `Bearer ${options.apiKey}`) return failure(api, reply, 401, 'invalid api key');
    }
    if (rule?.action === 'delay') await sleep(rule.ms ?? 1_000);
    if (rule?.action === 'drop') {
      reply.hijack();
      request.raw.socket.destroy();
      return reply;
    }
    if (rule?.action === 'status')
      return failure(api, reply, rule.status ?? 500, `injected failure: status ${rule.status ?? 500}`);
    if (rule?.action === 'rate-limit') {
      void reply.header('retry-after', String(rule.retry_after_seconds ?? 1));
      return failure(api, reply, 429, 'rate limit exceeded (injected)');
    }
    return answer(api, reply, parsed.model, rule, prompt, parsed.structured);
  }

  app.post('/v1/chat/completions', async (request, reply) => {
    const body = openAiBody.safeParse(request.body);
    if (!body.success) return failure('openai-chat', reply, 400, `invalid request: ${body.error.message}`);
    const system = body.data.messages
      .filter((m) => m.role === 'system' || m.role === 'developer')
      .map((m) => textOf(m.content))
      .join('\n');
    const messages = body.data.messages
      .filter((m) => m.role !== 'system' && m.role !== 'developer')
      .map((m) => ({ role: m.role, text: textOf(m.content) }));
    const format = (body.data as { response_format?: { type?: string } }).response_format?.type;
    const structured: Structured = format === 'json_schema' || format === 'json_object' ? 'text' : 'none';
    return handle('openai-chat', request, reply, { model: body.data.model, system, messages, structured });
  });

  app.post('/v1/messages', async (request, reply) => {
    const body = anthropicBody.safeParse(request.body);
    if (!body.success) return failure('anthropic-messages', reply, 400, `invalid request: ${body.error.message}`);
    const messages = body.data.messages.map((m) => ({ role: m.role, text: textOf(m.content) }));
    const data = body.data as { tools?: Array<{ name?: string }>; output_format?: unknown; output_config?: unknown };
    const structured: Structured = data.tools?.some((t) => t.name === 'json')
      ? 'tool'
      : data.output_format !== undefined || data.output_config !== undefined
        ? 'text'
        : 'none';
    return handle('anthropic-messages', request, reply, {
      model: body.data.model,
      system: textOf(body.data.system),
      messages,
      structured,
    });
  });

  // OpenAI's embeddings API (what the AI SDK's `embed` speaks): a deterministic bag-of-words
  // vector per input, so texts sharing words are close. Plumbing, not semantics.
  app.post('/v1/embeddings', async (request, reply) => {
    const body = z
      .object({ model: z.string(), input: z.union([z.string(), z.array(z.string()).min(1)]) })
      .passthrough()
      .safeParse(request.body);
    if (!body.success) return failure('openai-chat', reply, 400, `invalid request: ${body.error.message}`);
    if (options.apiKey !== undefined && request.headers.authorization !== `Bearer ${options.apiKey}`)
      return failure('openai-chat', reply, 401, 'invalid api key');
    const inputs = typeof body.data.input === 'string' ? [body.data.input] : body.data.input;
    embeddingCalls.push(inputs);
    return reply.send({
      object: 'list',
      model: body.data.model,
      data: inputs.map((input, index) => ({ object: 'embedding', index, embedding: bagOfWords(input) })),
      usage: { prompt_tokens: inputs.join(' ').length, total_tokens: inputs.join(' ').length },
    });
  });
  app.get('/_model/embeddings', async () => ({ count: embeddingCalls.length, calls: embeddingCalls }));

  // Control: what a test or a developer scripts and inspects. No auth: loopback only.
  app.get<{ Querystring: { contains?: string } }>('/_model/calls', async (request) => {
    const { contains } = request.query;
    const matching = calls.filter(
      (c) => !contains || [c.system, ...c.messages.map((m) => m.text)].some((t) => t.includes(contains)),
    );
    return { count: matching.length, calls: matching };
  });
  app.post('/_model/behaviours', async (request, reply) => {
    const parsed = z.object({ rules: z.array(behaviourSchema) }).safeParse(request.body);
    if (!parsed.success) return reply.code(400).send({ error: parsed.error.message });
    return { rules: behaviours.set(parsed.data.rules) };
  });
  app.get('/_model/behaviours', async () => ({ rules: behaviours.list() }));
  app.delete('/_model/behaviours', async () => {
    behaviours.clear();
    return { rules: [] };
  });
  app.post('/_model/reset', async () => {
    behaviours.clear();
    calls.length = 0;
    embeddingCalls.length = 0;
    return { ok: true };
  });

  return { app, calls, embeddingCalls, behaviours };
}

/** How the request asked for structured output: not at all, as JSON text, or as Anthropic's `json` tool. */
type Structured = 'none' | 'text' | 'tool';

/** The article ids a prompt shows, in order (prompt.ts writes `[article <id>]`). */
export const articleIds = (prompt: string): string[] =>
  [...prompt.matchAll(/\[article ([^\]\s]+)\]/g)].map((m) => m[1]!);

/** The structured answer for this rule, as the object a model would produce. */
function structuredAnswer(rule: Behaviour | undefined, prompt: string): unknown {
  const [first] = articleIds(prompt);
  const holding =
    'Hello,\n\nThank you for your message. A member of our team will follow up shortly.\n\nBest regards,\nThe support team';
  if (rule?.action === 'handoff')
    return {
      reply: holding,
      citations: [],
      handoff: { reason: rule.text ?? 'the articles given do not answer this question' },
    };
  if (rule?.action === 'bad-citation')
    return { reply: defaultReply(prompt), citations: [rule.text ?? 'no-such-collection:invented.md#1'], handoff: null };
  if (rule?.action === 'reply') return { reply: rule.text ?? '', citations: first ? [first] : [], handoff: null };
  if (prompt.includes('No article of our knowledge base matches'))
    return { reply: holding, citations: [], handoff: { reason: 'no article covers this question' } };
  return { reply: defaultReply(prompt), citations: first ? [first] : [], handoff: null };
}

function answer(
  api: ModelApi,
  reply: FastifyReply,
  model: string,
  rule: Behaviour | undefined,
  prompt: string,
  structured: Structured,
) {
  const refused = rule?.action === 'refuse';
  const cut = rule?.action === 'truncate';
  const raw = rule?.action === 'raw';
  const json = structured !== 'none' && !refused && !cut && !raw ? structuredAnswer(rule, prompt) : undefined;
  if (json !== undefined && structured === 'tool' && api === 'anthropic-messages')
    return toolAnswer(reply, model, json, prompt);
  const text = refused
    ? ''
    : raw
      ? (rule.text ?? '')
      : json !== undefined
        ? JSON.stringify(json)
        : rule?.action === 'reply'
          ? (rule.text ?? '')
          : cut
            ? structured !== 'none'
              ? '{"reply": "Hello,\\n\\nThank you for your message. We are'
              : 'Hello,\n\nThank you for your message. We are'
            : defaultReply(prompt);
  const id = createHash('sha256').update(`${Date.now()}${Math.random()}`).digest('hex').slice(0, 24);
  if (api === 'openai-chat') {
    return reply.send({
      id: `chatcmpl-${id}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model,
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: refused ? null : text,
            refusal: refused ? "I'm sorry, I can't help with that." : null,
          },
          finish_reason: cut ? 'length' : 'stop',
        },
      ],
      usage: {
        prompt_tokens: Math.ceil(prompt.length / 4),
        completion_tokens: Math.ceil(text.length / 4),
        total_tokens: Math.ceil((prompt.length + text.length) / 4),
      },
    });
  }
  return reply.send({
    id: `msg_${id}`,
    type: 'message',
    role: 'assistant',
    model,
    content: refused ? [] : [{ type: 'text', text }],
    stop_reason: refused ? 'refusal' : cut ? 'max_tokens' : 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: Math.ceil(prompt.length / 4), output_tokens: Math.ceil(text.length / 4) },
  });
}

/** 64 dimensions, each word hashed into one; normalised. */
export function bagOfWords(text: string): number[] {
  const vector = new Array<number>(64).fill(0);
  for (const word of text
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter((w) => w.length > 2))
    vector[createHash('sha256').update(word).digest()[0]! % 64]! += 1;
  const norm = Math.hypot(...vector) || 1;
  return vector.map((v) => v / norm);
}

/** Anthropic's JSON-tool fallback for structured output: the answer is the `json` tool's input. */
function toolAnswer(reply: FastifyReply, model: string, input: unknown, prompt: string) {
  const id = createHash('sha256').update(`${Date.now()}${Math.random()}`).digest('hex').slice(0, 24);
  return reply.send({
    id: `msg_${id}`,
    type: 'message',
    role: 'assistant',
    model,
    content: [{ type: 'tool_use', id: `toolu_${id}`, name: 'json', input }],
    stop_reason: 'tool_use',
    stop_sequence: null,
    usage: { input_tokens: Math.ceil(prompt.length / 4), output_tokens: Math.ceil(JSON.stringify(input).length / 4) },
  });
}

/** Each API's documented error body. */
function failure(api: ModelApi, reply: FastifyReply, status: number, message: string) {
  if (api === 'openai-chat') {
    const type =
      status === 429
        ? 'rate_limit_exceeded'
        : status === 401
          ? 'invalid_api_key'
          : status >= 500
            ? 'server_error'
            : 'invalid_request_error';
    return reply.code(status).send({ error: { message, type, param: null, code: type } });
  }
  const type =
    status === 429
      ? 'rate_limit_error'
      : status === 401
        ? 'authentication_error'
        : status === 529
          ? 'overloaded_error'
          : status >= 500
            ? 'api_error'
            : 'invalid_request_error';
  return reply.code(status).send({ type: 'error', error: { type, message } });
}
