import { generateText, NoObjectGeneratedError, NoOutputGeneratedError, Output, type LanguageModel } from 'ai';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../../../contract';
import { draftAnswerSchema } from './answer';
import type { DraftAnswer, Drafter, DraftOptions, DraftRequest } from './drafter';
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
 * The model answers through the AI SDK's structured output (answer.ts's schema); an answer that
 * ignores it is a final `DraftSchemaViolation`. Its text is validated by the draft activity
 * (validDraft), the one place for that check.
 */
export class ModelDrafter implements Drafter {
  readonly name: string;

  constructor(private readonly settings: ModelDrafterSettings) {
    this.name = settings.name;
  }

  instructionsFor(inboxId: string): string {
    return systemPrompt(this.settings.instructions, inboxId);
  }

  async draft(request: DraftRequest, options: DraftOptions = {}): Promise<DraftAnswer> {
    const deadline = AbortSignal.timeout(this.settings.timeoutMs);
    const signal = options.signal ? AbortSignal.any([deadline, options.signal]) : deadline;
    let result;
    try {
      result = await generateText({
        model: this.settings.model,
        output: Output.object({ schema: draftAnswerSchema, name: 'reply' }),
        system: systemPrompt(this.settings.instructions, request.inboxId, request.knowledge),
        prompt: conversationPrompt(request),
        maxOutputTokens: this.settings.maxOutputTokens,
        maxRetries: 0,
        abortSignal: signal,
      });
    } catch (error) {
      if (options.signal?.aborted && !deadline.aborted) throw error; // the activity was cancelled: Temporal's to handle
      if (NoObjectGeneratedError.isInstance(error)) {
        if (error.finishReason === 'length') throw truncated(this.name, this.settings.maxOutputTokens);
        if (error.finishReason === 'content-filter') throw refusal(this.name, undefined);
        throw schemaViolation(this.name);
      }
      throw modelCallFailure(error, {
        drafter: this.name,
        timeoutMs: this.settings.timeoutMs,
        timedOut: deadline.aborted,
      });
    }
    if (result.finishReason === 'content-filter') throw refusal(this.name, result.rawFinishReason);
    if (result.finishReason === 'length') throw truncated(this.name, this.settings.maxOutputTokens);
    try {
      const usage = { inputTokens: result.usage.inputTokens ?? 0, outputTokens: result.usage.outputTokens ?? 0 };
      return { ...result.output, usage };
    } catch (error) {
      if (NoOutputGeneratedError.isInstance(error)) throw schemaViolation(this.name);
      throw error;
    }
  }
}

/** The answer is not the JSON the schema asks for: retrying the same prompt is not a fix, a person answers. */
function schemaViolation(drafter: string): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.DraftSchemaViolation,
    message: `the ${drafter} model's answer is not the structured reply asked for ({ reply, citations, handoff }); a person must answer this message`,
    nonRetryable: true,
  });
}
