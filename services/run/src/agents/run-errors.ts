/** How an agent loop ends other than with an answer. */

/** The run was stopped by its client. */
export class RunStopped extends Error {
  constructor() {
    super('Stopped');
    this.name = this.constructor.name;
  }
}

/** A limit (steps, duration, failed model replies) ended the run, maybe with a partial answer. */
export class LimitReached extends Error {
  /** The best answer the run had when it ended: stored as the run's result beside the error. */
  readonly partial: string | undefined;
  constructor(message: string, partial?: string) {
    super(message);
    this.name = this.constructor.name;
    this.partial = partial?.trim() ? partial : undefined;
  }
}

/** A run taken over from a dead worker cannot go on (its browser is gone): the message says why. */
export class CannotResume extends Error {
  constructor(message: string) {
    super(message);
    this.name = this.constructor.name;
  }
}
