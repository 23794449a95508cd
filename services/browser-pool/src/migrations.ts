/** The browser-pool tables: browsers, what they downloaded, browser profiles, and the pool instances that own browsers. */
import { outboxMigration } from '../../common/src/outbox.js';
import type { Migration } from '../../common/src/db.js';

/** Migrations of the browser-pool schema, oldest first. */
export const migrations: Migration[] = [
  {
    name: '20261122020000_browsers_profiles',
    async up(knex) {
      await knex.schema.createTable('browsers', (t) => {
        t.string('id').primary();
        t.string('project_id').notNullable();
        t.string('status', 16).notNullable();
        t.string('profile_id');
        t.string('session_id');
        t.string('run_id');
        t.string('agent', 32);
        t.integer('screen_width').notNullable();
        t.integer('screen_height').notNullable();
        t.string('proxy_country_code', 2);
        t.text('live_view_url');
        // Which pool process runs it (a restart stops its own leftovers only) and its process group.
        t.string('instance_id').notNullable();
        t.integer('pid');
        t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp('timeout_at', { useTz: true }).notNullable();
        t.timestamp('stopped_at', { useTz: true });
        t.string('stop_reason', 32);
        t.index(['project_id', 'status']);
        t.index(['project_id', 'created_at']);
        t.index(['instance_id', 'status']);
        t.index(['session_id']);
      });
      await knex.schema.createTable('browser_downloads', (t) => {
        t.string('browser_id').notNullable();
        t.string('name', 1024).notNullable();
        t.bigInteger('size_bytes').notNullable();
        t.timestamp('last_modified', { useTz: true }).notNullable();
        t.string('object_key', 512).notNullable();
        t.primary(['browser_id', 'name']);
      });
      await knex.schema.createTable('profiles', (t) => {
        t.string('id').primary();
        t.string('project_id').notNullable();
        t.string('name').notNullable();
        t.string('user_id');
        // The saved state as one JSON text: a save is one UPDATE, never half applied.
        t.text('state').notNullable().defaultTo('{"cookies":[],"origins":[]}');
        t.text('cookie_domains').notNullable().defaultTo('[]');
        t.timestamp('last_used_at', { useTz: true });
        t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.index(['project_id', 'created_at']);
      });
    },
  },
  {
    // When a run last gave its browser back (a session's kept browser is reclaimed oldest-idle first).
    name: '20261125010000_browsers_idle_since',
    async up(knex) {
      await knex.schema.alterTable('browsers', (t) => {
        t.timestamp('idle_since', { useTz: true });
      });
    },
  },
  {
    // The recorder's look every few seconds (active, or stopped lately, by id) without a scan of every browser ever made.
    name: '20261125040000_browsers_recordable',
    async up(knex) {
      await knex.schema.alterTable('browsers', (t) => {
        t.index(['status', 'id']);
        t.index(['stopped_at']);
      });
    },
  },
  {
    // The pool processes (one row per live instance): how peers reach each one, and its heartbeat,
    // so a call for a browser is forwarded to its owner and a dead owner's browsers are reaped.
    name: '20261201010000_instances',
    async up(knex) {
      await knex.schema.createTable('instances', (t) => {
        t.string('id').primary();
        t.string('grpc_addr', 300).notNullable();
        t.string('cdp_url', 300).notNullable();
        t.boolean('draining').notNullable().defaultTo(false);
        t.timestamp('started_at', { useTz: true }).notNullable();
        t.timestamp('heartbeat_at', { useTz: true }).notNullable();
        t.index(['heartbeat_at']);
      });
    },
  },
  // Webhook events, written in the transaction of the browser row's change (see BrowserChangeHook).
  outboxMigration('20261202000000_webhook_outbox'),
  {
    // What a browser presents to pages (issue 24): its fingerprint switch, locale and timezone; and where it may go.
    name: '20261206010000_browsers_identity',
    async up(knex) {
      await knex.schema.alterTable('browsers', (t) => {
        t.boolean('stealth').notNullable().defaultTo(false);
        t.string('locale', 35);
        t.string('timezone', 64);
        // JSON list of host patterns its network may reach; null: any.
        t.text('allowed_domains');
      });
    },
  },
  {
    // Ads and trackers blocked (issue 24): at its egress proxy and hidden in its pages.
    name: '20261206020000_browsers_block_ads',
    async up(knex) {
      await knex.schema.alterTable('browsers', (t) => {
        t.boolean('block_ads').notNullable().defaultTo(false);
      });
    },
  },
  {
    // A stop saves its profile after it answered: which pool instance is saving it, since when (a create or read on another replica waits).
    name: '20261207010000_profiles_saving',
    async up(knex) {
      await knex.schema.alterTable('profiles', (t) => {
        t.string('saving_by');
        t.timestamp('saving_since', { useTz: true });
      });
    },
  },
];
