/** Disk sync against a storage service that stops answering: every transfer ends within its bound. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { tempDir } from '../../../../test/support/infra.js';
import { DeadlineExceededError } from '../../../common/src/errors.js';
import { createServiceClient, GrpcServer, implement } from '../../../common/src/grpc.js';
import { loadInternalToken } from '../../../common/src/internal-token.js';
import { createLogger } from '../../../common/src/logger.js';
import { FileStorageServiceService } from '../../../../gen/ats/filestorage/v1/file_storage.js';
import { materializeDisk, syncDisk, TransferStopped, type FileStorageClient } from './disk-sync.js';

const token = loadInternalToken({ internalToken: 'disk-sync-test-token-0123456789abcdef', dataDir: '.' });
const never = new Promise<never>(() => {});

describe('disk sync with a storage service that hangs', () => {
  const dir = tempDir('disk-sync');
  let server: GrpcServer;
  let client: FileStorageClient;
  before(async () => {
    // Takes the header, then reads nothing more and never answers; sends one chunk of a file, then nothing.
    const handlers = implement(
      FileStorageServiceService,
      {
        async writeDiskFile(call) {
          await new Promise((r) => call.once('data', r));
          call.pause();
          return never;
        },
        async listDiskEntries() {
          return { entries: [{ path: 'in.txt', sizeBytes: 10, sha256: 'x', modifiedAt: new Date().toISOString() }] };
        },
        async readDiskFile(_req, call) {
          call.write({ chunk: Buffer.from('first') });
          return never;
        },
      },
      createLogger('test', 'silent'),
    );
    server = new GrpcServer([{ definition: FileStorageServiceService, implementation: handlers }], token);
    const port = await server.listen('127.0.0.1', 0);
    client = createServiceClient(FileStorageServiceService, `127.0.0.1:${port}`, 2000, token);
  });
  after(async () => {
    client.close();
    await server.stop(100);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('when the service stops taking an output file, then the sync fails within its stall bound, saying so', async () => {
    const work = path.join(dir, 'out');
    fs.mkdirSync(work);
    fs.writeFileSync(path.join(work, 'big.bin'), Buffer.alloc(8 * 1024 * 1024));
    const started = Date.now();
    await assert.rejects(syncDisk(client, 'prj_1', 'dsk_1', 'run_1', work, new Map(), { stallMs: 400 }), (err: Error) => {
      assert.ok(err instanceof DeadlineExceededError, String(err));
      assert.equal(err.message, 'The file storage stopped answering while taking big.bin (nothing moved for 400 ms)');
      return true;
    });
    assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
  });

  test('when the run is stopped during an upload, then the upload ends at once', async () => {
    const work = path.join(dir, 'stopped');
    fs.mkdirSync(work);
    fs.writeFileSync(path.join(work, 'big.bin'), Buffer.alloc(8 * 1024 * 1024));
    const ctl = new AbortController();
    const sync = syncDisk(client, 'prj_1', 'dsk_1', 'run_1', work, new Map(), { signal: ctl.signal, stallMs: 60000 });
    setTimeout(() => ctl.abort(), 200);
    const started = Date.now();
    await assert.rejects(sync, TransferStopped);
    // Far below the 60 s stall bound that would end it otherwise (a loaded machine took over 3 s).
    assert.ok(Date.now() - started < 20000, `took ${Date.now() - started} ms`);
  });

  test('when the service stops sending a disk file, then materialising fails within its stall bound', async () => {
    await assert.rejects(materializeDisk(client, 'prj_1', 'dsk_1', path.join(dir, 'in'), { stallMs: 400 }), /stopped answering while sending in\.txt/);
  });
});
