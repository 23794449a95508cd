/** What the registry says a run may name (GET /models), for each way the providers are configured. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createModelRegistry, type ModelsConfig } from './models.js';

const base: ModelsConfig = { openaiModels: [], anthropicModels: [], prices: {}, timeoutMs: 1000, maxRetries: 0 };

test('when no provider is configured, then builtin is the one model and the default, and no other name is accepted', () => {
  const r = createModelRegistry(base);
  assert.deepEqual(r.offered(), { models: [{ name: 'builtin', provider: 'builtin', vision: false }], otherNames: '' });
  assert.equal(r.defaultModel, 'builtin');
});

test('when models are listed for both providers, then each is offered with its provider and whether it reads images, and only those names are accepted', () => {
  const r = createModelRegistry({
    ...base,
    openaiBaseUrl: 'http://127.0.0.1:9/v1',
    openaiModels: ['gpt-4o-mini', 'gpt-4o'],
    anthropicApiKey: 'sk-test',
    anthropicModels: ['claude-sonnet-4-5'],
    visionModels: ['gpt-4o'],
    defaultModel: 'gpt-4o',
  });
  assert.deepEqual(r.offered(), {
    models: [
      { name: 'builtin', provider: 'builtin', vision: false },
      { name: 'gpt-4o-mini', provider: 'openai-compatible', vision: false },
      { name: 'gpt-4o', provider: 'openai-compatible', vision: true },
      { name: 'claude-sonnet-4-5', provider: 'anthropic', vision: false },
    ],
    otherNames: '',
  });
  assert.equal(r.defaultModel, 'gpt-4o');
  for (const m of r.offered().models) assert.doesNotThrow(() => r.check(m.name));
});

test('when an endpoint serves any name, then the default is offered and the other names are described; those names are accepted', () => {
  const r = createModelRegistry({ ...base, openaiBaseUrl: 'http://127.0.0.1:9/v1', defaultModel: 'llama3.1', anthropicApiKey: 'sk-test' });
  assert.deepEqual(
    r.offered().models.map((m) => [m.name, m.provider]),
    [
      ['builtin', 'builtin'],
      ['llama3.1', 'openai-compatible'],
    ],
  );
  assert.equal(r.offered().otherNames, 'any model of the OpenAI-compatible endpoint; any Anthropic model whose name starts with "claude"');
  assert.doesNotThrow(() => r.check('qwen2.5'));
  assert.doesNotThrow(() => r.check('claude-opus-4'));
});
