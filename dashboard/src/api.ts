/**
 * The dashboard's one way to the API: the TypeScript SDK, on this page's origin, with the key the
 * user pasted. The key lives in the browser's localStorage only (never in a URL or a log).
 */
import { type Agent, AgentTaskService, APIError, APIStatusError, AuthenticationError, UnprocessableEntityError } from '@agent-task-service/client';
import { createContext } from 'preact';
import { useContext } from 'preact/hooks';

const KEY_ITEM = 'ats.apiKey';

/** The key kept from an earlier sign-in, if any. */
export function storedKey(): string | null {
  try {
    return localStorage.getItem(KEY_ITEM);
  } catch {
    return null;
  }
}

export function storeKey(key: string): void {
  localStorage.setItem(KEY_ITEM, key);
}

export function clearKey(): void {
  try {
    localStorage.removeItem(KEY_ITEM);
  } catch {
    /* storage unavailable: nothing was kept */
  }
}

/** A client of this origin's API with `apiKey`. */
export function makeClient(apiKey: string): AgentTaskService {
  return new AgentTaskService({ apiKey, baseUrl: window.location.origin, maxRetries: 2, timeoutMs: 30_000 });
}

export const ClientContext = createContext<AgentTaskService | null>(null);
/** Signs out (clears the key); pages offer it when the key is refused. */
export const SignOutContext = createContext<() => void>(() => undefined);

const agentLists = new WeakMap<AgentTaskService, Promise<Agent[]>>();
/** The service's agents, asked once per client (they change only with a deploy). */
export function agentsOf(client: AgentTaskService): Promise<Agent[]> {
  let p = agentLists.get(client);
  if (!p) {
    p = client.agents.list();
    p.catch(() => agentLists.delete(client));
    agentLists.set(client, p);
  }
  return p;
}

/** The signed-in client (every page below the sign-in has one). */
export function useClient(): AgentTaskService {
  const c = useContext(ClientContext);
  if (!c) throw new Error('useClient outside a signed-in page');
  return c;
}

/** What the user is told about a failed call: the API's detail first, then how to follow it up. */
export interface Problem {
  title: string;
  detail: string;
  /** The 422 items, one line each (`body.task: Field required`). */
  items: string[];
  status: number | null;
  requestId: string | null;
  /** The key is not (or no longer) accepted: signing in again is the way out. */
  unauthorized: boolean;
}

export function describeError(err: unknown): Problem {
  const base = { items: [] as string[], status: null as number | null, requestId: null as string | null, unauthorized: false };
  if (err instanceof UnprocessableEntityError) {
    return {
      ...base,
      title: 'The request was not accepted',
      detail: 'Check the fields below.',
      items: err.errors.map((e) => `${e.loc.filter((l) => l !== 'body' && l !== 'query').join('.') || 'request'}: ${e.msg}`),
      status: err.status,
      requestId: err.requestId,
    };
  }
  if (err instanceof APIStatusError) {
    return {
      ...base,
      title: err instanceof AuthenticationError ? 'The API key was not accepted' : `The service answered ${err.status}`,
      detail: err.detail ?? err.message,
      status: err.status,
      requestId: err.requestId,
      unauthorized: err instanceof AuthenticationError,
    };
  }
  if (err instanceof APIError) {
    return { ...base, title: 'The service could not be reached', detail: err.message };
  }
  if (err instanceof Error) return { ...base, title: 'Something went wrong', detail: err.message };
  return { ...base, title: 'Something went wrong', detail: String(err) };
}
