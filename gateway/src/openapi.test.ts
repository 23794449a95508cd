import assert from 'node:assert/strict';
import { test } from 'node:test';
import { allRoutes } from './app.js';
import { NAMED_SCHEMAS, buildOpenApi, dereference } from './openapi.js';
import { ajv } from './validation.js';

test('when the document is built, then every route is in it with the very schema the gateway validates with', () => {
  const routes = allRoutes();
  const doc = buildOpenApi(routes, '0') as { openapi: string; paths: Record<string, Record<string, any>> };
  assert.equal(doc.openapi, '3.1.0');
  for (const r of routes) {
    const op = doc.paths[`/api/v1${r.path.replace(/:([A-Za-z]+)/g, '{$1}')}`]?.[r.method];
    assert.ok(op, `${r.method} ${r.path} is documented`);
    assert.equal(op.operationId, r.operationId);
    if (r.body) assert.deepEqual(dereference(doc).paths[`/api/v1${r.path.replace(/:([A-Za-z]+)/g, '{$1}')}`]![r.method].requestBody.content['application/json'].schema, r.body, `${r.operationId} body is the schema it validates with`);
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

test('when a load balancer or probe reads the document, then /healthz and /readyz are documented with 200 and 503 and need no key', () => {
  const doc = buildOpenApi(allRoutes(), '0') as { paths: Record<string, Record<string, any>> };
  for (const path of ['/healthz', '/readyz']) {
    const op = doc.paths[path]?.get;
    assert.ok(op, `GET ${path}`);
    assert.deepEqual(Object.keys(op.responses).sort(), ['200', '503'], path);
    assert.deepEqual(op.security, [], `${path} needs no key`);
  }
});

test('when every schema in the document is compiled, then each is valid JSON Schema 2020-12', () => {
  const doc = dereference(buildOpenApi(allRoutes(), '0') as { paths: Record<string, Record<string, any>> });
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

/** Every object schema under `schema` whose properties are not all required, as JSON pointers. */
function optionalFields(schema: any, at = ''): string[] {
  if (!schema || typeof schema !== 'object') return [];
  const out: string[] = [];
  if (schema.properties) {
    const required = new Set<string>(schema.required ?? []);
    for (const [name, child] of Object.entries(schema.properties)) {
      if (!required.has(name)) out.push(`${at}/${name}`);
      out.push(...optionalFields(child, `${at}/${name}`));
    }
  }
  if (schema.items) out.push(...optionalFields(schema.items, `${at}/items`));
  return out;
}

test('when a client is generated from the document, then every field of a success reply is required (nullable, never optional)', () => {
  const doc = dereference(buildOpenApi(allRoutes(), '0') as { paths: Record<string, Record<string, any>> });
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      for (const [status, res] of Object.entries(op.responses as Record<string, any>)) {
        if (!status.startsWith('2')) continue;
        const schema = res.content?.['application/json']?.schema;
        if (schema) assert.deepEqual(optionalFields(schema), [], `${method.toUpperCase()} ${path} ${status}`);
      }
    }
  }
});

test('when a route takes an agent, an id or a body, then the 404, 413 and 415 it can answer are documented', () => {
  const doc = buildOpenApi(allRoutes(), '0') as { paths: Record<string, Record<string, any>> };
  for (const r of allRoutes()) {
    const responses = doc.paths[`/api/v1${r.path.replace(/:([A-Za-z]+)/g, '{$1}')}`]![r.method].responses as Record<string, { description: string }>;
    for (const code of ['401', '500', '503', '504']) assert.ok(responses[code], `${r.operationId} documents ${code}`);
    if (r.path.includes(':')) assert.ok(responses['404'], `${r.operationId} documents 404`);
    if (r.path.includes(':agent')) assert.match(responses['404']!.description, /unknown agent/, r.operationId);
    if (r.body) for (const code of ['400', '413', '415', '422']) assert.ok(responses[code], `${r.operationId} documents ${code}`);
    if (r.query) assert.ok(responses['422'], `${r.operationId} documents 422`);
  }
});

test('when a route changes state or creates, then the read-key 403, the rate-limit 429 and (for a POST) the Idempotency-Key header with its 409 and 422 are documented', () => {
  const doc = buildOpenApi(allRoutes(), '0') as { paths: Record<string, Record<string, any>> };
  for (const r of allRoutes()) {
    const op = doc.paths[`/api/v1${r.path.replace(/:([A-Za-z]+)/g, '{$1}')}`]![r.method];
    const responses = op.responses as Record<string, { description: string }>;
    assert.ok(responses['429'], `${r.operationId} documents 429`);
    assert.equal(Boolean(responses['403']), r.method !== 'get', `${r.operationId}: 403 exactly when it changes state`);
    const header = (op.parameters ?? []).find((p: { name: string }) => p.name === 'Idempotency-Key');
    assert.equal(Boolean(header), r.method === 'post', `${r.operationId}: Idempotency-Key exactly on a POST`);
    if (r.method === 'post') {
      assert.equal(header.in, 'header');
      assert.match(responses['409']!.description, /Idempotency-Key still in progress/, r.operationId);
      assert.match(responses['422']!.description, /Idempotency-Key was used for another request/, r.operationId);
    }
  }
});

test('when a workspace lists its files, then the documented reply is the page the route returns', () => {
  const doc = dereference(buildOpenApi(allRoutes(), '0') as { paths: Record<string, Record<string, any>> });
  const schema = doc.paths['/api/v1/agent-workspaces/{workspaceId}/files']!.get.responses['200'].content['application/json'].schema;
  const file = { id: 'file_1', name: 'a.txt', kind: 'input', downloadUrl: 'http://x/a', sizeBytes: 1, contentType: 'text/plain', createdAt: '2026-01-01T00:00:00.000Z' };
  assert.equal(ajv.validate(schema, { items: [file], nextCursor: null, hasMore: false }), true, JSON.stringify(ajv.errors));
});

type Doc = { paths: Record<string, Record<string, any>>; components: { schemas: Record<string, any> } };

/** Every `$ref` under `node`. */
function refsIn(node: unknown, out = new Set<string>()): Set<string> {
  if (Array.isArray(node)) for (const x of node) refsIn(x, out);
  else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.add(v);
      else refsIn(v, out);
    }
  }
  return out;
}

test('when a client generator reads the document, then every resource is declared once under components/schemas by name', () => {
  const doc = buildOpenApi(allRoutes(), '0') as Doc;
  const names = Object.keys(doc.components.schemas);
  for (const name of ['Run', 'RunCreated', 'RunStatus', 'Step', 'Event', 'Session', 'File', 'FileUpload', 'Workspace', 'Browser', 'Profile', 'Agent', 'Download', 'Recording', 'LiveViewLink', 'Error', 'ValidationError', 'RunList', 'BrowserList', 'ProfileList', 'CreateRunRequest', 'BrowserOptions', 'CreateBrowserRequest']) {
    assert.ok(names.includes(name), `components/schemas/${name}`);
  }
  // A list refers to its item by name, and a run's body to its browser options.
  assert.deepEqual(doc.components.schemas.RunList.properties.items.items, { $ref: '#/components/schemas/Run' });
  assert.deepEqual(doc.components.schemas.CreateRunRequest.properties.browser, { $ref: '#/components/schemas/BrowserOptions' });
  // Every $ref resolves, and every named schema is used by some operation (directly or through another).
  const refs = refsIn(doc);
  for (const ref of refs) assert.ok(doc.components.schemas[ref.replace('#/components/schemas/', '')], `${ref} resolves`);
  for (const name of names) assert.ok(refs.has(`#/components/schemas/${name}`), `${name} is referred to`);
});

test('when an operation answers with JSON or takes a body, then its schema is a $ref to a named component, not an inline object', () => {
  const doc = buildOpenApi(allRoutes(), '0') as Doc;
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const where = `${method.toUpperCase()} ${path}`;
      const body = op.requestBody?.content?.['application/json']?.schema;
      if (body) assert.match(body.$ref ?? '', /^#\/components\/schemas\/\w+Request$/, `${where} body`);
      for (const [status, res] of Object.entries(op.responses as Record<string, any>)) {
        const schema = res.content?.['application/json']?.schema;
        if (schema) assert.match(schema.$ref ?? '', /^#\/components\/schemas\/\w+$/, `${where} ${status}`);
      }
    }
  }
});

test('when the document is dereferenced, then no $ref is left in its paths and each names its very schema', () => {
  const doc = dereference(buildOpenApi(allRoutes(), '0') as Doc);
  assert.equal(refsIn(doc.paths).size, 0);
  assert.deepEqual(doc.paths['/api/v1/agents/{agent}/runs/{runId}']!.get.responses['200'].content['application/json'].schema, NAMED_SCHEMAS.Run);
});
