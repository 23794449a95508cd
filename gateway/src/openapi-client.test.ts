/**
 * What a client generated from /openapi.json sees: openapi-typescript turns the document into
 * types, and TypeScript checks them. Every field of every success reply must come out present
 * (nullable where it may be empty), so a generated client needs no `?.` or `!` for fields that
 * are always there.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { allRoutes } from './app.js';
import { buildOpenApi } from './openapi.js';

/** Names each operation whose success reply has an optional field anywhere in it; `never` when none has. */
const CHECK = `
import type { operations } from './api';
type SuccessOf<R> = R[Extract<keyof R, 200 | 201 | 202>] extends { content: { 'application/json': infer B } } ? B : never;
type OptionalKeys<T> = { [K in keyof T]-?: string extends K ? never : {} extends Pick<T, K> ? K : never }[keyof T];
type AllPresent<T> = T extends readonly (infer E)[]
  ? AllPresent<E>
  : T extends object
    ? [OptionalKeys<T>] extends [never]
      ? [{ [K in keyof T]-?: AllPresent<T[K]> }[keyof T]] extends [true] ? true : false
      : false
    : true;
type Optional = { [O in keyof operations]: [AllPresent<SuccessOf<operations[O]['responses']>>] extends [true] ? never : O }[keyof operations];
export const optional: 'none' = null as unknown as [Optional] extends [never] ? 'none' : Optional;
`;

/** Generates the client types from `doc` and type-checks CHECK against them; returns the diagnostics. */
async function typeCheck(doc: Record<string, unknown>): Promise<string[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ats-openapi-client-'));
  try {
    fs.writeFileSync(path.join(dir, 'api.ts'), astToString(await openapiTS(doc as never)));
    fs.writeFileSync(path.join(dir, 'check.ts'), CHECK);
    const program = ts.createProgram([path.join(dir, 'check.ts')], { strict: true, noEmit: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler, skipLibCheck: true });
    return ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('when a client is generated from /openapi.json, then every field of every success reply is present in its types', async () => {
  assert.deepEqual(await typeCheck(buildOpenApi(allRoutes(), '0')), []);
});

test('when a reply schema leaves a field out of `required`, then the check names the operation', async () => {
  const doc = structuredClone(buildOpenApi(allRoutes(), '0')) as { components: { schemas: Record<string, any> } };
  const reply = doc.components.schemas.Run;
  reply.required = reply.required.filter((f: string) => f !== 'status'); // the run's schema, referred to by the operations that reply with runs
  const problems = await typeCheck(doc);
  assert.equal(problems.length, 1, problems.join('\n'));
  assert.match(problems[0]!, /Type '"(getRun|listRuns|stopRun)"' is not assignable/);
});
