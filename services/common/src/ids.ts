import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

/** Id prefixes per resource type (DESIGN §2). */
export type IdPrefix = 'run' | 'ses' | 'brw' | 'file' | 'wsp' | 'prf' | 'dsk' | 'prj' | 'key' | 'wh' | 'evt' | 'dlv';

/** An unguessable id: prefix + 24 base-36 characters (~124 bits). */
export function newId(prefix: IdPrefix): string {
  const bytes = randomBytes(24);
  let s = '';
  for (const b of bytes) s += ALPHABET[b % 36];
  return `${prefix}_${s}`;
}
