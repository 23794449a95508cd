/**
 * The node's capacity in Chromium processes: every browser of this process (warm, handed out,
 * still stopping) holds a slot from before its launch until its process has exited and its
 * folders are gone, so a stop that answers early never lets a new launch overrun the node. A
 * launch that would exceed it waits; requests are served before warm launches, and a request
 * that has to wait makes the warm pool give back an idle browser (`onStarved`).
 */

/** A held slot; `release` is idempotent. */
export interface Slot {
  release(): void;
}

interface Waiter {
  grant: (slot: Slot) => void;
  reject: (err: Error) => void;
}

/** A counting semaphore with two priorities (requests before warm launches). */
export class NodeSlots {
  readonly capacity: number;
  #held = 0;
  readonly #requests: Waiter[] = [];
  readonly #warm: Waiter[] = [];
  /** Called when a request waits: an idle warm browser should be shut down to free its slot. */
  onStarved: (() => void) | undefined;

  constructor(capacity: number) {
    this.capacity = capacity;
  }

  get held(): number {
    return this.#held;
  }

  /** True when a request is waiting for a slot (the warm pool then launches nothing). */
  get contended(): boolean {
    return this.#requests.length > 0;
  }

  /** A slot, at once when one is free, else the next one freed (requests first); rejects when `signal` aborts. */
  acquire(kind: 'request' | 'warm', signal?: AbortSignal): Promise<Slot> {
    if (signal?.aborted) return Promise.reject(new Error('aborted'));
    if (this.#held < this.capacity && !this.#requests.length && (kind === 'request' || !this.#warm.length)) return Promise.resolve(this.#take());
    return new Promise<Slot>((resolve, reject) => {
      const queue = kind === 'request' ? this.#requests : this.#warm;
      const w: Waiter = {
        grant: (slot) => {
          signal?.removeEventListener('abort', abort);
          resolve(slot);
        },
        reject,
      };
      const abort = () => {
        const i = queue.indexOf(w);
        if (i !== -1) queue.splice(i, 1);
        reject(new Error('aborted'));
      };
      signal?.addEventListener('abort', abort, { once: true });
      queue.push(w);
      if (kind === 'request') this.onStarved?.();
    });
  }

  #take(): Slot {
    this.#held++;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.#held--;
        const next = this.#requests.shift() ?? this.#warm.shift();
        if (next) next.grant(this.#take());
      },
    };
  }
}
