/** Browser profiles and their saved state: the only code that knows the profiles table. */
import type { Knex } from '../../common/src/db.js';
import { keysetPage, newestFirst, type Page } from '../../common/src/keyset.js';
import type { ProfileState } from './profile-state.js';

/** A profile record (its state is read separately). */
export interface ProfileRow {
  id: string;
  projectId: string;
  name: string;
  userId: string | null;
  lastUsedAt: string | null;
  cookieDomains: string[];
  createdAt: string;
  updatedAt: string;
}

const COLUMNS = ['id', 'project_id', 'name', 'user_id', 'last_used_at', 'cookie_domains', 'created_at', 'updated_at'];
const iso = (v: unknown): string => new Date(v as string).toISOString();

function profile(r: any): ProfileRow {
  return {
    id: r.id,
    projectId: r.project_id,
    name: r.name,
    userId: r.user_id,
    lastUsedAt: r.last_used_at ? iso(r.last_used_at) : null,
    cookieDomains: JSON.parse(r.cookie_domains),
    createdAt: iso(r.created_at),
    updatedAt: iso(r.updated_at),
  };
}

/** Queries of the profiles table. */
export class ProfileRepository {
  readonly #knex: Knex;
  constructor(knex: Knex) {
    this.#knex = knex;
  }

  async create(p: { id: string; projectId: string; name: string; userId: string | null }): Promise<ProfileRow> {
    await this.#knex('profiles').insert({ id: p.id, project_id: p.projectId, name: p.name, user_id: p.userId });
    return (await this.get(p.projectId, p.id))!;
  }

  async get(projectId: string, id: string): Promise<ProfileRow | undefined> {
    const r = await this.#knex('profiles').select(COLUMNS).where({ id, project_id: projectId }).first();
    return r ? profile(r) : undefined;
  }

  /** A page of profiles, newest first (keyset after `cursor`). */
  async list(projectId: string, limit: number, cursor: string | undefined): Promise<Page<ProfileRow>> {
    const q = this.#knex('profiles').select(COLUMNS).where({ project_id: projectId });
    return keysetPage(this.#knex, q, { ...newestFirst(), limit, cursor, map: profile });
  }

  async rename(projectId: string, id: string, name: string): Promise<ProfileRow | undefined> {
    await this.#knex('profiles').where({ id, project_id: projectId }).update({ name, updated_at: this.#knex.fn.now() });
    return this.get(projectId, id);
  }

  async delete(projectId: string, id: string): Promise<boolean> {
    return (await this.#knex('profiles').where({ id, project_id: projectId }).delete().returning('id')).length > 0;
  }

  async state(projectId: string, id: string): Promise<ProfileState | undefined> {
    const r = await this.#knex('profiles').select(['state']).where({ id, project_id: projectId }).first();
    return r ? (JSON.parse(r.state) as ProfileState) : undefined;
  }

  /** Pool instance `instanceId` saves the profile in the background from `at` on (one stop at a time; a later one takes the mark over). */
  async markSaving(projectId: string, id: string, instanceId: string, at: Date): Promise<void> {
    await this.#knex('profiles').where({ id, project_id: projectId }).update({ saving_by: instanceId, saving_since: at });
  }

  /** The save marked at `since` is over (a later stop's mark is left alone). */
  async clearSaving(projectId: string, id: string, instanceId: string, since: Date): Promise<void> {
    await this.#knex('profiles').where({ id, project_id: projectId, saving_by: instanceId, saving_since: since }).update({ saving_by: null, saving_since: null });
  }

  /** Every mark of an instance's earlier process (it was killed mid-save; what it saved is what there is). */
  async clearSavingOf(instanceId: string): Promise<void> {
    await this.#knex('profiles').where({ saving_by: instanceId }).update({ saving_by: null, saving_since: null });
  }

  /**
   * Whether another pool instance that is still registered (not reaped: alive, or not yet seen
   * dead) is saving the profile (any of the project's, without `id`), marked after `after`.
   */
  async savingElsewhere(projectId: string, id: string | undefined, self: string, after: Date): Promise<boolean> {
    const q = this.#knex('profiles as p')
      .join('instances as i', 'i.id', 'p.saving_by')
      .where('p.project_id', projectId)
      .whereNot('p.saving_by', self)
      .andWhere('p.saving_since', '>', after)
      .first(this.#knex.raw('1 as one'));
    if (id) q.andWhere('p.id', id);
    return !!(await q);
  }

  async touch(projectId: string, id: string, at: Date): Promise<void> {
    await this.#knex('profiles').where({ id, project_id: projectId }).update({ last_used_at: at });
  }

  /**
   * Replaces the saved state in one UPDATE: readers see the old state or the new one, never a
   * mix. Undefined when the profile was deleted meanwhile (a late save never brings it back).
   */
  async saveState(projectId: string, id: string, stateJson: string, cookieDomains: string[], at: Date): Promise<ProfileRow | undefined> {
    const [r] = await this.#knex('profiles')
      .where({ id, project_id: projectId })
      .update({ state: stateJson, cookie_domains: JSON.stringify(cookieDomains), last_used_at: at, updated_at: at })
      .returning(COLUMNS);
    return r ? profile(r) : undefined;
  }
}
