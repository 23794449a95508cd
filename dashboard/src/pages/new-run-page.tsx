/**
 * Start a run: the agent, the task (with the agent's example tasks), the model, files to attach
 * (dropped or chosen; uploaded through presigned links by the SDK), and the browser's profile,
 * proxy country and screen size, a workspace (browsercode) and a session to continue.
 */
import type { Agent, AgentName, ModelList, Profile, Session, Workspace } from '@agent-task-service/client';
import { useState } from 'preact/hooks';
import { agentsOf, useClient } from '../api.ts';
import { ErrorNotice } from '../components/error-notice.tsx';
import { FileDrop } from '../components/file-drop.tsx';
import { Loading } from '../components/loading.tsx';
import { useAction, useLoad } from '../hooks.ts';
import { formatWhen } from '../lib/format.ts';
import { href } from '../lib/router.ts';

export const SCREEN_SIZES = [
  { label: 'Service default', value: '' },
  { label: '1280 × 720 (laptop)', value: '1280x720' },
  { label: '1920 × 1080 (desktop)', value: '1920x1080' },
  { label: '1024 × 768 (tablet)', value: '1024x768' },
  { label: '390 × 844 (phone)', value: '390x844' },
];

interface Choices {
  agents: Agent[];
  profiles: Profile[];
  workspaces: Workspace[];
  sessions: Record<string, Session[]>;
  models: ModelList;
}

export default function NewRunPage({ agent: agentParam, session: sessionParam, workspace: workspaceParam }: { agent?: string; session?: string; workspace?: string }) {
  const client = useClient();
  const choices = useLoad<Choices>(async (signal) => {
    const agents = await agentsOf(client);
    const [profiles, workspaces, sessionLists, models] = await Promise.all([
      client.profiles.list({ limit: 200, signal }).toArray(200),
      client.workspaces.list({ limit: 200, signal }).toArray(200),
      Promise.all(agents.map(async (a) => [a.name, (await client.sessions.list({ agent: a.name, limit: 50, signal }).firstPage()).items.filter((s) => s.status === 'open')] as const)),
      client.models.list({ signal }),
    ]);
    return { agents, profiles, workspaces, sessions: Object.fromEntries(sessionLists), models };
  }, [client]);

  const [agent, setAgent] = useState<AgentName>((agentParam as AgentName) ?? 'browser-agent');
  const [task, setTask] = useState('');
  const [model, setModel] = useState('');
  const [files, setFiles] = useState<File[]>([]);
  const [profileId, setProfileId] = useState('');
  const [proxy, setProxy] = useState('');
  const [size, setSize] = useState('');
  const [workspaceId, setWorkspaceId] = useState(workspaceParam ?? '');
  const [sessionId, setSessionId] = useState(sessionParam ?? '');
  const [progress, setProgress] = useState('');

  const create = useAction(async () => {
    const [w, h] = size ? size.split('x').map(Number) : [];
    const browser = {
      ...(profileId ? { profileId } : {}),
      ...(proxy.trim() ? { proxyCountryCode: proxy.trim().toLowerCase() } : {}),
      ...(w && h ? { screenWidth: w, screenHeight: h } : {}),
    };
    setProgress(files.length ? `Uploading ${files.length} file${files.length === 1 ? '' : 's'} and starting the run…` : 'Starting the run…');
    try {
      const created = await client.runs.create({
        agent,
        task: task.trim(),
        ...(model.trim() ? { model: model.trim() } : {}),
        ...(Object.keys(browser).length ? { browser } : {}),
        ...(sessionId ? { sessionId } : {}),
        ...(agent === 'browsercode' && workspaceId ? { workspaceId } : {}),
        ...(files.length ? { files } : {}),
      });
      window.location.hash = href({ page: 'run', agent: created.agent, id: created.id });
    } finally {
      setProgress('');
    }
  });

  const c = choices.data;
  const info = c?.agents.find((a) => a.name === agent);
  const sessions = c?.sessions[agent] ?? [];
  return (
    <section>
      <div class="page-head">
        <h1>New run</h1>
      </div>
      <ErrorNotice error={choices.error} onRetry={choices.reload} />
      {!c && !choices.error && <Loading />}
      {c && (
        <form
          class="card form new-run"
          onSubmit={(e) => {
            e.preventDefault();
            void create.run();
          }}
        >
          <fieldset>
            <legend>Agent</legend>
            <div class="agent-choices">
              {c.agents.map((a) => (
                <label key={a.name} class={`agent-choice ${agent === a.name ? 'chosen' : ''}`}>
                  <input type="radio" name="agent" value={a.name} checked={agent === a.name} onChange={() => (setAgent(a.name), setSessionId(''))} />
                  <span class="agent-name">{a.name}</span>
                  <span class="muted small">{a.bestFor[0] ?? ''}</span>
                </label>
              ))}
            </div>
          </fieldset>

          <label for="task">Task</label>
          <textarea id="task" rows={5} required maxLength={50000} value={task} onInput={(e) => setTask((e.currentTarget as HTMLTextAreaElement).value)} placeholder="What should the agent do? Say it in plain language." />
          {info && info.exampleTasks.length > 0 && (
            <div class="examples">
              <span class="muted small">Examples:</span>
              {info.exampleTasks.slice(0, 4).map((t) => (
                <button key={t} type="button" class="btn btn-small btn-ghost" onClick={() => setTask(t)}>
                  {t.length > 60 ? `${t.slice(0, 59)}…` : t}
                </button>
              ))}
            </div>
          )}

          <div class="form-grid">
            <div>
              <label for="model">Model</label>
              {c.models.otherNames === null ? (
                <select id="model" value={model} onChange={(e) => setModel((e.currentTarget as HTMLSelectElement).value)}>
                  {c.models.models.map((m) => (
                    <option key={m.name} value={m.default ? '' : m.name}>
                      {m.name}
                      {m.default ? ' (default)' : ''}
                    </option>
                  ))}
                </select>
              ) : (
                <>
                  <input id="model" list="models" value={model} onInput={(e) => setModel((e.currentTarget as HTMLInputElement).value)} placeholder={`${c.models.default} (default)`} spellcheck={false} autocomplete="off" aria-describedby="model-help" />
                  <datalist id="models">
                    {c.models.models.map((m) => (
                      <option key={m.name} value={m.name} />
                    ))}
                  </datalist>
                  <p id="model-help" class="muted small">
                    Or {c.models.otherNames}.
                  </p>
                </>
              )}
            </div>
            <div>
              <label for="session">Continue a session</label>
              <select id="session" value={sessionId} onChange={(e) => setSessionId((e.currentTarget as HTMLSelectElement).value)}>
                <option value="">A new session</option>
                {sessionId && !sessions.some((s) => s.id === sessionId) && <option value={sessionId}>{sessionId}</option>}
                {sessions.map((s) => (
                  <option key={s.id} value={s.id} disabled={s.busy && agent === 'browser-agent'}>
                    {s.id} · {s.busy ? 'busy' : 'idle'} · {formatWhen(s.updatedAt)}
                  </option>
                ))}
              </select>
            </div>
            {agent === 'browsercode' && (
              <div>
                <label for="workspace">Workspace</label>
                <select id="workspace" value={workspaceId} onChange={(e) => setWorkspaceId((e.currentTarget as HTMLSelectElement).value)}>
                  <option value="">The session's own disk</option>
                  {c.workspaces.map((w) => (
                    <option key={w.id} value={w.id}>
                      {w.name}
                    </option>
                  ))}
                </select>
              </div>
            )}
          </div>

          <FileDrop files={files} onChange={setFiles} />

          <fieldset>
            <legend>Browser</legend>
            <div class="form-grid">
              <div>
                <label for="profile">Profile</label>
                <select id="profile" value={profileId} onChange={(e) => setProfileId((e.currentTarget as HTMLSelectElement).value)}>
                  <option value="">None (a clean browser)</option>
                  {c.profiles.map((p) => (
                    <option key={p.id} value={p.id}>
                      {p.name}
                    </option>
                  ))}
                </select>
              </div>
              <div>
                <label for="proxy">Proxy country</label>
                <input id="proxy" value={proxy} onInput={(e) => setProxy((e.currentTarget as HTMLInputElement).value)} placeholder="e.g. de" maxLength={2} pattern="[A-Za-z]{2}" aria-describedby="proxy-help" spellcheck={false} />
                <p id="proxy-help" class="muted small">
                  Two letters (ISO 3166-1); empty for no proxy.
                </p>
              </div>
              <div>
                <label for="size">Screen size</label>
                <select id="size" value={size} onChange={(e) => setSize((e.currentTarget as HTMLSelectElement).value)}>
                  {SCREEN_SIZES.map((s) => (
                    <option key={s.value} value={s.value}>
                      {s.label}
                    </option>
                  ))}
                </select>
              </div>
            </div>
          </fieldset>

          <div class="form-actions">
            <button type="submit" class="btn btn-primary" disabled={create.busy || !task.trim()}>
              {create.busy ? 'Starting…' : 'Start the run'}
            </button>
            <span class="muted small" role="status">
              {progress}
            </span>
          </div>
          <ErrorNotice error={create.error} />
        </form>
      )}
    </section>
  );
}
