/**
 * `GET /api/v1/models` — the one call the dashboard makes beside the TypeScript SDK, until the
 * SDK offers it (`models.list()`; its types come from /openapi.json, which names `ModelList`).
 * Same key header as the SDK; an error reply becomes the SDK's error class for its status, so a
 * page shows it like any other.
 */
import { APIConnectionError, APIStatusError, AuthenticationError } from '@agent-task-service/client';

export interface Model {
  name: string;
  provider: 'builtin' | 'openai-compatible' | 'anthropic';
  vision: boolean;
  default: boolean;
}

export interface ModelList {
  models: Model[];
  default: string;
  /** Which names beyond the list a run may also give; null when the list is all. */
  otherNames: string | null;
}

export async function listModels(apiKey: string, signal?: AbortSignal): Promise<ModelList> {
  const what = 'GET /api/v1/models';
  let res: Response;
  try {
    res = await fetch(`${window.location.origin}/api/v1/models`, { headers: { 'X-Service-API-Key': apiKey, Accept: 'application/json' }, signal });
  } catch (err) {
    if (signal?.aborted) throw err;
    throw new APIConnectionError(what, err);
  }
  const body: unknown = await res.json().catch(() => null);
  if (res.ok) return body as ModelList;
  const raw = (body as { detail?: unknown } | null)?.detail;
  const init = { status: res.status, detail: typeof raw === 'string' ? raw : null, requestId: res.headers.get('x-request-id'), body, headers: res.headers, what };
  throw res.status === 401 ? new AuthenticationError(init) : new APIStatusError(init);
}
