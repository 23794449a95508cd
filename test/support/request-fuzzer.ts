/**
 * A seeded request generator driven by an OpenAPI 3.1 document: for each operation, requests that
 * are valid by its schemas and requests mutated in the ways clients get input wrong (NUL bytes,
 * overlong strings, wrong types, huge numbers, bad percent-encoding, odd unicode, missing and extra
 * fields, wrong content types, malformed JSON). Deterministic for a seed; no dependencies.
 */
import { dereference } from '../../gateway/src/openapi.js';

type Schema = { [k: string]: unknown; type?: string | string[]; properties?: Record<string, Schema>; items?: Schema };

export interface Operation {
  method: string;
  /** OpenAPI path template, e.g. `/api/v1/agents/{agent}/runs/{runId}`. */
  path: string;
  operationId: string;
  pathParams: string[];
  query: Record<string, Schema>;
  body?: Schema;
}

export interface FuzzRequest {
  operationId: string;
  method: string;
  /** The raw request target (already percent-encoded where it should be; bad escapes on purpose). */
  target: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** The body as generated, before serialisation (undefined for raw and absent bodies). */
  json?: unknown;
  /** Whether the body, if any, is JSON the schema accepts (used to bound routes that start work). */
  validBody: boolean;
}

/** Known-good values the generator uses for ids and cursors (from the set-up of the test). */
export interface Seeds {
  pathIds: Record<string, string[]>;
  bodyIds: Record<string, string[]>;
  cursors: string[];
}

/** mulberry32: a small, fast, seeded PRNG. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The operations of an OpenAPI document (those with the API key, i.e. under /api/v1). */
export function operationsOf(document: { paths: Record<string, Record<string, any>> }): Operation[] {
  const doc = dereference(document);
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    if (!path.startsWith('/api/v1/')) continue;
    for (const [method, op] of Object.entries(item)) {
      const params = (op.parameters ?? []) as { name: string; in: string; schema: Schema }[];
      ops.push({
        method: method.toUpperCase(),
        path,
        operationId: op.operationId,
        pathParams: params.filter((p) => p.in === 'path').map((p) => p.name),
        query: Object.fromEntries(params.filter((p) => p.in === 'query').map((p) => [p.name, p.schema])),
        body: op.requestBody?.content?.['application/json']?.schema,
      });
    }
  }
  return ops;
}

const NUL_STRINGS = ['\u0000', 'a\u0000b', 'task\u0000'];
const ODD_UNICODE = ['\ud800', 'a\udfffb', '\u202eevil', '👩‍👩‍👧‍👦', '\ufeff', 'e\u0301', '\uffff', '\u{10ffff}', 'Ω'.repeat(300), '\u2028\u2029', '\u001b[31m', ' ', '\t\n\r'];
const WRONG_TYPES: unknown[] = [1, -1, 1.5, true, false, null, [], {}, '1', ['a'], { a: 1 }];
const HUGE_NUMBERS: unknown[] = [1e308, -1e308, 2 ** 53 + 2, 2 ** 31, 2 ** 31 - 1, 2 ** 63, -(2 ** 31) - 1, 0, -0, 1e-7, 3840.5];
const BAD_PATH_SEGMENTS = ['%00', 'a%00b', '%E0%A4%A', '%', '%zz', '%C0%AF', '%ED%A0%80', '%FF', '%E0%A4', '..', '%2e%2e', '%2F', 'a%2Fb', '%20', '%C3%BC', '%F0%9F%98%80', 'x'.repeat(5000), '0', '-1', '99999999999999999999', 'null', 'run_', 'brw_%00'];
const BAD_QUERY_VALUES = ['', '%00', 'a%00', '99999999999999999999', '1e400', '-1', '1.5', '0x10', '+1', '%201', 'abc', '%E0%A4%A', '%', 'x'.repeat(10000), '%F0%9F%98%80', '2147483648', '9007199254740993', 'true', '%ED%A0%80'];
const CONTENT_TYPES = ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=utf-16', 'application/json; charset=latin1', 'application/json; charset=bogus', 'APPLICATION/JSON', ';;;', 'application/json; charset=', 'application/vnd.api+json', 'application/jsonx'];
const RAW_BODIES: (string | Buffer)[] = [
  '',
  '{',
  '{"task":',
  '[]',
  'null',
  '"x"',
  '123',
  'true',
  '{"task":"a",}',
  "{'task':'a'}",
  '{"task":"a"}{"task":"b"}',
  '{"task":"\\ud800"}',
  '{"task":"\\u0000"}',
  '{"task":1e400}',
  '{"limit":1e400,"screen_width":1e400,"timeout_minutes":-1e400}',
  '{"__proto__":{"admin":true}}',
  '{"constructor":{"prototype":{"x":1}}}',
  Buffer.from([0xff, 0xfe, 0x7b, 0x7d]),
  Buffer.from('{"task":"\xff\xfe"}', 'latin1'),
  Buffer.from([0xef, 0xbb, 0xbf, 0x7b, 0x7d]),
  '['.repeat(20000) + ']'.repeat(20000),
  '{"a":'.repeat(5000) + '1' + '}'.repeat(5000),
  `{"task":${'['.repeat(5000)}${']'.repeat(5000)}}`,
];

/** Percent-encodes a path segment the way a client would (the gateway then decodes it). */
const enc = (s: string) => {
  try {
    return encodeURIComponent(s);
  } catch {
    return s.replace(/[^A-Za-z0-9]/g, '_'); // a lone surrogate cannot be encoded
  }
};

export class RequestFuzzer {
  readonly #r: () => number;
  readonly #seeds: Seeds;
  readonly #key: string;

  constructor(seed: number, seeds: Seeds, key: string) {
    this.#r = prng(seed);
    this.#seeds = seeds;
    this.#key = key;
  }

  #int(lo: number, hi: number): number {
    return lo + Math.floor(this.#r() * (hi - lo + 1));
  }
  #pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.#r() * xs.length)]!;
  }
  #chance(p: number): boolean {
    return this.#r() < p;
  }

  /** A value the schema accepts (ids taken from the seeds where the field names one). */
  valid(schema: Schema, field = ''): unknown {
    const ids = this.#seeds.bodyIds[field];
    if (ids?.length && schema.type === 'string' && this.#chance(0.7)) return this.#pick(ids);
    if (Array.isArray(schema.enum)) return this.#pick(schema.enum);
    const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
    switch (type) {
      case 'string': {
        if (schema.pattern === '^[a-z]{2}$') return this.#pick(['de', 'us', 'fr', 'jp']);
        const min = Number(schema.minLength ?? 0);
        const max = Math.min(Number(schema.maxLength ?? 40), 40);
        const n = this.#int(Math.max(min, 1), Math.max(min, max));
        let s = '';
        for (let i = 0; i < n; i++) s += 'abcdefghijklmnopqrstuvwxyz0123456789 _-'[this.#int(0, 38)];
        return schema.pattern ? s.replace(/[^a-z0-9_-]/g, '_') : s.trim() || 'x';
      }
      case 'integer': {
        const lo = Number(schema.minimum ?? 0);
        const hi = Number(schema.maximum ?? lo + 1000);
        return this.#int(lo, Math.min(hi, lo + 5000));
      }
      case 'number':
        return this.#r() * 100;
      case 'boolean':
        return this.#chance(0.5);
      case 'array': {
        const min = Number(schema.minItems ?? 0);
        const max = Math.min(Number(schema.maxItems ?? 3), 3);
        return Array.from({ length: this.#int(Math.max(min, 0), Math.max(min, max)) }, () => this.valid(schema.items ?? {}, field));
      }
      case 'object': {
        const out: Record<string, unknown> = {};
        const required = new Set((schema.required as string[] | undefined) ?? []);
        for (const [k, sub] of Object.entries(schema.properties ?? {})) if (required.has(k) || this.#chance(0.5)) out[k] = this.valid(sub, k);
        for (const [k, deps] of Object.entries((schema.dependentRequired as Record<string, string[]> | undefined) ?? {})) {
          if (k in out) for (const d of deps) if (!(d in out)) out[d] = this.valid(schema.properties![d]!, d);
        }
        return out;
      }
      default:
        return null;
    }
  }

  /** A bad value for a field: NUL, overlong, wrong type, huge number or odd unicode. */
  #badValue(): unknown {
    switch (this.#int(0, 4)) {
      case 0:
        return this.#pick(NUL_STRINGS);
      case 1:
        return 'x'.repeat(this.#pick([101, 256, 201, 501, 50001, 200000]));
      case 2:
        return this.#pick(WRONG_TYPES);
      case 3:
        return this.#pick(HUGE_NUMBERS);
      default:
        return this.#pick(ODD_UNICODE);
    }
  }

  /** Mutates one place of a generated body: a bad value, a field removed, an extra field. */
  #mutate(value: unknown, depth = 0): unknown {
    if (value === null || typeof value !== 'object' || (depth > 0 && this.#chance(0.3))) return this.#badValue();
    if (Array.isArray(value)) {
      if (!value.length || this.#chance(0.3)) return [...value, this.#badValue()];
      const i = this.#int(0, value.length - 1);
      return value.map((v, j) => (j === i ? this.#mutate(v, depth + 1) : v));
    }
    const o = { ...(value as Record<string, unknown>) };
    const keys = Object.keys(o);
    const roll = this.#r();
    if (!keys.length || roll < 0.15) o[this.#pick(['zz_extra', 'browser_profile_id', 'structured_output', 'browser_id', '__proto__', 'a\u0000b', ''])] = this.#badValue();
    else if (roll < 0.3) delete o[this.#pick(keys)];
    else {
      const k = this.#pick(keys);
      o[k] = this.#mutate(o[k], depth + 1);
    }
    return o;
  }

  #pathFor(op: Operation, mutate: boolean): string {
    const bad = mutate ? this.#pick(op.pathParams.length ? op.pathParams : ['']) : undefined;
    return op.path.replace(/\{(\w+)\}/g, (_m, name: string) => {
      const known = this.#seeds.pathIds[name] ?? [];
      if (name === bad) return this.#chance(0.8) ? this.#pick(BAD_PATH_SEGMENTS) : enc(this.#pick(ODD_UNICODE.concat(NUL_STRINGS)));
      return enc(known.length ? this.#pick(known) : 'unknown');
    });
  }

  #queryFor(op: Operation, mutate: boolean): string {
    const names = Object.keys(op.query);
    const parts: string[] = [];
    for (const name of names) {
      if (!this.#chance(mutate ? 0.7 : 0.5)) continue;
      const schema = op.query[name]!;
      let v: string;
      if (mutate && this.#chance(0.6)) v = this.#pick(BAD_QUERY_VALUES);
      else if (name === 'cursor' && this.#seeds.cursors.length) v = enc(this.#pick(this.#seeds.cursors));
      else v = enc(String(this.valid(schema, name)));
      const shape = mutate ? this.#int(0, 5) : 0;
      if (shape === 1) parts.push(`${name}=${v}`, `${name}=${v}`);
      else if (shape === 2) parts.push(`${name}[]=${v}`);
      else if (shape === 3) parts.push(`${name}[a]=${v}`);
      else parts.push(`${name}=${v}`);
    }
    if (mutate && (!names.length || this.#chance(0.2))) parts.push(`${this.#pick(['zz', 'a%00', '%E0%A4%A', 'limit', 'after'])}=${this.#pick(BAD_QUERY_VALUES)}`);
    return parts.length ? `?${parts.join('&')}` : '';
  }

  /** The i-th request of an operation: a third valid-ish, the rest mutated in one or more ways. */
  next(op: Operation): FuzzRequest {
    const headers: Record<string, string> = { 'x-service-api-key': this.#key };
    const mutate = this.#chance(0.7);
    const where = mutate ? this.#pick(['path', 'query', 'body', 'body', 'headers'] as const) : undefined;
    const target = this.#pathFor(op, where === 'path') + this.#queryFor(op, where === 'query' || (mutate && this.#chance(0.2)));
    if (this.#chance(0.05)) headers['x-request-id'] = this.#pick(['%00', 'a'.repeat(500), 'ü', 'id with spaces']).replace(/[^\x20-\x7e]/g, '?');
    if (op.operationId === 'streamEvents' && this.#chance(0.4)) headers['last-event-id'] = this.#pick(['-1', '1e400', '99999999999999999999', 'abc', '', '3.5', '2147483648']);
    let body: Buffer | undefined;
    let json: unknown;
    let validBody = false;
    if (op.body || (mutate && this.#chance(0.1))) {
      headers['content-type'] = 'application/json';
      if (where === 'headers') {
        const h = this.#int(0, 2);
        if (h === 0) headers['content-type'] = this.#pick(CONTENT_TYPES);
        else if (h === 1) delete headers['content-type'];
        else headers['content-encoding'] = this.#pick(['gzip', 'deflate', 'br', 'x-unknown', 'identity, gzip']);
      }
      if (where === 'body' && this.#chance(0.3)) {
        const raw = this.#pick(RAW_BODIES);
        body = Buffer.isBuffer(raw) ? raw : Buffer.from(raw);
      } else {
        json = op.body ? this.valid(op.body) : {};
        if (where === 'body') json = this.#mutate(json);
        else validBody = op.body !== undefined && where !== 'headers';
        body = Buffer.from(JSON.stringify(json));
      }
    }
    return { operationId: op.operationId, method: where === 'headers' && this.#chance(0.1) ? 'PUT' : op.method, target, headers, body, json, validBody };
  }
}
