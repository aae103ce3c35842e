import { generateText, type LanguageModel } from 'ai';
import type { Drafter, DraftOptions, DraftRequest } from './drafter';
import { modelCallFailure, refusal, truncated } from './model-failures';
import { conversationPrompt, systemPrompt, type DraftInstructions } from './prompt';

export interface ModelDrafterSettings {
  /** `<provider>:<model>`, recorded with every stored draft. */
  name: string;
  model: LanguageModel;
  instructions: DraftInstructions;
  /** One model call's deadline (DRAFT_TIMEOUT_MS); inside the activity's start-to-close timeout. */
  timeoutMs: number;
  maxOutputTokens: number;
}

/**
 * Drafts with a language model through the AI SDK: one HTTP call per draft() — the SDK's own
 * retries are off (`maxRetries: 0`) because Temporal's activity retry is the one retry layer,
 * and the draft activity stores the text before any send, so a message costs one successful call.
 * Output is validated by the draft activity (validDraft), the one place for that check.
 */
export class ModelDrafter implements Drafter {
  readonly name: string;

  constructor(private readonly settings: ModelDrafterSettings) {
    this.name = settings.name;
  }

  instructionsFor(inboxId: string): string {
    return systemPrompt(this.settings.instructions, inboxId);
  }

  async draft(request: DraftRequest, options: DraftOptions = {}): Promise<string> {
    const deadline = AbortSignal.timeout(this.settings.timeoutMs);
    const signal = options.signal ? AbortSignal.any([deadline, options.signal]) : deadline;
    let result: Awaited<ReturnType<typeof generateText>>;
    try {
      result = await generateText({
        model: this.settings.model,
        system: systemPrompt(this.settings.instructions, request.inboxId),
        prompt: conversationPrompt(request),
        maxOutputTokens: this.settings.maxOutputTokens,
        maxRetries: 0,
        abortSignal: signal,
      });
    } catch (error) {
      if (options.signal?.aborted && !deadline.aborted) throw error; // the activity was cancelled: Temporal's to handle
      throw modelCallFailure(error, {
        drafter: this.name,
        timeoutMs: this.settings.timeoutMs,
        timedOut: deadline.aborted,
      });
    }
    if (result.finishReason === 'content-filter') throw refusal(this.name, result.rawFinishReason);
    if (result.finishReason === 'length') throw truncated(this.name, this.settings.maxOutputTokens);
    return result.text;
  }
}
