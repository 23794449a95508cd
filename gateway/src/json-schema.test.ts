import assert from 'node:assert/strict';
import { test } from 'node:test';
import { list, nullable, obj, reply, str, int, type FromSchema } from './json-schema.js';
import type { PathParams } from './routes/route.js';
import * as s from './schemas.js';
import { validator } from './validation.js';

// Compile-time checks: `tsc --noEmit` fails when an inferred type drifts from what is asserted.
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const expectType = <T extends true>(_: T) => undefined;

expectType<Equal<FromSchema<typeof s.createLiveViewLinkBody>, { mode: 'view' | 'interactive'; expires_in_seconds?: number }>>(true);
expectType<Equal<FromSchema<typeof s.pageQuery>, { limit?: number; cursor?: string }>>(true);
expectType<Equal<FromSchema<typeof s.listRunsQuery>['status'], 'queued' | 'running' | 'completed' | 'stopped' | 'failed' | undefined>>(true);
expectType<Equal<FromSchema<typeof s.addFilesBody>, { files: { name: string }[] }>>(true);
expectType<Equal<FromSchema<typeof s.createRunBody>['browser'], { proxy_country_code?: string; screen_width?: number; screen_height?: number; profile_id?: string; stealth?: boolean; locale?: string; timezone?: string; allowed_domains?: string[]; block_ads?: boolean } | undefined>>(true);
expectType<Equal<FromSchema<typeof s.workspaceList>, { items: { id: string; name: string; createdAt: string; updatedAt: string }[]; nextCursor: string | null; hasMore: boolean }>>(true);
expectType<Equal<s.RunReply['output'], null>>(true);
expectType<Equal<s.EventReply['data'], Record<string, unknown>>>(true);
expectType<Equal<s.HealthReply['services'], Record<string, string>>>(true);
expectType<Equal<PathParams<'/agents/:agent/runs/:runId/files'>, { agent: s.AgentName } & { runId: string }>>(true);
expectType<Equal<PathParams<'/agents'>, {}>>(true);
// @ts-expect-error a required name that is not a property is refused
obj({ a: str() }, ['b']);

test('when a schema is built, then it is the JSON Schema ajv validates with, and its type matches what it accepts', () => {
  const schema = obj({ name: str({ minLength: 1 }), size: nullable(int()), tags: list(str()) }, ['name', 'size']);
  const ok: FromSchema<typeof schema> = { name: 'a', size: null };
  assert.deepEqual(schema as unknown, {
    type: 'object',
    properties: { name: { type: 'string', minLength: 1 }, size: { type: ['integer', 'null'] }, tags: { type: 'array', items: { type: 'string' } } },
    required: ['name', 'size'],
    additionalProperties: false,
  });
  assert.equal(validator(schema)(ok), true);
  assert.equal(validator(schema)({ name: 'a' }), false, 'a nullable field is still required');
});

test('when a reply schema is built, then every field is required', () => {
  assert.deepEqual(reply({ a: str(), b: nullable(str()) }).required, ['a', 'b']);
});
