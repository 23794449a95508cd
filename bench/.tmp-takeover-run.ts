import { takeoverBench } from '/work/wt-25r/bench/takeover.bench.ts';
const t = await takeoverBench({ rounds: 8, mode: 'tsx' });
console.log(JSON.stringify(t, null, 1));
