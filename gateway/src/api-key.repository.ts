/**
 * Projects and their API keys, stored hashed (sha256 of a 190-bit random key; a slow hash
 * adds nothing for keys this long). The only file that knows the gateway's tables.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Knex, Migration } from '../../services/common/src/db.js';
import { newId } from '../../services/common/src/ids.js';

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

/** A key as listed (never the plaintext). */
export interface ApiKeyInfo {
  id: string;
  projectId: string;
  projectName: string;
  name: string;
  prefix: string;
  createdAt: string;
  revokedAt: string | null;
}

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
  async register(key: string, projectName: string, name: string): Promise<ApiKeyInfo> {
    const projectId = await this.ensureProject(projectName);
    const hash = hashApiKey(key);
    await this.#knex('api_keys')
      .insert({ id: newId('key'), project_id: projectId, name, key_hash: hash, prefix: key.slice(0, 12) })
      .onConflict('key_hash')
      .ignore();
    return (await this.list()).find((k) => k.prefix === key.slice(0, 12) && k.projectId === projectId)!;
  }

  /** Creates a new key; the plaintext is returned once and never stored. */
  async create(projectName: string, name: string): Promise<{ key: string; info: ApiKeyInfo }> {
    const key = generateApiKey();
    const info = await this.register(key, projectName, name);
    return { key, info };
  }

  /** The project a valid, unrevoked key belongs to. */
  async projectFor(key: string): Promise<string | undefined> {
    const row = await this.#knex('api_keys').where({ key_hash: hashApiKey(key) }).whereNull('revoked_at').first('project_id');
    return row?.project_id as string | undefined;
  }

  async list(): Promise<ApiKeyInfo[]> {
    const rows = await this.#knex('api_keys as k')
      .join('projects as p', 'p.id', 'k.project_id')
      .select('k.id', 'k.project_id', 'p.name as project_name', 'k.name', 'k.prefix', 'k.created_at', 'k.revoked_at')
      .orderBy('k.created_at');
    return rows.map((r) => ({
      id: r.id,
      projectId: r.project_id,
      projectName: r.project_name,
      name: r.name,
      prefix: r.prefix,
      createdAt: iso(r.created_at)!,
      revokedAt: iso(r.revoked_at),
    }));
  }

  /** Revokes by key id or printed prefix; resolves to how many keys were revoked. */
  async revoke(idOrPrefix: string): Promise<number> {
    return this.#knex('api_keys')
      .where((q) => q.where({ id: idOrPrefix }).orWhere({ prefix: idOrPrefix }))
      .whereNull('revoked_at')
      .update({ revoked_at: this.#knex.fn.now() });
  }
}
