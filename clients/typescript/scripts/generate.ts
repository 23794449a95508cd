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
import { fileURLToPath } from 'node:url';
import openapiTS, { astToString, COMMENT_HEADER } from 'openapi-typescript';
import { allRoutes, API_VERSION } from '../../../gateway/src/app.js';
import { buildOpenApi } from '../../../gateway/src/openapi.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const outDir = path.resolve(process.argv[2] ?? path.join(here, '..', 'src', 'generated'));

const doc = buildOpenApi(allRoutes(), API_VERSION);
// An object schema with no properties (an event's `data`) is any object: `Record<string, unknown>`, not `never`.
const ast = await openapiTS(doc as Parameters<typeof openapiTS>[0], { emptyObjectsUnknown: true, silent: true });
const banner = `${COMMENT_HEADER}// Source: GET /openapi.json of API ${API_VERSION}; regenerate with \`make clients-generate\`.\n\n`;
fs.mkdirSync(outDir, { recursive: true });
fs.writeFileSync(path.join(outDir, 'openapi.ts'), banner + astToString(ast));
