/** Browser profiles (cookies and storage kept between browsers): create, rename, delete. */
import type { Profile } from '@agent-task-service/client';
import { useState } from 'preact/hooks';
import { useClient } from '../api.ts';
import { ConfirmButton } from '../components/confirm-button.tsx';
import { ErrorNotice } from '../components/error-notice.tsx';
import { Loading } from '../components/loading.tsx';
import { Renamable } from '../components/rename.tsx';
import { useAction, useLoad } from '../hooks.ts';
import { formatWhen } from '../lib/format.ts';

export default function ProfilesPage() {
  const client = useClient();
  const list = useLoad((signal) => client.profiles.list({ limit: 200, signal }).toArray(1000), [client]);
  const [name, setName] = useState('');
  const [userId, setUserId] = useState('');
  const create = useAction(async () => {
    const p = await client.profiles.create({ name: name.trim(), ...(userId.trim() ? { userId: userId.trim() } : {}) });
    list.setData([p, ...(list.data ?? [])]);
    setName('');
    setUserId('');
  });
  const remove = useAction(async (p: Profile) => {
    await client.profiles.delete(p.id);
    list.setData((list.data ?? []).filter((x) => x.id !== p.id));
  });
  const rename = async (p: Profile, newName: string) => {
    const updated = await client.profiles.update(p.id, { name: newName });
    list.setData((list.data ?? []).map((x) => (x.id === p.id ? updated : x)));
  };
  return (
    <section>
      <div class="page-head">
        <h1>Profiles</h1>
      </div>
      <p class="muted">A profile keeps a browser's logins (cookies and local storage): a run or browser started with it picks up where the last one left.</p>
      <form
        class="card form inline-form"
        aria-labelledby="new-profile-h"
        onSubmit={(e) => {
          e.preventDefault();
          if (name.trim()) void create.run();
        }}
      >
        <h2 id="new-profile-h">New profile</h2>
        <div class="form-grid">
          <div>
            <label for="profile-name">Name</label>
            <input id="profile-name" required maxLength={200} value={name} onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)} />
          </div>
          <div>
            <label for="profile-user">Your user id (optional)</label>
            <input id="profile-user" maxLength={200} value={userId} onInput={(e) => setUserId((e.currentTarget as HTMLInputElement).value)} />
          </div>
        </div>
        <div class="form-actions">
          <button type="submit" class="btn btn-primary" disabled={create.busy || !name.trim()}>
            Create profile
          </button>
        </div>
        <ErrorNotice error={create.error} />
      </form>
      <ErrorNotice error={list.error ?? remove.error} onRetry={list.error ? list.reload : undefined} />
      {!list.data && !list.error && <Loading what="Loading profiles" />}
      {list.data && list.data.length === 0 && <p class="empty">No profiles yet.</p>}
      {list.data && list.data.length > 0 && (
        <table class="table">
          <caption class="visually-hidden">Profiles</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Id</th>
              <th scope="col">Cookies for</th>
              <th scope="col">Last used</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {list.data.map((p) => (
              <tr key={p.id} data-profile-id={p.id}>
                <td data-label="Name">
                  <Renamable name={p.name} what="profile" onRename={(n) => rename(p, n)} />
                </td>
                <td data-label="Id" class="mono">
                  {p.id}
                  {p.userId && <span class="muted small"> · user {p.userId}</span>}
                </td>
                <td data-label="Cookies for">{p.cookieDomains.length ? p.cookieDomains.slice(0, 4).join(', ') + (p.cookieDomains.length > 4 ? ` +${p.cookieDomains.length - 4}` : '') : <span class="muted">none yet</span>}</td>
                <td data-label="Last used">{p.lastUsedAt ? formatWhen(p.lastUsedAt) : <span class="muted">never</span>}</td>
                <td class="actions">
                  <ConfirmButton label="Delete" confirmLabel={`Delete ${p.name}`} onConfirm={() => void remove.run(p)} busy={remove.busy} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
