/**
 * A stand-in file-storage for tests: objects are files in a folder, shared by every recorder a
 * test starts (as the real object store is shared by every replica). Not used by the service.
 */
import fs from 'node:fs';
import path from 'node:path';
import { NotFoundError } from '../../common/src/errors.js';
import type { RecordingStore } from './recording-store.js';

export class FolderStore implements RecordingStore {
  readonly dir: string;

  constructor(dir: string) {
    this.dir = dir;
    fs.mkdirSync(dir, { recursive: true });
  }

  /** Where the object `key` of a project lives. */
  file(projectId: string, key: string): string {
    return path.join(this.dir, projectId, key);
  }

  /** Keys of the project's objects under `prefix`, sorted. */
  keys(projectId: string, prefix = ''): string[] {
    const root = path.join(this.dir, projectId);
    if (!fs.existsSync(root)) return [];
    return (fs.readdirSync(root, { recursive: true, withFileTypes: true }) as fs.Dirent[])
      .filter((d) => d.isFile())
      .map((d) => path.relative(root, path.join(d.parentPath, d.name)))
      .filter((k) => k.startsWith(prefix))
      .sort();
  }

  async put(projectId: string, key: string, file: string): Promise<{ sizeBytes: number }> {
    const to = this.file(projectId, key);
    fs.mkdirSync(path.dirname(to), { recursive: true });
    fs.copyFileSync(file, to);
    return { sizeBytes: fs.statSync(to).size };
  }

  async get(projectId: string, key: string, file: string): Promise<void> {
    const from = this.file(projectId, key);
    if (!fs.existsSync(from)) throw new NotFoundError('Object not found');
    fs.copyFileSync(from, file);
  }

  async remove(projectId: string, key: string): Promise<boolean> {
    const f = this.file(projectId, key);
    const existed = fs.existsSync(f);
    fs.rmSync(f, { force: true });
    return existed;
  }

  async link(): Promise<never> {
    throw new Error('FolderStore hands out no links');
  }

  close(): void {}
}
