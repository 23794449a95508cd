/** Browser profiles: cookies and local storage kept between browsers (a login that lasts). */
import type { CamelKeys } from '../casing.js';
import { toSnake } from '../casing.js';
import type { Core, RequestOptions } from '../core.js';
import type { CreateProfileRequest, Profile, ProfileList, UpdateProfileRequest } from '../models.js';
import { PageIterator } from '../pagination.js';
import { requestOptions, seg } from './shared.js';
import type { PageOptions } from './workspaces.js';

/** The project's browser profiles. */
export class Profiles {
  readonly #core: Core;

  constructor(core: Core) {
    this.#core = core;
  }

  /** Creates a profile (`userId`: your own label for whose it is). */
  create(options: CamelKeys<CreateProfileRequest> & RequestOptions): Promise<Profile> {
    const { signal, timeoutMs, maxRetries, ...request } = options;
    return this.#core.request<Profile>('POST', '/browser-profiles', { signal, timeoutMs, maxRetries, body: toSnake(request) as CreateProfileRequest });
  }

  /** Every profile, across pages. */
  list(options: PageOptions = {}): PageIterator<Profile> {
    return new PageIterator<Profile>(async (cursor) => {
      const page = await this.#core.request<ProfileList>('GET', '/browser-profiles', { ...requestOptions(options), idempotent: true, query: { limit: options.limit, cursor } });
      return { items: page.items, next: page.nextCursor, hasMore: page.hasMore };
    }, options.cursor);
  }

  /** One profile. */
  get(profileId: string, options: RequestOptions = {}): Promise<Profile> {
    return this.#core.request<Profile>('GET', `/browser-profiles/${seg(profileId)}`, { ...requestOptions(options), idempotent: true });
  }

  /** Renames a profile. */
  update(profileId: string, options: CamelKeys<UpdateProfileRequest> & RequestOptions): Promise<Profile> {
    const { signal, timeoutMs, maxRetries, ...request } = options;
    return this.#core.request<Profile>('PATCH', `/browser-profiles/${seg(profileId)}`, { signal, timeoutMs, maxRetries, body: toSnake(request) as UpdateProfileRequest });
  }

  /** Deletes a profile (deleting one already gone is fine). */
  async delete(profileId: string, options: RequestOptions = {}): Promise<void> {
    await this.#core.request<undefined>('DELETE', `/browser-profiles/${seg(profileId)}`, { ...requestOptions(options), idempotent: true });
  }
}
