/** The client: one object holding the connection settings and a resource per API resource. */
import { Core, type ClientOptions } from './core.js';
import { Agents } from './resources/agents.js';
import { ApiKeys } from './resources/api-keys.js';
import { Browsers } from './resources/browsers.js';
import { Files } from './resources/files.js';
import { Models } from './resources/models.js';
import { Profiles } from './resources/profiles.js';
import { Runs } from './resources/runs.js';
import { Sessions } from './resources/sessions.js';
import { Webhooks } from './resources/webhooks.js';
import { Workspaces } from './resources/workspaces.js';

/**
 * The Agent Task Service API. `new AgentTaskService()` reads `ATS_API_KEY` and `ATS_BASE_URL`
 * (Node); pass `{ apiKey, baseUrl, maxRetries, timeoutMs, fetch }` to set them.
 */
export class AgentTaskService {
  /** The server's root (without `/api/v1`). */
  readonly baseUrl: string;
  readonly agents: Agents;
  readonly models: Models;
  readonly runs: Runs;
  readonly sessions: Sessions;
  readonly files: Files;
  readonly workspaces: Workspaces;
  readonly browsers: Browsers;
  readonly profiles: Profiles;
  readonly apiKeys: ApiKeys;
  readonly webhooks: Webhooks;

  constructor(options: ClientOptions = {}) {
    const core = new Core(options);
    this.baseUrl = core.baseUrl;
    this.agents = new Agents(core);
    this.models = new Models(core);
    this.runs = new Runs(core);
    this.sessions = new Sessions(core);
    this.files = new Files(core);
    this.workspaces = new Workspaces(core);
    this.browsers = new Browsers(core);
    this.profiles = new Profiles(core);
    this.apiKeys = new ApiKeys(core);
    this.webhooks = new Webhooks(core);
  }
}
