/**
 * Which models a run may name, how to build one, and what its tokens cost. `builtin` needs no
 * provider and is the default only when no provider is configured.
 */
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { InvalidArgumentError } from '../../../common/src/errors.js';
import { BuiltinModel } from './builtin-model.js';
import { LlmModel } from './llm-model.js';
import type { AgentModel, Toolset, Usage } from './model.js';

/** USD per million tokens; `cachedInput` prices input read from the provider's cache (else `input`). */
export type PriceTable = Record<string, { input: number; output: number; cachedInput?: number }>;

export interface ModelsConfig {
  openaiBaseUrl?: string | undefined;
  openaiApiKey?: string | undefined;
  /** Model names served by the OpenAI-compatible endpoint; empty = any name not claimed elsewhere. */
  openaiModels: string[];
  anthropicApiKey?: string | undefined;
  anthropicBaseUrl?: string | undefined;
  /** Model names routed to Anthropic; empty = names starting with "claude". */
  anthropicModels: string[];
  defaultModel?: string | undefined;
  /** Model names that read images: each step sends them a screenshot of the viewport. */
  visionModels?: string[];
  prices: PriceTable;
  timeoutMs: number;
  maxRetries: number;
}

/** A model a run may name, as the API lists it. */
export interface OfferedModel {
  name: string;
  provider: 'builtin' | 'openai-compatible' | 'anthropic';
  vision: boolean;
}

export interface ModelRegistry {
  /** The model used when a run names none. */
  readonly defaultModel: string;
  /** The named models (builtin first, the default among them), and which other names are accepted too ('' when none). */
  offered(): { models: OfferedModel[]; otherNames: string };
  /** Throws InvalidArgumentError unless `name` can be used. */
  check(name: string): void;
  /** Builds the model for one run (the builtin parses the task here; its errors fail the run). */
  create(name: string, task: string, toolset?: Toolset): AgentModel;
  /** Cost in USD of `usage` on `model` (0 when the table has no price for it). */
  price(name: string, usage: Usage): number;
}

export function createModelRegistry(c: ModelsConfig): ModelRegistry {
  const openai = c.openaiBaseUrl ? createOpenAICompatible({ name: 'openai-compatible', baseURL: c.openaiBaseUrl, ...(c.openaiApiKey ? { apiKey: c.openaiApiKey } : {}), includeUsage: true }) : undefined;
  const anthropic = c.anthropicApiKey ? createAnthropic({ apiKey: c.anthropicApiKey, ...(c.anthropicBaseUrl ? { baseURL: c.anthropicBaseUrl } : {}) }) : undefined;
  const isAnthropic = (name: string) => Boolean(anthropic) && (c.anthropicModels.length ? c.anthropicModels.includes(name) : name.startsWith('claude'));
  const isOpenai = (name: string) => Boolean(openai) && (c.openaiModels.length ? c.openaiModels.includes(name) : !isAnthropic(name));
  const offered = () => ['builtin', ...c.openaiModels, ...c.anthropicModels].join(', ') + (openai && !c.openaiModels.length ? ', or any model of the OpenAI-compatible endpoint' : '');

  const defaultModel = c.defaultModel ?? c.openaiModels[0] ?? c.anthropicModels[0] ?? (anthropic ? 'claude-sonnet-4-5' : undefined) ?? 'builtin';
  if (defaultModel !== 'builtin' && !isOpenai(defaultModel) && !isAnthropic(defaultModel)) {
    throw new InvalidArgumentError(`DEFAULT_MODEL ${defaultModel} is served by no configured provider`);
  }
  if (openai && !c.defaultModel && !c.openaiModels.length) throw new InvalidArgumentError('With OPENAI_BASE_URL set, set DEFAULT_MODEL or OPENAI_MODELS');

  return {
    defaultModel,
    offered() {
      const names = [...new Set(['builtin', ...c.openaiModels, ...c.anthropicModels, defaultModel])];
      const models = names.map((name): OfferedModel => ({
        name,
        provider: name === 'builtin' ? 'builtin' : isAnthropic(name) ? 'anthropic' : 'openai-compatible',
        vision: c.visionModels?.includes(name) ?? false,
      }));
      const other = [
        ...(openai && !c.openaiModels.length ? ['any model of the OpenAI-compatible endpoint'] : []),
        ...(anthropic && !c.anthropicModels.length ? ['any Anthropic model whose name starts with "claude"'] : []),
      ];
      return { models, otherNames: other.join('; ') };
    },
    check(name) {
      if (name !== 'builtin' && !isOpenai(name) && !isAnthropic(name)) throw new InvalidArgumentError(`Unknown model "${name}"; this service offers: ${offered()}`);
    },
    create(name, task, toolset = 'browser') {
      if (name === 'builtin') return new BuiltinModel(task, toolset);
      const model = isAnthropic(name) ? anthropic!(name) : openai!.chatModel(name);
      return new LlmModel({ name, model, timeoutMs: c.timeoutMs, maxRetries: c.maxRetries, vision: c.visionModels?.includes(name) ?? false });
    },
    price(name, usage) {
      const p = c.prices[name];
      if (!p) return 0;
      const cached = Math.min(usage.cachedInputTokens ?? 0, usage.inputTokens);
      return ((usage.inputTokens - cached) * p.input + cached * (p.cachedInput ?? p.input) + usage.outputTokens * p.output) / 1e6;
    },
  };
}
