// Files in and out: upload a file with the run, let the code agent work on it, download what it wrote.
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentTaskService } from '@agent-task-service/client';

const client = new AgentTaskService();
const dir = await mkdtemp(join(tmpdir(), 'ats-example-'));
await writeFile(join(dir, 'notes.txt'), 'milk\neggs\nbread\n');

const run = await client.runs.create({
  agent: 'browsercode',
  task: 'Run `sort notes.txt > sorted.txt`.',
  files: [join(dir, 'notes.txt')], // uploaded, then attached: the run finds notes.txt in its folder
});
const done = await client.runs.wait(run.id, { agent: 'browsercode' });
console.log(done.status);

for (const file of await client.runs.files(run.id, { agent: 'browsercode', kind: 'output' })) {
  const path = await file.download({ to: dir });
  console.log(file.name, JSON.stringify(await readFile(path, 'utf8')));
}
