/**
 * The one polling helper of the tests. Poll only what can only be asked about (an HTTP resource,
 * a row, a directory); where an event or a hook says the thing happened, await that instead.
 */

type Maybe<T> = T | undefined | null | false;

/**
 * Calls `check` until it returns a truthy value, and returns that value. After `timeoutMs` it
 * throws, naming `what` and the last value seen.
 */
export async function until<T>(check: () => Maybe<T> | Promise<Maybe<T>>, o: { timeoutMs?: number; intervalMs?: number; what?: string } = {}): Promise<T> {
  const { timeoutMs = 20_000, intervalMs = 20, what = 'condition' } = o;
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() >= end) throw new Error(`until: ${what} not met within ${timeoutMs} ms (last: ${String(v)})`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Awaits `promise` (an event the test waits for), or throws after `timeoutMs`, naming `what`: no wait in a test is unbounded. */
export async function within<T>(promise: Promise<T>, what: string, timeoutMs = 20_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`within: ${what} did not happen within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}
