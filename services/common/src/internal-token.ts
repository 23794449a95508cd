/**
 * The deployment credential of internal gRPC: one token shared by every process of a
 * deployment, sent by every client as `authorization: Bearer …` and checked by every server
 * in constant time. It proves "a process of this deployment", nothing finer: the project id
 * in a request stays the caller's word, so only processes holding the token may say it.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { inspect } from 'node:util';
import type { Metadata } from '@grpc/grpc-js';
import { ConfigError } from './config.js';

/** Shortest accepted token (the generated one is 43 characters of base64url). */
export const MIN_INTERNAL_TOKEN_LENGTH = 32;
/** The metadata key the credential travels in. */
export const AUTHORIZATION_KEY = 'authorization';
/** Where the local default token is kept, under DATA_DIR (shared by every local process). */
export const INTERNAL_TOKEN_FILE_NAME = 'internal-token';

const digest = (s: string) => createHash('sha256').update(s).digest();
const newToken = () => randomBytes(32).toString('base64url');

/** Why a token is unusable, or undefined when it is fine. */
function problem(token: string): string | undefined {
  if (token.length < MIN_INTERNAL_TOKEN_LENGTH) return `must be at least ${MIN_INTERNAL_TOKEN_LENGTH} characters`;
  // It travels in an HTTP/2 header value: printable ASCII; no spaces, so `Bearer <token>` parses.
  if (!/^[\x21-\x7e]+$/.test(token)) return 'must be printable ASCII without spaces';
  return undefined;
}

/**
 * The credential, holding the token privately: it serialises as `[redacted]`, so a config
 * object or error that carries it cannot leak it into a log line.
 */
export class InternalToken {
  readonly #header: string;
  readonly #digest: Buffer;

  /** A new random credential (tests, stand-in servers). */
  static generate(): InternalToken {
    return new InternalToken(newToken());
  }

  constructor(token: string) {
    const p = problem(token);
    if (p) throw new Error(`internal token ${p}`);
    this.#header = `Bearer ${token}`;
    this.#digest = digest(this.#header);
  }

  /** Puts the credential into outgoing call metadata; returns the same metadata. */
  apply(md: Metadata): Metadata {
    md.set(AUTHORIZATION_KEY, this.#header);
    return md;
  }

  /** True when incoming metadata carries exactly this credential (compared in constant time). */
  accepts(md: Metadata): boolean {
    const values = md.get(AUTHORIZATION_KEY);
    if (values.length !== 1 || typeof values[0] !== 'string') return false;
    // Digests have one length, so neither the comparison nor its length check leaks the token.
    return timingSafeEqual(digest(values[0]), this.#digest);
  }

  toJSON(): string {
    return '[redacted]';
  }

  [inspect.custom](): string {
    return 'InternalToken [redacted]';
  }
}

/** Creates `file` (mode 0600) holding a new random token unless it exists; atomic, so processes starting together agree. */
export function generateOnce(file: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  fs.writeFileSync(tmp, `${newToken()}\n`, { mode: 0o600 });
  try {
    fs.linkSync(tmp, file); // fails with EEXIST when another process was first: its token wins
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

/** The settings that choose the token (see `commonFields`). */
export interface InternalTokenSettings {
  internalToken?: string | undefined;
  internalTokenFile?: string | undefined;
  dataDir: string;
}

/**
 * The deployment's token: INTERNAL_TOKEN, else the contents of INTERNAL_TOKEN_FILE (a mounted
 * Secret), else DATA_DIR/internal-token, generated once (mode 0600) and shared by every process
 * with the same DATA_DIR. Replicas on different machines need one of the first two.
 */
export function loadInternalToken(s: InternalTokenSettings): InternalToken {
  if (s.internalToken && s.internalTokenFile) throw new ConfigError(['set INTERNAL_TOKEN or INTERNAL_TOKEN_FILE, not both']);
  let token: string;
  let source: string;
  if (s.internalToken) {
    token = s.internalToken;
    source = 'INTERNAL_TOKEN';
  } else {
    const file = s.internalTokenFile ? path.resolve(s.internalTokenFile) : path.join(s.dataDir, INTERNAL_TOKEN_FILE_NAME);
    source = s.internalTokenFile ? 'INTERNAL_TOKEN_FILE' : `the generated ${file}`;
    if (!s.internalTokenFile) generateOnce(file);
    try {
      token = fs.readFileSync(file, 'utf8').trim();
    } catch (err) {
      throw new ConfigError([`${source}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`]);
    }
  }
  const p = problem(token);
  if (p) throw new ConfigError([`${source} ${p}`]);
  return new InternalToken(token);
}
