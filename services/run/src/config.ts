import { addressFields, commonFields, ConfigError, instanceId, instanceIdProblem, outboxFields, grpcClientFields, grpcFields, int, loadConfig, natsFields, oneOf, optionalStr, optionalUrl, FieldProblem, type Field, DEFAULT_PORTS } from '../../common/src/config.js';
import type { PriceTable } from './agents/models.js';

const list = (env: string, describe: string): Field<string[]> => ({
  env,
  describe,
  parse: (raw) => (raw ?? '').split(',').map((s) => s.trim()).filter(Boolean),
});

/** MODEL_PRICES: JSON {"model": {"input": USD per 1M input tokens, "output": USD per 1M output tokens, "cachedInput"?: USD per 1M cached input tokens}}. */
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
    const ok = v && typeof v === 'object' && Object.values(v).every((p) => p && typeof p.input === 'number' && typeof p.output === 'number' && (p.cachedInput === undefined || typeof p.cachedInput === 'number'));
    if (!ok) throw new FieldProblem('MODEL_PRICES must map each model to {"input": number, "output": number} (and optionally "cachedInput": number)');
    return v as PriceTable;
  },
};

export const runConfigSpec = {
  ...commonFields,
  ...grpcFields(DEFAULT_PORTS.run),
  ...natsFields,
  ...grpcClientFields,
  ...outboxFields,
  browserPoolAddr: addressFields.browserPoolAddr,
  fileStorageAddr: addressFields.fileStorageAddr,
  instanceId: instanceId('RUN_INSTANCE_ID', 'Names this run process in the leases of the runs it holds (`<id>.<random>`), so a run is traced to its replica; the pod name'),
  maxRunningPerProject: int('MAX_RUNNING_RUNS_PER_PROJECT', { default: 5, min: 1, max: 1000, describe: 'Runs of one project running at once; more wait queued' }),
  concurrency: int('RUN_WORKER_CONCURRENCY', { default: 8, min: 1, max: 256, describe: 'Runs this process executes at once' }),
  leaseMs: int('RUN_LEASE_MS', { default: 15000, min: 1000, max: 600000, describe: 'A run whose worker stops renewing for this long is taken over by another replica (or failed, see RUN_MAX_TAKEOVERS)' }),
  maxTakeovers: int('RUN_MAX_TAKEOVERS', { default: 2, min: 0, max: 100, describe: 'How often one run is taken over by another replica after its worker died; one more death fails it' }),
  pollMs: int('RUN_POLL_MS', { default: 2000, min: 100, max: 60000, describe: 'Fallback poll for queued runs (NATS wakes workers first)' }),
  maxSteps: int('RUN_MAX_STEPS', { default: 50, min: 1, max: 10000, describe: 'Steps before a run ends (with its best partial answer in result)' }),
  maxModelFailures: int('RUN_MAX_MODEL_FAILURES', { default: 3, min: 1, max: 100, describe: 'Unusable model replies in a row (malformed tool call, no tool call, provider error or timeout) before a run ends with its best partial answer' }),
  maxOutputFiles: int('RUN_MAX_OUTPUT_FILES', { default: 1000, min: 1, max: 1_000_000, describe: 'Output files one run stores at most; further new files are not stored (one file.skipped event says how many)' }),
  maxRunMinutes: int('RUN_MAX_MINUTES', { default: 30, min: 1, max: 24 * 60, describe: 'Duration before a run fails' }),
  shellTimeoutMs: int('SHELL_TIMEOUT_MS', { default: 120000, min: 1000, max: 3600000, describe: 'Time limit of one browsercode shell command (its process group is killed)' }),
  shellMaxOutputBytes: int('SHELL_MAX_OUTPUT_BYTES', { default: 1024 * 1024, min: 1024, max: 64 * 1024 * 1024, describe: 'Output kept and streamed per shell command; the rest is dropped' }),
  shellSandbox: oneOf('SHELL_SANDBOX', ['required', 'off'] as const, {
    default: 'required',
    describe: "browsercode commands run in namespaces of their own (PID, mount, network); 'required' refuses commands where that is impossible, 'off' runs them without (unsafe: they can see the service's processes)",
  }),
  shellNetwork: oneOf('SHELL_NETWORK', ['isolated', 'host'] as const, { default: 'isolated', describe: "Network of sandboxed browsercode commands: 'isolated' (none) or 'host'" }),
  shellUidBase: int('SHELL_UID_BASE', { default: 100000, min: 1000, max: 2 ** 31 - 70000, describe: "As root, each run's commands run as their own uid/gid SHELL_UID_BASE+n (n < SHELL_UID_COUNT); keep the range free of real accounts" }),
  shellUidCount: int('SHELL_UID_COUNT', { default: 1000, min: 1, max: 65536, describe: 'Size of that range: runs with a terminal at once on this host' }),
  shellMaxProcesses: int('SHELL_MAX_PROCESSES', { default: 256, min: 8, max: 65536, describe: "Processes (and threads) one run's commands may have at once (cgroup pids.max, and RLIMIT_NPROC per run uid)" }),
  shellMaxMemoryMb: int('SHELL_MAX_MEMORY_MB', { default: 1024, min: 16, max: 1024 * 1024, describe: "Memory of one run's commands, private /tmp and /dev/shm included (cgroup memory limit; without cgroups RLIMIT_AS per process)" }),
  shellMaxCpuPercent: int('SHELL_MAX_CPU_PERCENT', { default: 100, min: 1, max: 100 * 256, describe: "CPU of one run's commands in percent of one core (cgroup CFS quota; without cgroups RLIMIT_CPU of the time limit at this share)" }),
  shellMaxDiskMb: int('SHELL_MAX_DISK_MB', { default: 1024, min: 1, max: 1024 * 1024, describe: "Size of a run's disk a command may grow it to (checked while it runs; RLIMIT_FSIZE per file); beyond, the command is stopped" }),
  shellTmpMb: int('SHELL_TMP_MB', { default: 256, min: 1, max: 64 * 1024, describe: 'Size of the private /tmp and of /dev/shm of a command (tmpfs, gone when it ends)' }),
  shellCgroups: oneOf('SHELL_CGROUPS', ['auto', 'off'] as const, { default: 'auto', describe: "'auto' caps each run with cgroup v1 pids/memory/cpu where /sys/fs/cgroup allows it (root), else rlimits; 'off' uses rlimits only" }),
  shellHidePaths: list('SHELL_HIDE_PATHS', 'More directories (comma-separated) covered by an empty tmpfs in every command (besides /run, /var/run, /tmp, /var/tmp, /dev/shm, /var/lib/postgresql, /var/lib/mysql, DATA_DIR, RUN_WORK_DIR and every host socket)'),
  workDir: optionalStr('RUN_WORK_DIR', { describe: 'Where runs materialise their disks (default <tmp>/ats-run-work; outside DATA_DIR, so commands cannot see service data)' }),
  stopGraceMs: int('RUN_STOP_GRACE_MS', { default: 30000, min: 100, max: 600000, describe: 'How long a stopped (or timed-out) run may take to wind down before its worker slot is freed and the stuck work is left to end' }),
  browserPoolRetryMs: int('BROWSER_POOL_RETRY_MS', { default: 30000, min: 0, max: 600000, describe: 'How long a run keeps trying the browser pool while it is unavailable (restarting) before failing' }),
  actionTimeoutMs: int('ACTION_TIMEOUT_MS', { default: 15000, min: 1000, max: 300000, describe: 'Time limit of one browser action' }),
  defaultModel: optionalStr('DEFAULT_MODEL', { describe: 'Model of runs that name none (builtin when no provider is configured)' }),
  openaiBaseUrl: optionalUrl('OPENAI_BASE_URL', ['http', 'https'], { describe: 'An OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp …), e.g. http://localhost:11434/v1' }),
  openaiApiKey: optionalStr('OPENAI_API_KEY', { describe: 'Its key (optional for local servers)' }),
  openaiModels: list('OPENAI_MODELS', 'Model names it serves (comma-separated); empty = any'),
  anthropicApiKey: optionalStr('ANTHROPIC_API_KEY', { describe: 'Anthropic key' }),
  anthropicBaseUrl: optionalUrl('ANTHROPIC_BASE_URL', ['http', 'https'], { describe: 'Anthropic API base URL (default the public one)' }),
  anthropicModels: list('ANTHROPIC_MODELS', 'Model names routed to Anthropic; empty = names starting with claude'),
  visionModels: list('VISION_MODELS', 'Model names (of either provider) that read images: each step also sends them a JPEG of the viewport'),
  prices,
  modelTimeoutMs: int('MODEL_TIMEOUT_MS', { default: 60000, min: 1000, max: 600000, describe: 'Time limit of one model decision, retries included' }),
  modelMaxRetries: int('MODEL_MAX_RETRIES', { default: 2, min: 0, max: 10, describe: 'Retries of a failed model call (5xx, 429, network)' }),
};

/** The run service's configuration from the environment. */
export function loadRunConfig(env: Record<string, string | undefined> = process.env) {
  const c = loadConfig(runConfigSpec, env);
  const problem = instanceIdProblem('RUN_INSTANCE_ID', c.instanceId);
  if (problem) throw new ConfigError([problem]);
  return c;
}
