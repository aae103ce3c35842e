import type { Behaviour, BehaviourInput } from './behaviours';
import { controlCall } from '../control-call';
import type { ModelCall } from './app';

/** Typed client for the model stand-in's /_model control API (plain fetch, for tests and scripts). */
export class ModelStandInControl {
  constructor(readonly baseUrl: string) {}

  /** The API root a provider package takes as its base URL. */
  get apiUrl(): string {
    return `${this.baseUrl}/v1`;
  }

  async calls(filter: { contains?: string } = {}): Promise<ModelCall[]> {
    const query = filter.contains ? `?contains=${encodeURIComponent(filter.contains)}` : '';
    return (await this.call<{ calls: ModelCall[] }>('GET', `/_model/calls${query}`)).calls;
  }

  /** Replaces every rule; `[]` clears. */
  async setBehaviours(rules: BehaviourInput | BehaviourInput[]): Promise<Behaviour[]> {
    return (
      await this.call<{ rules: Behaviour[] }>('POST', '/_model/behaviours', {
        rules: Array.isArray(rules) ? rules : [rules],
      })
    ).rules;
  }

  async clearBehaviours(): Promise<void> {
    await this.call('DELETE', '/_model/behaviours');
  }

  /** The inputs of every `/v1/embeddings` request, in order. */
  async embeddingCalls(): Promise<string[][]> {
    return (await this.call<{ calls: string[][] }>('GET', '/_model/embeddings')).calls;
  }

  async reset(): Promise<void> {
    await this.call('POST', '/_model/reset', {});
  }

  private call<T>(method: string, path: string, body?: unknown): Promise<T> {
    return controlCall<T>('model stand-in', this.baseUrl, method, path, body);
  }
}
