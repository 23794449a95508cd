/** Browser profiles: CRUD, and loading and saving their state as whole, checked units. */
import { InvalidArgumentError, NotFoundError } from '../../common/src/errors.js';
import { newId } from '../../common/src/ids.js';
import type { Logger } from '../../common/src/logger.js';
import { cookieDomains, type ProfileState } from './profile-state.js';
import type { ProfileRepository, ProfileRow } from './profile.repository.js';

function checkName(name: string): string {
  const n = name.trim();
  if (!n || n.length > 200) throw new InvalidArgumentError('Profile name must be 1 to 200 characters');
  return n;
}

/** Profile CRUD and state loading/saving with the checks a client needs. */
export class Profiles {
  readonly #repo: ProfileRepository;
  readonly #maxStateBytes: number;
  readonly #logger: Logger;
  readonly #now: () => number;

  constructor(o: { repo: ProfileRepository; maxStateBytes: number; logger: Logger; now?: () => number }) {
    this.#repo = o.repo;
    this.#maxStateBytes = o.maxStateBytes;
    this.#logger = o.logger;
    this.#now = o.now ?? Date.now;
  }

  async create(projectId: string, name: string, userId: string | undefined): Promise<ProfileRow> {
    if (userId !== undefined && (userId.length < 1 || userId.length > 200)) throw new InvalidArgumentError('user_id must be 1 to 200 characters');
    return this.#repo.create({ id: newId('prf'), projectId, name: checkName(name), userId: userId ?? null });
  }

  async get(projectId: string, id: string): Promise<ProfileRow> {
    const p = id ? await this.#repo.get(projectId, id) : undefined;
    if (!p) throw new NotFoundError('Profile not found');
    return p;
  }

  async list(projectId: string, limit: number, cursor: string): Promise<{ items: ProfileRow[]; nextCursor: string; hasMore: boolean }> {
    return this.#repo.list(projectId, Math.min(Math.max(limit || 50, 1), 200), cursor || undefined);
  }

  async rename(projectId: string, id: string, name: string): Promise<ProfileRow> {
    const p = await this.#repo.rename(projectId, id, checkName(name));
    if (!p) throw new NotFoundError('Profile not found');
    return p;
  }

  async delete(projectId: string, id: string): Promise<boolean> {
    return this.#repo.delete(projectId, id);
  }

  /** The saved state to load into a browser. */
  async state(projectId: string, id: string): Promise<ProfileState> {
    const state = id ? await this.#repo.state(projectId, id) : undefined;
    if (!state) throw new NotFoundError('Profile not found');
    return state;
  }

  /** The save a stop goes on with after it answered: marked, so that a create or read on another replica waits for it. */
  markSaving(projectId: string, id: string, instanceId: string, at: Date): Promise<void> {
    return this.#repo.markSaving(projectId, id, instanceId, at);
  }

  clearSaving(projectId: string, id: string, instanceId: string, since: Date): Promise<void> {
    return this.#repo.clearSaving(projectId, id, instanceId, since);
  }

  clearSavingOf(instanceId: string): Promise<void> {
    return this.#repo.clearSavingOf(instanceId);
  }

  /** Whether another live pool instance is saving the profile (any of the project's, without `id`) since `after`. */
  savingElsewhere(projectId: string, id: string | undefined, self: string, after: Date): Promise<boolean> {
    return this.#repo.savingElsewhere(projectId, id, self, after);
  }

  /** Records that a browser started with the profile. */
  async markUsed(projectId: string, id: string): Promise<void> {
    await this.#repo.touch(projectId, id, new Date(this.#now()));
  }

  /** Stores a captured state as one unit; undefined when the profile is gone or the state too large. */
  async save(projectId: string, id: string, state: ProfileState): Promise<ProfileRow | undefined> {
    const json = JSON.stringify(state);
    if (Buffer.byteLength(json) > this.#maxStateBytes) {
      this.#logger.warn({ profileId: id, bytes: Buffer.byteLength(json), max: this.#maxStateBytes }, 'profile state too large; not saved');
      return undefined;
    }
    return this.#repo.saveState(projectId, id, json, cookieDomains(state), new Date(this.#now()));
  }
}
