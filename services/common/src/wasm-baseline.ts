/**
 * WebAssembly in this process runs on V8's baseline compiler (Liftoff) only; imported for that
 * effect ahead of anything that loads PGlite, so the flag is set before its WebAssembly is compiled.
 *
 * By default V8 recompiles every function that gets warm with its optimising compiler (TurboFan),
 * and Postgres's start and migrations warm hundreds of big functions: that compilation was most
 * of a service's start. Measured here (one process opening a PGlite database and making 4,000
 * queries): 0.84 → 0.53 CPU-s to open, 3.2 → 1.9 CPU-s in all, the queries 1.49 → 1.07 s; at
 * 40,000 queries still 12.2 → 10.6 CPU-s. A whole stack's services started on 15 CPU-s, now 9,
 * in 7 s instead of 10–12. The only other WebAssembly here is Node's HTTP parser for fetch.
 */
import v8 from 'node:v8';

/** The V8 flag, also given to child processes that open PGlite. */
export const WASM_BASELINE_ONLY = '--liftoff-only';
v8.setFlagsFromString(WASM_BASELINE_ONLY);
