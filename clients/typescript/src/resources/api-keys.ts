/** The project's API keys, managed with a key of the project (`npm run keys` does the same on the server). */
import type { CamelKeys } from '../casing.js';
import type { Core, RequestOptions } from '../core.js';
import type { ApiKey, ApiKeyCreated, ApiKeyList, CreateApiKeyRequest } from '../models.js';
import { requestOptions, seg } from './shared.js';

/** The project's API keys. */
export class ApiKeys {
  readonly #core: Core;

  constructor(core: Core) {
    this.#core = core;
  }

  /** Issues a key (`scope`: `full`, the default, or `read`: GET only). `key` is in this reply only: store it now. */
  create(options: CamelKeys<CreateApiKeyRequest> & RequestOptions): Promise<ApiKeyCreated> {
    const { signal, timeoutMs, maxRetries, ...request } = options;
    return this.#core.request<ApiKeyCreated>('POST', '/api-keys', { signal, timeoutMs, maxRetries, body: request as CreateApiKeyRequest });
  }

  /** The keys that are not revoked: name, prefix, scope, created and last used (never the keys themselves). */
  async list(options: RequestOptions = {}): Promise<ApiKey[]> {
    return (await this.#core.request<ApiKeyList>('GET', '/api-keys', { ...requestOptions(options), idempotent: true })).items;
  }

  /** Revokes a key: it fails from the next request on, on every gateway. */
  async revoke(apiKeyId: string, options: RequestOptions = {}): Promise<void> {
    await this.#core.request<undefined>('DELETE', `/api-keys/${seg(apiKeyId)}`, { ...requestOptions(options), idempotent: true });
  }
}
