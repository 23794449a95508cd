// A follow-up in the session: the second run continues where the first left off (same browser, same page).
import { AgentTaskService } from '@agent-task-service/client';

const site = process.env.ATS_EXAMPLE_SITE ?? 'https://example.com';
const client = new AgentTaskService();

const first = await client.runs.create({ task: `Open ${site}. Read the heading.` });
console.log('first:', (await client.runs.wait(first.id)).result);

const second = await client.runs.create({ task: 'Extract the title.', sessionId: first.sessionId });
console.log('second:', (await client.runs.wait(second.id)).result);

const session = await client.sessions.get(first.sessionId);
console.log('session', session.id, 'latest run is the second:', session.latestRunId === second.id);
