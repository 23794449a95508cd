/**
 * Checks replies against the gateway's own /openapi.json: the route (method + path template),
 * the status and the JSON body must all be documented, so a presenter that drifts from its
 * schema fails the integration test that met the reply. Validators are compiled once each.
 */
import { AssertionError } from 'node:assert';
import type { JsonSchema } from '../../gateway/src/json-schema.js';
import { dereference } from '../../gateway/src/openapi.js';
import { validator } from '../../gateway/src/validation.js';

interface Operation {
  responses: Record<string, { content?: Record<string, { schema?: object }> }>;
}

interface Template {
  path: string;
  pattern: RegExp;
  literalSegments: number;
  operations: Record<string, Operation>;
}

/** Answered by Node's HTTP parser before any route is matched (see answerClientErrors), whatever the URL. */
const BEFORE_ROUTING = new Set([408, 431]);

export class DocumentedReplies {
  readonly #templates: Template[];

  constructor(document: { paths: Record<string, Record<string, Operation>> }) {
    const doc = dereference(document); // each reply's schema is then whole, compiled on its own
    this.#templates = Object.entries(doc.paths)
      .map(([path, operations]) => ({
        path,
        pattern: new RegExp(`^${path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`),
        literalSegments: path.split('/').filter((seg) => seg && !seg.startsWith('{')).length,
        operations,
      }))
      // `/a/{id}` and `/a/b` both match `/a/b`: the more literal template wins, as Express's route order has it.
      .sort((a, b) => b.literalSegments - a.literalSegments);
  }

  /** Reads the document the running gateway serves. */
  static async load(baseUrl: string): Promise<DocumentedReplies> {
    const res = await fetch(`${baseUrl}/openapi.json`);
    if (!res.ok) throw new Error(`GET /openapi.json: ${res.status}`);
    return new DocumentedReplies((await res.json()) as { paths: Record<string, Record<string, Operation>> });
  }

  /** Throws an AssertionError when `res` (to `method` `url`) is not what the document says; reads a clone, so `res` stays unread. */
  async check(method: string, url: string, res: Response): Promise<void> {
    const pathname = new URL(url, 'http://x').pathname;
    const template = this.#templates.find((t) => t.pattern.test(pathname));
    const op = template?.operations[method.toLowerCase()];
    if (!template || !op) return; // no such route: the app's plain 404, nothing documented to drift from
    if (BEFORE_ROUTING.has(res.status)) return;
    const where = `${method.toUpperCase()} ${template.path} → ${res.status}`;
    const documented = op.responses[String(res.status)];
    if (!documented) this.#fail(where, `status ${res.status} is not documented (documented: ${Object.keys(op.responses).join(', ')})`);
    const type = res.headers.get('content-type') ?? '';
    if (!type.startsWith('application/json')) return;
    const schema = documented.content?.['application/json']?.schema;
    if (!schema) this.#fail(where, `a JSON reply where the document has ${Object.keys(documented.content ?? {}).join(', ') || 'no body'}`);
    const text = await res.clone().text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      this.#fail(where, `a body that is not JSON: ${text.slice(0, 200)}`);
    }
    const validate = validator(schema as JsonSchema);
    if (!validate(body)) {
      const errors = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}${e.keyword === 'additionalProperties' ? ` (${(e.params as { additionalProperty: string }).additionalProperty})` : ''}`);
      this.#fail(where, `the reply does not match its documented schema:\n  ${errors.join('\n  ')}\nbody: ${text.slice(0, 1000)}`);
    }
  }

  #fail(where: string, what: string): never {
    throw new AssertionError({ message: `reply drifted from /openapi.json: ${where}: ${what}` });
  }
}
