/** Sessions: the threads of runs (created by a first run, never directly). */
import type { CamelKeys } from '../casing.js';
import type { Core, RequestOptions } from '../core.js';
import type { PageQuery, Session, SessionList } from '../models.js';
import { PageIterator } from '../pagination.js';
import { agentPath, requestOptions, seg, type AgentOption } from './shared.js';

/** `sessions.list`: paging (`limit` is the page size; `cursor` starts later). */
export type ListSessionsOptions = CamelKeys<PageQuery> & AgentOption & RequestOptions;

/** The sessions of an agent (`browser-agent` unless `agent` says otherwise). */
export class Sessions {
  readonly #core: Core;

  constructor(core: Core) {
    this.#core = core;
  }

  /** The agent's sessions across pages. */
  list(options: ListSessionsOptions = {}): PageIterator<Session> {
    return new PageIterator<Session>(async (cursor) => {
      const page = await this.#core.request<SessionList>('GET', `${agentPath(options)}/sessions`, {
        ...requestOptions(options),
        idempotent: true,
        query: { limit: options.limit, cursor },
      });
      return { items: page.items, next: page.nextCursor, hasMore: page.hasMore };
    }, options.cursor);
  }

  /** One session. */
  get(sessionId: string, options: AgentOption & RequestOptions = {}): Promise<Session> {
    return this.#core.request<Session>('GET', `${agentPath(options)}/sessions/${seg(sessionId)}`, { ...requestOptions(options), idempotent: true });
  }
}
