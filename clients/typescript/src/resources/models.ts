/** Models: which ones a run may name. */
import type { Core, RequestOptions } from '../core.js';
import type { ModelList } from '../models.js';
import { requestOptions } from './shared.js';

/** The models the service offers. */
export class Models {
  readonly #core: Core;

  constructor(core: Core) {
    this.#core = core;
  }

  /** The models on offer (builtin first), the default of a run that names none, and which other names a run may give. */
  async list(options: RequestOptions = {}): Promise<ModelList> {
    return this.#core.request<ModelList>('GET', '/models', { ...requestOptions(options), idempotent: true });
  }
}
