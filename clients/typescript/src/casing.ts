/** The API's requests are snake_case, the SDK's options camelCase: one mapping, typed and at run time. */

/** `proxy_country_code` → `proxyCountryCode`. */
export type Camel<S extends string> = S extends `${infer Head}_${infer Tail}` ? `${Head}${Capitalize<Camel<Tail>>}` : S;

/** An object type with its keys in camelCase, nested objects too (arrays and scalars as they are). */
export type CamelKeys<T> = {
  [K in keyof T as K extends string ? Camel<K> : never]: NonNullable<T[K]> extends readonly unknown[]
    ? T[K]
    : NonNullable<T[K]> extends Record<string, unknown>
      ? CamelKeys<NonNullable<T[K]>> | Extract<T[K], undefined>
      : T[K];
};

/** `proxyCountryCode` → `proxy_country_code`. */
export function snakeCase(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** A plain object's keys turned to snake_case, nested plain objects too; undefined values left out. */
export function toSnake(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(toSnake);
  if (value === null || typeof value !== 'object' || Object.getPrototypeOf(value) !== Object.prototype) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) if (v !== undefined) out[snakeCase(k)] = toSnake(v);
  return out;
}
