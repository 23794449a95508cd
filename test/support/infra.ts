/**
 * Test infrastructure: the Postgres and NATS that run on 127.0.0.1 when they are reachable,
 * PGlite and a child nats-server when not.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import { canConnect, startNats, stopChild } from '../../scripts/stack.js';

export const POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';

/** The local Postgres URL, or undefined when none runs. */
export async function postgresUrl(): Promise<string | undefined> {
  return (await canConnect('127.0.0.1', 5432)) ? POSTGRES_URL : undefined;
}

/** The database drivers to run database tests on: PGlite always, pg when Postgres is reachable. */
export async function drivers(): Promise<{ name: 'pglite' | 'pg'; databaseUrl: string | undefined }[]> {
  const pg = await postgresUrl();
  return [{ name: 'pglite', databaseUrl: undefined }, ...(pg ? [{ name: 'pg' as const, databaseUrl: pg }] : [])];
}

/** A NATS URL: the local server, else a child nats-server (stopped by `stop`), which requires `token`. */
export async function natsForTests(): Promise<{ url: string; token?: string; stop(): Promise<void> }> {
  if (await canConnect('127.0.0.1', 4222)) return { url: 'nats://127.0.0.1:4222', stop: async () => {} };
  const dir = tempDir('nats');
  const n = await startNats(dir, () => {});
  return {
    url: n.url,
    token: n.token,
    stop: async () => {
      await stopChild(n.child, 5000);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A fresh temporary directory. */
export function tempDir(name: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `ats-${name}-`));
}

/** A unique Postgres schema name for one test. */
export function testSchema(): string {
  return `t_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
}

/** A new, empty Postgres database: its URL, a connection to it, and `drop` (which ends the connection and removes it). */
export interface FreshDatabase {
  url: string;
  knex: Knex;
  drop(): Promise<void>;
}

/** Creates an empty database `<prefix>_<time>_<pid>` next to `pg`'s (replicas that start together on nothing). */
export async function freshDatabase(pg: string, prefix: string): Promise<FreshDatabase> {
  const name = `${prefix}_${Date.now().toString(36)}_${process.pid}`;
  const admin = knexFactory({ client: 'pg', connection: pg, pool: { min: 0, max: 1 } });
  await admin.raw(`create database "${name}"`);
  const url = new URL(pg);
  url.pathname = `/${name}`;
  const knex = knexFactory({ client: 'pg', connection: url.toString(), pool: { min: 0, max: 2 } });
  return {
    url: url.toString(),
    knex,
    async drop() {
      await knex.destroy();
      await admin.raw(`drop database if exists "${name}" with (force)`);
      await admin.destroy();
    },
  };
}
