/** One workspace: its files (download links) and uploads into it (dropped or chosen). */
import type { FileHandle } from '@agent-task-service/client';
import { useState } from 'preact/hooks';
import { useClient } from '../api.ts';
import { ErrorNotice } from '../components/error-notice.tsx';
import { FileDrop } from '../components/file-drop.tsx';
import { FileList } from '../components/file-list.tsx';
import { Loading } from '../components/loading.tsx';
import { useAction, useInterval, useLoad } from '../hooks.ts';
import { href } from '../lib/router.ts';

export default function WorkspacePage({ id }: { id: string }) {
  const client = useClient();
  const ws = useLoad((signal) => client.workspaces.get(id, { signal }), [id]);
  const files = useLoad<FileHandle[]>((signal) => client.workspaces.files(id, { limit: 200, signal }).toArray(2000), [id]);
  const [chosen, setChosen] = useState<File[]>([]);
  // Download links last 15 minutes: a page left open lists the files again.
  useInterval(() => files.reload(), 10 * 60_000);
  const upload = useAction(async () => {
    for (const f of chosen) await client.workspaces.upload(id, f);
    setChosen([]);
    files.reload();
  });
  return (
    <section>
      <p class="crumbs">
        <a href={href({ page: 'workspaces' })}>Workspaces</a> <span aria-hidden="true">/</span> <span class="mono">{id}</span>
      </p>
      <div class="page-head">
        <h1>{ws.data ? ws.data.name : 'Workspace'}</h1>
        <div class="page-actions">
          <a class="btn btn-primary" href={href({ page: 'new-run', agent: 'browsercode', workspace: id })}>
            Run in this workspace
          </a>
        </div>
      </div>
      <ErrorNotice error={ws.error} onRetry={ws.reload} />
      <form
        class="card form"
        aria-labelledby="upload-h"
        onSubmit={(e) => {
          e.preventDefault();
          if (chosen.length) void upload.run();
        }}
      >
        <h2 id="upload-h">Upload files</h2>
        <FileDrop files={chosen} onChange={setChosen} label="Files to upload" id="ws-files" />
        <div class="form-actions">
          <button type="submit" class="btn btn-primary" disabled={upload.busy || !chosen.length}>
            {upload.busy ? 'Uploading…' : 'Upload'}
          </button>
        </div>
        <ErrorNotice error={upload.error} />
      </form>
      <section class="card" aria-labelledby="ws-files-h">
        <h2 id="ws-files-h">Files</h2>
        {files.error ? <ErrorNotice error={files.error} onRetry={files.reload} /> : files.data ? <FileList files={files.data} label="Files of this workspace" empty="No files yet." /> : <Loading />}
      </section>
    </section>
  );
}
