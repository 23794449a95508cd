/**
 * Writes src/generated/openapi.ts: the types of the public API, generated with openapi-typescript
 * from the document the gateway serves at /openapi.json, built here statically from the gateway's
 * own route table and schemas (no server needed). `make clients-generate` runs it;
 * `make clients-check` runs it into a temporary folder and fails when the committed file differs.
 *
 *   node --import tsx clients/typescript/scripts/generate.ts [output-dir]
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import openapiTS, { astToString, COMMENT_HEADER } from 'openapi-typescript';
import { allRoutes, API_VERSION } from '../../../gateway/src/app.js';
import { buildOpenApi } from '../../../gateway/src/openapi.js';

const here = path.dirname(fileURLToPath(import.meta.url));
/** Where the generated file is committed. */
export const GENERATED_FILE = path.join(here, '..', 'src', 'generated', 'openapi.ts');

/** The API's OpenAPI document, as GET /openapi.json serves it. */
export function apiDocument(): Record<string, unknown> {
  return buildOpenApi(allRoutes(), API_VERSION);
}

/** The text of src/generated/openapi.ts for `doc`. */
export async function renderTypes(doc: Record<string, unknown>): Promise<string> {
  // An object schema with no properties (an event's `data`) is any object: `Record<string, unknown>`, not `never`.
  const ast = await openapiTS(doc as never, { emptyObjectsUnknown: true, silent: true });
  const version = (doc.info as { version?: string } | undefined)?.version ?? '?';
  return `${COMMENT_HEADER}// Source: GET /openapi.json of API ${version}; regenerate with \`make clients-generate\`.\n\n${astToString(ast)}`;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const outDir = process.argv[2] ? path.resolve(process.argv[2]) : path.dirname(GENERATED_FILE);
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, 'openapi.ts'), await renderTypes(apiDocument()));
}
