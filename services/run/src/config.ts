import { addressFields, commonFields, grpcClientFields, grpcFields, int, loadConfig, natsFields, oneOf, optionalStr, optionalUrl, FieldProblem, type Field, DEFAULT_PORTS } from '../../common/src/config.js';
import type { PriceTable } from './agents/models.js';

const list = (env: string, describe: string): Field<string[]> => ({
  env,
  describe,
  parse: (raw) => (raw ?? '').split(',').map((s) => s.trim()).filter(Boolean),
});

/** MODEL_PRICES: JSON {"model": {"input": USD per 1M input tokens, "output": USD per 1M output tokens}}. */
const prices: Field<PriceTable> = {
  env: 'MODEL_PRICES',
  describe: 'USD per million tokens, per model (JSON)',
  parse(raw) {
    if (!raw) return {};
    let v: unknown;
    try {
      v = JSON.parse(raw);
    } catch {
      throw new FieldProblem('MODEL_PRICES must be JSON like {"gpt-4o-mini":{"input":0.15,"output":0.6}}');
    }
    const ok = v && typeof v === 'object' && Object.values(v).every((p) => p && typeof p.input === 'number' && typeof p.output === 'number');
    if (!ok) throw new FieldProblem('MODEL_PRICES must map each model to {"input": number, "output": number}');
    return v as PriceTable;
  },
};

export const runConfigSpec = {
  ...commonFields,
  ...grpcFields(DEFAULT_PORTS.run),
  ...natsFields,
  ...grpcClientFields,
  browserPoolAddr: addressFields.browserPoolAddr,
  fileStorageAddr: addressFields.fileStorageAddr,
  maxRunningPerProject: int('MAX_RUNNING_RUNS_PER_PROJECT', { default: 5, min: 1, max: 1000, describe: 'Runs of one project running at once; more wait queued' }),
  concurrency: int('RUN_WORKER_CONCURRENCY', { default: 8, min: 1, max: 256, describe: 'Runs this process executes at once' }),
  leaseMs: int('RUN_LEASE_MS', { default: 15000, min: 1000, max: 600000, describe: 'A run whose worker stops renewing for this long is failed' }),
  pollMs: int('RUN_POLL_MS', { default: 2000, min: 100, max: 60000, describe: 'Fallback poll for queued runs (NATS wakes workers first)' }),
  maxSteps: int('RUN_MAX_STEPS', { default: 50, min: 1, max: 10000, describe: 'Steps before a run fails' }),
  maxRunMinutes: int('RUN_MAX_MINUTES', { default: 30, min: 1, max: 24 * 60, describe: 'Duration before a run fails' }),
  shellTimeoutMs: int('SHELL_TIMEOUT_MS', { default: 120000, min: 1000, max: 3600000, describe: 'Time limit of one browsercode shell command (its process group is killed)' }),
  shellMaxOutputBytes: int('SHELL_MAX_OUTPUT_BYTES', { default: 1024 * 1024, min: 1024, max: 64 * 1024 * 1024, describe: 'Output kept and streamed per shell command; the rest is dropped' }),
  shellSandbox: oneOf('SHELL_SANDBOX', ['required', 'off'] as const, {
    default: 'required',
    describe: "browsercode commands run in namespaces of their own (PID, mount, network); 'required' refuses commands where that is impossible, 'off' runs them without (unsafe: they can see the service's processes)",
  }),
  shellNetwork: oneOf('SHELL_NETWORK', ['isolated', 'host'] as const, { default: 'isolated', describe: "Network of sandboxed browsercode commands: 'isolated' (none) or 'host'" }),
  workDir: optionalStr('RUN_WORK_DIR', { describe: 'Where runs materialise their disks (default <tmp>/ats-run-work; outside DATA_DIR, so commands cannot see service data)' }),
  actionTimeoutMs: int('ACTION_TIMEOUT_MS', { default: 15000, min: 1000, max: 300000, describe: 'Time limit of one browser action' }),
  defaultModel: optionalStr('DEFAULT_MODEL', { describe: 'Model of runs that name none (builtin when no provider is configured)' }),
  openaiBaseUrl: optionalUrl('OPENAI_BASE_URL', ['http', 'https'], { describe: 'An OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp …), e.g. http://localhost:11434/v1' }),
  openaiApiKey: optionalStr('OPENAI_API_KEY', { describe: 'Its key (optional for local servers)' }),
  openaiModels: list('OPENAI_MODELS', 'Model names it serves (comma-separated); empty = any'),
  anthropicApiKey: optionalStr('ANTHROPIC_API_KEY', { describe: 'Anthropic key' }),
  anthropicBaseUrl: optionalUrl('ANTHROPIC_BASE_URL', ['http', 'https'], { describe: 'Anthropic API base URL (default the public one)' }),
  anthropicModels: list('ANTHROPIC_MODELS', 'Model names routed to Anthropic; empty = names starting with claude'),
  prices,
  modelTimeoutMs: int('MODEL_TIMEOUT_MS', { default: 60000, min: 1000, max: 600000, describe: 'Time limit of one model decision, retries included' }),
  modelMaxRetries: int('MODEL_MAX_RETRIES', { default: 2, min: 0, max: 10, describe: 'Retries of a failed model call (5xx, 429, network)' }),
};

/** The run service's configuration from the environment. */
export function loadRunConfig(env: Record<string, string | undefined> = process.env) {
  return loadConfig(runConfigSpec, env);
}
