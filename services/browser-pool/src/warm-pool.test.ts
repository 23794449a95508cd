/**
 * The warm pool's sizing and launching with stand-in browsers (a launch is a promise the test
 * settles) and a movable clock: the target follows demand within floor and ceiling, launches stay
 * bounded, and a surplus goes once demand stops.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createLogger } from '../../common/src/logger.js';
import type { LiveBrowser } from './live-browser.js';
import { DemandRate, WarmPool, warmTarget, type WarmPoolSettings } from './warm-pool.js';

const logger = createLogger('test', 'silent');

/** A browser as the warm pool sees it; `dead` when shut down. */
function standIn(id: number) {
  let exit!: () => void;
  const exited = new Promise<void>((r) => (exit = r));
  const b = {
    id: `brw_${id}`,
    dead: false,
    get alive() {
      return !b.dead;
    },
    chromium: { exited, removed: Promise.resolve() },
    async shutdown() {
      b.dead = true;
      exit();
    },
  };
  return b;
}

/** A warm pool whose launches wait until the test finishes them. */
function pool(settings: Partial<WarmPoolSettings>) {
  let now = 0;
  let n = 0;
  const pending: { finish: () => void }[] = [];
  const browsers: ReturnType<typeof standIn>[] = [];
  let maxAtOnce = 0;
  const warm = new WarmPool({
    settings: { floor: 0, ceiling: 8, windowMs: 10_000, maxParallelLaunches: 2, ...settings },
    logger,
    now: () => now,
    launch: () =>
      new Promise<LiveBrowser>((resolve) => {
        const b = standIn(n++);
        browsers.push(b);
        pending.push({ finish: () => resolve(b as unknown as LiveBrowser) });
        maxAtOnce = Math.max(maxAtOnce, pending.length);
      }),
  });
  /** Finishes every launch started so far, after `ms` of launching; resolves once the pool has taken them. */
  const finishLaunches = async (ms = 0) => {
    now += ms;
    for (const p of pending.splice(0)) p.finish();
    await new Promise((r) => setImmediate(r));
  };
  return {
    warm,
    browsers,
    finishLaunches,
    get launching() {
      return pending.length;
    },
    get maxAtOnce() {
      return maxAtOnce;
    },
    advance: (ms: number) => (now += ms),
    arrivals: (count: number, everyMs: number) => {
      for (let i = 0; i < count; i++) {
        now += everyMs;
        warm.noteDemand();
      }
    },
  };
}

describe('the warm target', () => {
  test('when creates arrive, then the target is arrivals per second × launch seconds, within floor and ceiling', () => {
    assert.equal(warmTarget(0, 1000, { floor: 1, ceiling: 8 }), 1, 'no demand: the floor');
    assert.equal(warmTarget(3, 1000, { floor: 1, ceiling: 8 }), 3);
    assert.equal(warmTarget(3, 2000, { floor: 1, ceiling: 8 }), 6, 'slower launches need more ahead');
    assert.equal(warmTarget(2.5, 1000, { floor: 0, ceiling: 8 }), 3, 'rounded up');
    assert.equal(warmTarget(20, 1000, { floor: 1, ceiling: 8 }), 8, 'the ceiling');
    assert.equal(warmTarget(20, 1000, { floor: 3, ceiling: 2 }), 3, 'a ceiling under the floor is the floor');
  });

  test('when creates stop, then the rate decays with the window; a burst raises it at once', () => {
    const rate = new DemandRate(10_000);
    for (let t = 500; t <= 30_000; t += 500) rate.arrive(t); // 2 a second for 30 s
    assert.ok(Math.abs(rate.perSecond(30_000) - 2) < 0.2, `about 2/s (got ${rate.perSecond(30_000)})`);
    assert.ok(rate.perSecond(40_000) < 0.8, 'a window later, about a third');
    assert.ok(rate.perSecond(90_000) < 0.01, 'six windows later, none');
    for (let i = 0; i < 10; i++) rate.arrive(90_000);
    assert.ok(rate.perSecond(90_000) >= 1, 'ten at once count at once');
  });
});

describe('the warm pool', () => {
  test('when demand rises, then the pool grows toward the target, never more than the parallel launch bound at once', async () => {
    const p = pool({ floor: 1, ceiling: 6, maxParallelLaunches: 2 });
    p.warm.start();
    assert.equal(p.launching, 1, 'the floor, at start');
    await p.finishLaunches(1000);
    assert.equal(p.warm.idleCount, 1);
    p.arrivals(40, 250); // 4 a second for 10 s
    assert.ok(p.warm.target >= 3, `target ${p.warm.target}`);
    p.warm.adjust();
    const target = p.warm.target;
    while (p.warm.idleCount < target) {
      assert.ok(p.launching <= 2, `${p.launching} launches at once`);
      await p.finishLaunches(1000);
    }
    assert.equal(p.maxAtOnce, 2, 'the bound was reached and kept');
    assert.equal(p.warm.idleCount, target);
    assert.equal(p.launching, 0, 'nothing more once at the target');
    await p.warm.stop();
  });

  test('when demand stops, then the surplus is shut down down to the floor; a taken browser is replaced only up to the target', async () => {
    const p = pool({ floor: 1, ceiling: 6, maxParallelLaunches: 8 });
    p.warm.start();
    p.arrivals(40, 250);
    p.warm.adjust();
    while (p.launching) await p.finishLaunches(1000);
    const grown = p.warm.idleCount;
    assert.ok(grown >= 3, `grown to ${grown}`);
    p.advance(60_000); // six windows without a create
    p.warm.adjust();
    assert.equal(p.warm.idleCount, 1, 'back to the floor');
    assert.equal(p.browsers.filter((b) => !b.dead).length, 1, 'the surplus was shut down');
    const taken = p.warm.take();
    assert.ok(taken);
    p.warm.refill();
    assert.equal(p.launching, 1, 'one replacement for the floor');
    await p.finishLaunches(1000);
    assert.equal(p.warm.idleCount, 1);
    await p.warm.stop();
  });

  test('when a request needs a node slot, then an idle warm browser gives its own up', async () => {
    const p = pool({ floor: 2, ceiling: 2 });
    p.warm.start();
    await p.finishLaunches(1000);
    assert.equal(p.warm.idleCount, 2);
    assert.equal(p.warm.yieldOne(), true);
    assert.equal(p.warm.idleCount, 1);
    assert.equal(p.browsers.filter((b) => b.dead).length, 1);
    await p.warm.stop();
  });
});
