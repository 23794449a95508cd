/**
 * Projects and their API keys, stored hashed (sha256 of a 190-bit random key; a slow hash
 * adds nothing for keys this long). The only file that knows the projects and keys tables; the
 * migrations of the gateway's other tables (idempotency.repository.ts, rate-limit.repository.ts)
 * are listed here too, so every opener of the gateway's database runs all of them.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Knex, Migration } from '../../services/common/src/db.js';
import { newId } from '../../services/common/src/ids.js';
import { idempotencyMigration } from './idempotency.repository.js';
import { rateLimitMigration } from './rate-limit.repository.js';

export const migrations: Migration[] = [
  {
    name: '20261122000000_projects_and_keys',
    async up(knex) {
      await knex.schema.createTable('projects', (t) => {
        t.string('id').primary();
        t.string('name').notNullable().unique();
        t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
      await knex.schema.createTable('api_keys', (t) => {
        t.string('id').primary();
        t.string('project_id').notNullable().references('projects.id');
        t.string('name').notNullable();
        t.string('key_hash', 64).notNullable().unique();
        t.string('prefix', 16).notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp('revoked_at', { useTz: true });
      });
    },
  },
  {
    name: '20261125000000_key_scope_and_use',
    async up(knex) {
      await knex.schema.alterTable('api_keys', (t) => {
        t.string('scope', 8).notNullable().defaultTo('full');
        t.timestamp('last_used_at', { useTz: true });
      });
    },
  },
  idempotencyMigration,
  rateLimitMigration,
];

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** A new plaintext key: `ats_` + 32 base62 characters. */
export function generateApiKey(): string {
  let s = '';
  for (const b of randomBytes(32)) s += BASE62[b % 62];
  return `ats_${s}`;
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export const API_KEY_SCOPES = ['full', 'read'] as const;
/** `full`: everything the project may do; `read`: GET and HEAD only. */
export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];

/** A key as listed (never the plaintext). */
export interface ApiKeyInfo {
  id: string;
  projectId: string;
  projectName: string;
  name: string;
  prefix: string;
  scope: ApiKeyScope;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

/** What a valid key grants. */
export interface KeyGrant {
  keyId: string;
  projectId: string;
  scope: ApiKeyScope;
}

/** How stale `last_used_at` may get: one write per key per minute at most, not one per request. */
const LAST_USED_RESOLUTION_S = 60;

const iso = (v: unknown) => (v == null ? null : new Date(v as string).toISOString());

export class ApiKeyRepository {
  readonly #knex: Knex;
  constructor(knex: Knex) {
    this.#knex = knex;
  }

  /** The project id of `name`, created if missing. */
  async ensureProject(name: string): Promise<string> {
    const found = await this.#knex('projects').where({ name }).first('id');
    if (found) return found.id as string;
    const id = newId('prj');
    await this.#knex('projects').insert({ id, name }).onConflict('name').ignore();
    const row = await this.#knex('projects').where({ name }).first('id');
    return row.id as string;
  }

  /** Stores `key` (hashed) for `projectName`; a key already stored is left as it is. */
  async register(key: string, projectName: string, name: string, scope: ApiKeyScope = 'full'): Promise<ApiKeyInfo> {
    const projectId = await this.ensureProject(projectName);
    return this.#insert(key, projectId, name, scope);
  }

  async #insert(key: string, projectId: string, name: string, scope: ApiKeyScope): Promise<ApiKeyInfo> {
    await this.#knex('api_keys')
      .insert({ id: newId('key'), project_id: projectId, name, scope, key_hash: hashApiKey(key), prefix: key.slice(0, 12) })
      .onConflict('key_hash')
      .ignore();
    return (await this.#rows(this.#select().where({ 'k.key_hash': hashApiKey(key) })))[0]!;
  }

  /** Creates a new key; the plaintext is returned once and never stored. */
  async create(projectName: string, name: string, scope: ApiKeyScope = 'full'): Promise<{ key: string; info: ApiKeyInfo }> {
    const key = generateApiKey();
    const info = await this.register(key, projectName, name, scope);
    return { key, info };
  }

  /** Creates a new key in the project `projectId` (the API's POST /api-keys). */
  async createInProject(projectId: string, name: string, scope: ApiKeyScope): Promise<{ key: string; info: ApiKeyInfo }> {
    const key = generateApiKey();
    return { key, info: await this.#insert(key, projectId, name, scope) };
  }

  /**
   * What a valid, unrevoked key grants; read from the database on every call, so a revocation
   * holds at once on every gateway. Records the use (at most once a minute per key).
   */
  async grantFor(key: string): Promise<KeyGrant | undefined> {
    const row = await this.#knex('api_keys').where({ key_hash: hashApiKey(key) }).whereNull('revoked_at').first('id', 'project_id', 'scope', 'last_used_at');
    if (!row) return undefined;
    const last = row.last_used_at == null ? 0 : new Date(row.last_used_at as string).getTime();
    if (Date.now() - last > LAST_USED_RESOLUTION_S * 1000) {
      // Conditional, so replicas racing on one key write once.
      await this.#knex('api_keys')
        .where({ id: row.id })
        .andWhere((q) => q.whereNull('last_used_at').orWhere('last_used_at', '<', this.#knex.raw(`now() - interval '${LAST_USED_RESOLUTION_S} seconds'`)))
        .update({ last_used_at: this.#knex.fn.now() });
    }
    return { keyId: row.id as string, projectId: row.project_id as string, scope: row.scope as ApiKeyScope };
  }

  /** The project a valid, unrevoked key belongs to. */
  async projectFor(key: string): Promise<string | undefined> {
    const row = await this.#knex('api_keys').where({ key_hash: hashApiKey(key) }).whereNull('revoked_at').first('project_id');
    return row?.project_id as string | undefined;
  }

  #select(): Knex.QueryBuilder {
    return this.#knex('api_keys as k')
      .join('projects as p', 'p.id', 'k.project_id')
      .select('k.id', 'k.project_id', 'p.name as project_name', 'k.name', 'k.prefix', 'k.scope', 'k.created_at', 'k.last_used_at', 'k.revoked_at')
      .orderBy([{ column: 'k.created_at' }, { column: 'k.id' }]);
  }

  async #rows(q: Knex.QueryBuilder): Promise<ApiKeyInfo[]> {
    const rows = await q;
    return rows.map((r: Record<string, unknown>) => ({
      id: r.id as string,
      projectId: r.project_id as string,
      projectName: r.project_name as string,
      name: r.name as string,
      prefix: r.prefix as string,
      scope: r.scope as ApiKeyScope,
      createdAt: iso(r.created_at)!,
      lastUsedAt: iso(r.last_used_at),
      revokedAt: iso(r.revoked_at),
    }));
  }

  /** Every key of every project (the CLI). */
  async list(): Promise<ApiKeyInfo[]> {
    return this.#rows(this.#select());
  }

  /** The unrevoked keys of one project (the API). */
  async listActive(projectId: string): Promise<ApiKeyInfo[]> {
    return this.#rows(this.#select().where({ 'k.project_id': projectId }).whereNull('k.revoked_at'));
  }

  /** Revokes one key of `projectId`; false when it has no such unrevoked key. */
  async revokeInProject(projectId: string, id: string): Promise<boolean> {
    return (await this.#knex('api_keys').where({ id, project_id: projectId }).whereNull('revoked_at').update({ revoked_at: this.#knex.fn.now() })) > 0;
  }

  /** Revokes by key id or printed prefix; resolves to how many keys were revoked. */
  async revoke(idOrPrefix: string): Promise<number> {
    return this.#knex('api_keys')
      .where((q) => q.where({ id: idOrPrefix }).orWhere({ prefix: idOrPrefix }))
      .whereNull('revoked_at')
      .update({ revoked_at: this.#knex.fn.now() });
  }
}
