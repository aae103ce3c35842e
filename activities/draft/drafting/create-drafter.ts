import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { LanguageModel } from 'ai';
import type { WorkerConfig } from '../../../lib/config';
import type { Drafter } from './drafter';
import { ModelDrafter } from './model-drafter';
import { OfflineDrafter } from './offline-drafter';
import { DEFAULT_DRAFT_INSTRUCTIONS } from './prompt';

export type DrafterConfig = Pick<
  WorkerConfig,
  | 'DRAFT_PROVIDER'
  | 'DRAFT_MODEL'
  | 'DRAFT_BASE_URL'
  | 'DRAFT_API_KEY'
  | 'DRAFT_TIMEOUT_MS'
  | 'DRAFT_MAX_OUTPUT_TOKENS'
  | 'DRAFT_INSTRUCTIONS'
  | 'DRAFT_INBOX_INSTRUCTIONS'
>;

/**
 * The drafter the worker uses, from its configuration: the offline drafter by default, else a
 * model through the AI SDK's provider package. OpenAI is called through Chat Completions, which
 * every OpenAI-compatible proxy also speaks; `openai-compatible` covers Ollama, vLLM, llama.cpp's
 * server and LM Studio by base URL and model name. The config schema has already checked that
 * the provider's model, key and URL are present.
 */
export function createDrafter(config: DrafterConfig): Drafter {
  if (config.DRAFT_PROVIDER === 'offline') return new OfflineDrafter();
  const modelName = required(config.DRAFT_MODEL, 'DRAFT_MODEL');
  return new ModelDrafter({
    name: `${config.DRAFT_PROVIDER}:${modelName}`,
    model: languageModel(config, modelName),
    instructions: {
      default: config.DRAFT_INSTRUCTIONS ?? DEFAULT_DRAFT_INSTRUCTIONS,
      inboxes: config.DRAFT_INBOX_INSTRUCTIONS,
    },
    timeoutMs: config.DRAFT_TIMEOUT_MS,
    maxOutputTokens: config.DRAFT_MAX_OUTPUT_TOKENS,
  });
}

function languageModel(config: DrafterConfig, modelName: string): LanguageModel {
  const baseURL = config.DRAFT_BASE_URL?.replace(/\/+$/, '');
  switch (config.DRAFT_PROVIDER) {
    case 'openai':
      return createOpenAI({
        apiKey: required(config.DRAFT_API_KEY, 'DRAFT_API_KEY'),
        ...(baseURL ? { baseURL } : {}),
      }).chat(modelName);
    case 'anthropic':
      return createAnthropic({
        apiKey: required(config.DRAFT_API_KEY, 'DRAFT_API_KEY'),
        ...(baseURL ? { baseURL } : {}),
      })(modelName);
    case 'openai-compatible':
      return createOpenAICompatible({
        name: 'openai-compatible',
        baseURL: required(baseURL, 'DRAFT_BASE_URL'),
        // Local servers usually need no key; one behind a gateway may.
        ...(config.DRAFT_API_KEY ? { apiKey: config.DRAFT_API_KEY } : {}),
        // The reply's schema goes with the request (`response_format: json_schema`), which Ollama,
        // vLLM, llama.cpp and LM Studio accept; without it the server is only asked for some JSON.
        supportsStructuredOutputs: true,
      }).chatModel(modelName);
    default:
      throw new Error(`unknown DRAFT_PROVIDER ${String(config.DRAFT_PROVIDER)}`);
  }
}

function required(value: string | undefined, name: string): string {
  if (!value) throw new Error(`${name} is required for DRAFT_PROVIDER (the configuration check should have said so)`);
  return value;
}
