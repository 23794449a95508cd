/**
 * Builders of JSON Schemas that keep their literal types, and `FromSchema`, the TypeScript type
 * of the values a schema accepts. The gateway's body, query, params and reply types are read off
 * the very schemas ajv validates with and /openapi.json documents (TypeBox-style, no dependency).
 */

/** A JSON Schema (draft 2020-12 subset understood by ajv and OpenAPI 3.1). */
export type JsonSchema = {
  readonly [key: string]: unknown;
  readonly type?: string | readonly string[];
  readonly properties?: { readonly [name: string]: JsonSchema };
};

type Simplify<T> = { [K in keyof T]: T[K] } & {};

type RequiredKeys<S> = S extends { required: readonly (infer K)[] } ? K : never;

type ObjectOf<S> = S extends { properties: infer P }
  ? Simplify<
      { -readonly [K in keyof P as K extends RequiredKeys<S> ? K : never]: FromSchema<P[K]> } & {
        -readonly [K in keyof P as K extends RequiredKeys<S> ? never : K]?: FromSchema<P[K]>;
      }
    >
  : S extends { additionalProperties: infer A extends JsonSchema }
    ? Record<string, FromSchema<A>>
    : Record<string, unknown>;

/** One member of `type` (distributes over a union such as `'string' | 'null'`). */
type OfType<S, T> = T extends 'string'
  ? string
  : T extends 'integer' | 'number'
    ? number
    : T extends 'boolean'
      ? boolean
      : T extends 'null'
        ? null
        : T extends 'array'
          ? S extends { items: infer I }
            ? FromSchema<I>[]
            : unknown[]
          : T extends 'object'
            ? ObjectOf<S>
            : never;

/** The type of the values `S` accepts (the keywords the gateway's schemas use). */
export type FromSchema<S> = S extends { const: infer C }
  ? C
  : S extends { enum: readonly (infer E)[] }
    ? E
    : S extends { type: infer T }
      ? T extends readonly (infer U)[]
        ? OfType<S, U>
        : OfType<S, T>
      : unknown;

// The builders below return their argument's literal type, so `FromSchema` can read it.

/** A string schema. */
export const str = <const X extends JsonSchema = {}>(extra?: X) => ({ type: 'string', ...extra }) as { type: 'string' } & X;

/** An integer schema. */
export const int = <const X extends JsonSchema = {}>(extra?: X) => ({ type: 'integer', ...extra }) as { type: 'integer' } & X;

/** A boolean schema. */
export const bool = <const X extends JsonSchema = {}>(extra?: X) => ({ type: 'boolean', ...extra }) as { type: 'boolean' } & X;

/** `s` or null: a field that is always present and may be null. */
export const nullable = <const S extends { readonly type: string }>(s: S) =>
  ({ ...s, type: [s.type, 'null'] }) as Omit<S, 'type'> & { type: readonly [S['type'], 'null'] };

/** An array of `items`. */
export const list = <const I extends JsonSchema, const X extends JsonSchema = {}>(items: I, extra?: X) =>
  ({ type: 'array', items, ...extra }) as { type: 'array'; items: I } & X;

/** A closed object (no other properties) whose `required` names are checked against its properties. */
export function obj<const P extends Record<string, JsonSchema>, const R extends readonly (keyof P & string)[] = [], const X extends JsonSchema = {}>(
  properties: P,
  required?: R,
  extra?: X,
) {
  return { type: 'object', properties, required: required ?? [], additionalProperties: false, ...extra } as {
    type: 'object';
    properties: P;
    required: R;
    additionalProperties: false;
  } & X;
}

/** A reply object: closed, and every field is required (a field that may be empty is `nullable`, not optional). */
export function reply<const P extends Record<string, JsonSchema>>(properties: P) {
  return obj(properties, Object.keys(properties) as (keyof P & string)[]);
}
