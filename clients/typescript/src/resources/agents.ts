/** Agents: what each one can do and how to watch it. */
import type { Core, RequestOptions } from '../core.js';
import type { Agent, AgentList } from '../models.js';
import { requestOptions } from './shared.js';

/** The agents the service offers. */
export class Agents {
  readonly #core: Core;

  constructor(core: Core) {
    this.#core = core;
  }

  /** Every agent with its capabilities, session kind, watch verb and example tasks. */
  async list(options: RequestOptions = {}): Promise<Agent[]> {
    return (await this.#core.request<AgentList>('GET', '/agents', { ...requestOptions(options), idempotent: true })).agents;
  }
}
