/** Workspaces (disks that browsercode conversations share): create, rename, delete, open one for its files. */
import type { Workspace } from '@agent-task-service/client';
import { useState } from 'preact/hooks';
import { useClient } from '../api.ts';
import { ConfirmButton } from '../components/confirm-button.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { Loading } from '../components/loading.tsx';
import { Renamable } from '../components/rename.tsx';
import { useAction, useLoad } from '../hooks.ts';
import { formatWhen } from '../lib/format.ts';
import { href } from '../lib/router.ts';

export default function WorkspacesPage() {
  const client = useClient();
  const list = useLoad((signal) => client.workspaces.list({ limit: 200, signal }).toArray(1000), [client]);
  const [name, setName] = useState('');
  const create = useAction(async () => {
    const w = await client.workspaces.create({ name: name.trim() });
    list.setData([w, ...(list.data ?? [])]);
    setName('');
  });
  const remove = useAction(async (w: Workspace) => {
    await client.workspaces.delete(w.id);
    list.setData((list.data ?? []).filter((x) => x.id !== w.id));
  });
  const rename = async (w: Workspace, newName: string) => {
    const updated = await client.workspaces.update(w.id, { name: newName });
    list.setData((list.data ?? []).map((x) => (x.id === w.id ? updated : x)));
  };
  return (
    <section>
      <div class="page-head">
        <h1>Workspaces</h1>
      </div>
      <p class="muted">A workspace is a disk that browsercode runs share: every conversation that names it reads and writes the same files.</p>
      <form
        class="card form inline-form"
        aria-labelledby="new-ws-h"
        onSubmit={(e) => {
          e.preventDefault();
          if (name.trim()) void create.run();
        }}
      >
        <h2 id="new-ws-h">New workspace</h2>
        <div class="form-grid">
          <div>
            <label for="ws-name">Name</label>
            <input id="ws-name" required maxLength={200} value={name} onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)} />
          </div>
        </div>
        <div class="form-actions">
          <button type="submit" class="btn btn-primary" disabled={create.busy || !name.trim()}>
            Create workspace
          </button>
        </div>
        <ErrorNotice error={create.error} />
      </form>
      <ErrorNotice error={list.error ?? remove.error} onRetry={list.error ? list.reload : undefined} />
      {!list.data && !list.error && <Loading what="Loading workspaces" />}
      {list.data && list.data.length === 0 && <p class="empty">No workspaces yet.</p>}
      {list.data && list.data.length > 0 && (
        <table class="table">
          <caption class="visually-hidden">Workspaces</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Id</th>
              <th scope="col">Created</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {list.data.map((w) => (
              <tr key={w.id} data-workspace-id={w.id}>
                <td data-label="Name">
                  <Renamable name={w.name} what="workspace" onRename={(n) => rename(w, n)} />
                </td>
                <td data-label="Id" class="mono">
                  {w.id}
                </td>
                <td data-label="Created">{formatWhen(w.createdAt)}</td>
                <td class="actions">
                  <a class="btn btn-small" href={href({ page: 'workspace', id: w.id })} aria-label={`Files of ${w.name}`}>
                    Files
                  </a>
                  <a class="btn btn-small" href={href({ page: 'new-run', agent: 'browsercode', workspace: w.id })} aria-label={`New run in ${w.name}`}>
                    New run
                  </a>
                  <ConfirmButton label="Delete" confirmLabel={`Delete ${w.name}`} onConfirm={() => void remove.run(w)} busy={remove.busy} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
