/**
 * Files shipped beside a module's source that the compiler does not copy (a script, a page's
 * HTML): the running module finds them beside itself (the sources under tsx, the image's dist/,
 * which mirrors them) or, compiled into a dist/ that lacks them (`make build`), beside its source.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** `relative` beside the module at `moduleUrl` when it is there, else beside the module's source. */
export function besideSource(moduleUrl: string, relative: string): string {
  const here = path.dirname(fileURLToPath(moduleUrl));
  const candidates = [here, here.replace(`${path.sep}dist${path.sep}`, path.sep)].map((d) => path.join(d, relative));
  return candidates.find((p) => fs.existsSync(p)) ?? candidates.at(-1)!;
}
