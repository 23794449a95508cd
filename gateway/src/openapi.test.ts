import assert from 'node:assert/strict';
import { test } from 'node:test';
import { allRoutes } from './app.js';
import { buildOpenApi } from './openapi.js';
import { ajv } from './validation.js';

test('when the document is built, then every route is in it with the very schema the gateway validates with', () => {
  const routes = allRoutes();
  const doc = buildOpenApi(routes, '0') as { openapi: string; paths: Record<string, Record<string, any>> };
  assert.equal(doc.openapi, '3.1.0');
  for (const r of routes) {
    const op = doc.paths[`/api/v1${r.path.replace(/:([A-Za-z]+)/g, '{$1}')}`]?.[r.method];
    assert.ok(op, `${r.method} ${r.path} is documented`);
    assert.equal(op.operationId, r.operationId);
    if (r.body) assert.equal(op.requestBody.content['application/json'].schema, r.body, `${r.operationId} body is the same object`);
    assert.ok(op.responses[String(r.success.status)], `${r.operationId} documents its success status`);
    for (const name of r.path.match(/:([A-Za-z]+)/g) ?? []) {
      assert.ok(op.parameters.some((p: { in: string; name: string }) => p.in === 'path' && `:${p.name}` === name), `${r.operationId} documents ${name}`);
    }
  }
  const ids = routes.map((r) => r.operationId);
  assert.equal(new Set(ids).size, ids.length, 'operation ids are unique');
});

test('when the spec routes are looked up, then the paths the spec names exist', () => {
  const doc = buildOpenApi(allRoutes(), '0') as { paths: Record<string, Record<string, unknown>> };
  const must: [string, string][] = [
    ['post', '/api/v1/agents/{agent}/runs'],
    ['get', '/api/v1/agents/{agent}/runs/{runId}'],
    ['get', '/api/v1/agents/{agent}/runs/{runId}/status'],
    ['get', '/api/v1/agents/{agent}/runs/{runId}/steps'],
    ['get', '/api/v1/agents/{agent}/runs/{runId}/events'],
    ['post', '/api/v1/agents/{agent}/runs/{runId}/stop'],
    ['post', '/api/v1/agents/{agent}/files'],
    ['get', '/api/v1/agents/{agent}/runs/{runId}/files'],
    ['post', '/api/v1/agent-workspaces'],
    ['post', '/api/v1/agent-workspaces/{workspaceId}/files'],
    ['get', '/api/v1/agents'],
    ['post', '/api/v1/browsers'],
    ['get', '/api/v1/browsers/{browserId}/downloads'],
  ];
  for (const [m, p] of must) assert.ok(doc.paths[p]?.[m], `${m.toUpperCase()} ${p}`);
});

test('when every schema in the document is compiled, then each is valid JSON Schema 2020-12', () => {
  const doc = buildOpenApi(allRoutes(), '0') as { paths: Record<string, Record<string, any>> };
  let n = 0;
  for (const ops of Object.values(doc.paths)) {
    for (const op of Object.values(ops)) {
      for (const res of Object.values(op.responses as Record<string, any>)) {
        const schema = res.content?.['application/json']?.schema;
        if (schema) {
          ajv.compile(schema);
          n++;
        }
      }
    }
  }
  assert.ok(n > 20);
});
