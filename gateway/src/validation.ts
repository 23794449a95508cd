/**
 * One shared ajv instance; validators are compiled once per schema and cached. Errors are
 * rendered as FastAPI/pydantic-style `{type, loc, msg, input}` items.
 */
import { Ajv2020 as Ajv, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { JsonSchema } from './json-schema.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/** The shared instance. Request bodies are never coerced; query strings are parsed first. */
export const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true, verbose: true, coerceTypes: false, useDefaults: false });
addFormats(ajv);
ajv.addKeyword({ keyword: 'x-error', schemaType: 'string' });

const cache = new WeakMap<object, ValidateFunction>();

/** The cached validator of a schema object. */
export function validator(schema: JsonSchema): ValidateFunction {
  let v = cache.get(schema);
  if (!v) {
    v = ajv.compile(schema);
    cache.set(schema, v);
  }
  return v;
}

/** One FastAPI-style validation error item. */
export interface ValidationIssue {
  type: string;
  loc: (string | number)[];
  msg: string;
  input: unknown;
  ctx?: Record<string, unknown>;
}

/** A request that failed validation: 422 with `{"detail": issues}`. */
export class RequestValidationError extends Error {
  readonly issues: ValidationIssue[];
  constructor(issues: ValidationIssue[]) {
    super('Request validation failed');
    this.name = this.constructor.name;
    this.issues = issues;
  }
}

function pointer(instancePath: string): (string | number)[] {
  if (!instancePath) return [];
  return instancePath
    .slice(1)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((p) => (/^\d+$/.test(p) ? Number(p) : p));
}

function valueAt(root: unknown, path: (string | number)[]): unknown {
  let v: any = root;
  for (const p of path) v = v == null ? undefined : v[p];
  return v;
}

const TYPE_ERRORS: Record<string, [string, string]> = {
  string: ['string_type', 'Input should be a valid string'],
  integer: ['int_type', 'Input should be a valid integer'],
  number: ['float_type', 'Input should be a valid number'],
  boolean: ['bool_type', 'Input should be a valid boolean'],
  array: ['list_type', 'Input should be a valid list'],
  object: ['model_attributes_type', 'Input should be a valid dictionary or object to extract fields from'],
  null: ['none_required', 'Input should be None'],
};

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function quoteList(values: unknown[]): string {
  const q = values.map((v) => `'${String(v)}'`);
  return q.length <= 1 ? q.join('') : `${q.slice(0, -1).join(', ')} or ${q[q.length - 1]}`;
}

/** Converts one ajv error into a FastAPI item, or undefined for an error already covered. */
function toIssue(e: ErrorObject, where: string, data: unknown): ValidationIssue | undefined {
  const at = pointer(e.instancePath);
  const loc = [where, ...at];
  const input = valueAt(data, at);
  const p = e.params as Record<string, any>;
  const custom = (e.parentSchema as Record<string, unknown> | undefined)?.['x-error'];
  switch (e.keyword) {
    case 'additionalProperties':
      return { type: 'extra_forbidden', loc: [...loc, p.additionalProperty], msg: 'Extra inputs are not permitted', input: (input as any)?.[p.additionalProperty] };
    case 'required':
      return { type: 'missing', loc: [...loc, p.missingProperty], msg: 'Field required', input };
    case 'dependentRequired':
      return { type: 'value_error', loc, msg: `Value error, ${p.property} and ${p.missingProperty} must be given together`, input };
    case 'type': {
      const t = String(Array.isArray(p.type) ? p.type[0] : p.type);
      const [type, msg] = TYPE_ERRORS[t] ?? ['type_error', `Input should be of type ${t}`];
      return { type, loc, msg, input };
    }
    case 'minLength':
      return { type: 'string_too_short', loc, msg: `String should have at least ${plural(p.limit, 'character')}`, input, ctx: { min_length: p.limit } };
    case 'maxLength':
      return { type: 'string_too_long', loc, msg: `String should have at most ${plural(p.limit, 'character')}`, input, ctx: { max_length: p.limit } };
    case 'minimum':
      return { type: 'greater_than_equal', loc, msg: `Input should be greater than or equal to ${p.limit}`, input, ctx: { ge: p.limit } };
    case 'maximum':
      return { type: 'less_than_equal', loc, msg: `Input should be less than or equal to ${p.limit}`, input, ctx: { le: p.limit } };
    case 'exclusiveMinimum':
      return { type: 'greater_than', loc, msg: `Input should be greater than ${p.limit}`, input, ctx: { gt: p.limit } };
    case 'exclusiveMaximum':
      return { type: 'less_than', loc, msg: `Input should be less than ${p.limit}`, input, ctx: { lt: p.limit } };
    case 'minItems':
      return { type: 'too_short', loc, msg: `List should have at least ${plural(p.limit, 'item')} after validation, not ${(input as unknown[]).length}`, input, ctx: { min_length: p.limit } };
    case 'maxItems':
      return { type: 'too_long', loc, msg: `List should have at most ${plural(p.limit, 'item')} after validation, not ${(input as unknown[]).length}`, input, ctx: { max_length: p.limit } };
    case 'enum':
      return { type: 'enum', loc, msg: `Input should be ${quoteList(p.allowedValues)}`, input, ctx: { expected: quoteList(p.allowedValues) } };
    case 'const':
      return { type: 'literal_error', loc, msg: `Input should be ${quoteList([p.allowedValue])}`, input };
    case 'pattern':
      return custom
        ? { type: 'value_error', loc, msg: `Value error, ${custom}`, input }
        : { type: 'string_pattern_mismatch', loc, msg: `String should match pattern '${p.pattern}'`, input, ctx: { pattern: p.pattern } };
    case 'not':
      return { type: 'value_error', loc, msg: `Value error, ${custom ?? 'value is not allowed'}`, input };
    case 'format':
      return { type: 'value_error', loc, msg: `Value error, invalid ${p.format}`, input };
    default:
      return { type: 'value_error', loc, msg: `Value error, ${e.message ?? 'invalid value'}`, input };
  }
}

/** Whether a string holds a NUL character, which no stored text can (Postgres refuses 0x00). */
export function hasNul(s: string): boolean {
  return s.includes('\u0000');
}

/** Deeper than any request the API takes: refused before validation, so nothing recurses that far. */
export const MAX_DEPTH = 32;

/** Every string with a NUL, at any depth, as FastAPI items; undefined when nested deeper than MAX_DEPTH. Without recursion. */
function nulIssues(data: unknown, where: string): ValidationIssue[] | undefined {
  const out: ValidationIssue[] = [];
  const todo: [unknown, (string | number)[]][] = [[data, [where]]];
  while (todo.length) {
    const [v, loc] = todo.pop()!;
    if (typeof v === 'string') {
      if (hasNul(v)) out.push({ type: 'string_pattern_mismatch', loc, msg: 'String should not contain NUL characters', input: v });
    } else if (v && typeof v === 'object') {
      if (loc.length > MAX_DEPTH) return undefined;
      for (const [k, child] of Object.entries(v)) todo.push([child, [...loc, Array.isArray(v) ? Number(k) : k]]);
    }
  }
  return out.reverse();
}

/**
 * Validates `data` against `schema`; throws RequestValidationError with every issue found. No
 * string anywhere may hold a NUL character, whatever its schema says, and nothing nests deeper than MAX_DEPTH.
 */
export function validate<T>(schema: JsonSchema, data: unknown, where: 'body' | 'query' | 'path'): T {
  const nul = nulIssues(data, where);
  // Not echoed back: the value would be as deep to render as it was to parse.
  if (!nul) throw new RequestValidationError([{ type: 'value_error', loc: [where], msg: `Value error, nested deeper than ${MAX_DEPTH} levels`, input: null }]);
  const v = validator(schema);
  if (v(data) && !nul.length) return data as T;
  const issues: ValidationIssue[] = [];
  const seen = new Set<string>();
  for (const e of v.errors ?? []) {
    const issue = toIssue(e, where, data);
    if (!issue) continue;
    const k = `${issue.type}:${JSON.stringify(issue.loc)}`;
    if (seen.has(k)) continue;
    seen.add(k);
    issues.push(issue);
  }
  // A NUL where the schema already refused the value (a file name, say) is told once, by the schema.
  const refused = new Set(issues.map((i) => JSON.stringify(i.loc)));
  issues.push(...nul.filter((i) => !refused.has(JSON.stringify(i.loc))));
  throw new RequestValidationError(issues);
}

/** Turns query strings into the types the schema declares, so `?limit=5` validates as an integer. */
export function coerceQuery(schema: JsonSchema, query: Record<string, unknown>): Record<string, unknown> {
  const props = (schema.properties ?? {}) as Record<string, JsonSchema>;
  const out: Record<string, unknown> = {};
  for (const [k, raw] of Object.entries(query)) {
    if (!(k in props)) continue; // unknown query parameters are ignored, as FastAPI does
    const v = Array.isArray(raw) ? raw[raw.length - 1] : raw;
    const t = props[k]!.type;
    if (t === 'integer' && typeof v === 'string' && /^-?\d+$/.test(v)) out[k] = Number(v);
    else if (t === 'boolean' && (v === 'true' || v === 'false')) out[k] = v === 'true';
    else out[k] = v;
  }
  return out;
}

/** The FastAPI item for a body that is not valid JSON. */
export function jsonInvalid(err: Error): ValidationIssue {
  const m = /position (\d+)/.exec(err.message);
  return { type: 'json_invalid', loc: ['body', m ? Number(m[1]) : 0], msg: 'JSON decode error', input: {}, ctx: { error: err.message.replace(/^.*?:\s*/, '').slice(0, 200) } };
}
