/**
 * A pass of work run when something says there may be work (`wake`) and otherwise every `pollMs`
 * (what no wake-up announced: a retry falling due, a row left by a crashed process). Passes never
 * overlap; a wake-up during one runs another right after it.
 */
export class WakeLoop {
  readonly #pass: () => Promise<void>;
  readonly #pollMs: number;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;

  /** `pass` should not throw; what it throws goes to `onError`. */
  constructor(pass: () => Promise<void>, pollMs: number, onError: (err: Error) => void) {
    this.#pass = () => pass().catch(onError);
    this.#pollMs = pollMs;
  }

  wake(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    clearTimeout(this.#timer);
    this.#running = this.#pass().finally(() => {
      this.#running = undefined;
      if (this.#stopped) return;
      if (this.#again) {
        this.#again = false;
        return this.wake();
      }
      this.#timer = setTimeout(() => this.wake(), this.#pollMs);
      this.#timer.unref();
    });
  }

  /** No pass starts from now on; resolves when the one under way ended. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
  }
}
