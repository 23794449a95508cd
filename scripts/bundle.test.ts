import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { bundle, CHUNKS, latin1Source } from './bundle.js';
import { bundledEntry, ENTRY } from './stack.js';

const run = promisify(execFile);
const twoByte = (text: string) => /[^\u0000-\u00ff]/.test(text);

test('latin1Source: what V8 would hold two bytes per character is escaped, and the code means the same', () => {
  const code = String.raw`[/[“‘]x/.test('“x'), /\’/.test('’'), /\\’/.test('\\’'), /😀+/u.test('😀😀'), /^.$/u.test('😀'), '“quoted” — ok', ${'`'}temp “late”${'`'}, 'café']`;
  const out = latin1Source(code);
  assert.equal(twoByte(out), false, out);
  assert.deepEqual(eval(out), eval(code));
  assert.deepEqual(eval(out), [true, true, true, true, true, '“quoted” — ok', 'temp “late”', 'café']);
});

test('a bundle is Latin-1, and what its entry imports with import() is a chunk loaded when used', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ats-bundle-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'entry.js'), "console.log('entry — started');\nconst { quoted } = await import('./lazy.js');\nconsole.log(quoted('say “hi”'));\n");
  fs.writeFileSync(path.join(dir, 'lazy.js'), '// the lazy module’s comment\nexport const quoted = (s) => /“([^”]+)”/.exec(s)?.[1] ?? "LAZY_MODULE_NO_MATCH";\n');
  const out = path.join(dir, 'out', 'main.bundle.mjs');
  await bundle(path.join(dir, 'entry.js'), out);

  const main = fs.readFileSync(out, 'utf8');
  const chunks = fs.readdirSync(path.join(dir, 'out', CHUNKS)).map((f) => fs.readFileSync(path.join(dir, 'out', CHUNKS, f), 'utf8'));
  assert.equal(main.includes('LAZY_MODULE_NO_MATCH'), false, 'the lazy module is not in the bundle itself');
  assert.equal(chunks.filter((c) => c.includes('LAZY_MODULE_NO_MATCH')).length, 1);
  for (const text of [main, ...chunks]) assert.equal(twoByte(text), false);
  assert.equal(main.includes('comment'), false, 'comments are dropped');
  const { stdout } = await run(process.execPath, [out]);
  assert.equal(stdout, 'entry — started\nhi\n');
});

test('the services built by make build are held one byte per character', { skip: !fs.existsSync(bundledEntry(ENTRY.run)) && 'not built (make build)' }, () => {
  for (const entry of Object.values(ENTRY)) {
    const dir = path.dirname(bundledEntry(entry));
    const files = [bundledEntry(entry), ...fs.readdirSync(path.join(dir, CHUNKS)).map((f) => path.join(dir, CHUNKS, f))];
    for (const f of files) assert.equal(twoByte(fs.readFileSync(f, 'utf8')), false, `${path.relative(dir, f)} of ${entry} has a character above U+00FF`);
  }
});
