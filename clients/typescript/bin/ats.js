#!/usr/bin/env node
// The `ats` command line; its code is compiled to dist/ by `make build` (or `npm run build` here).
import('../dist/cli.js').then((m) => m.main(process.argv.slice(2))).then(
  (code) => process.exit(code ?? 0),
  (err) => {
    process.stderr.write(`ats: ${err?.message ?? err}\n`);
    process.exit(2);
  },
);
