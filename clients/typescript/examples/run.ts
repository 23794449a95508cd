// A run and its answer: start a task, watch its events as they happen, then read the result.
import { AgentTaskService } from '@agent-task-service/client';

const site = process.env.ATS_EXAMPLE_SITE ?? 'https://example.com';
const client = new AgentTaskService(); // reads ATS_API_KEY and ATS_BASE_URL

const run = await client.runs.create({ task: `Open ${site}. Read the heading.` });
console.log('started', run.id);

for await (const event of client.runs.stream(run.id)) {
  console.log('event', event.type);
}

const done = await client.runs.wait(run.id);
console.log(done.status, done.result);
