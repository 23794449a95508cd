import assert from 'node:assert/strict';
import os from 'node:os';
import { test } from 'node:test';
import { ConfigError, defaultInstanceId } from '../../common/src/config.js';
import { DEBIAN_CHROMIUM_BINARY, defaultChromiumPath, defaultWarmSize, loadBrowserPoolConfig, parseProxies, toWebSocketBase } from './config.js';

test('when nothing is set, then the defaults describe a local pool', () => {
  const c = loadBrowserPoolConfig({});
  assert.equal(c.chromiumPath, DEBIAN_CHROMIUM_BINARY, "Debian's binary (make deps installs chromium), not its wrapper script");
  assert.equal(c.warmSize, defaultWarmSize(os.availableParallelism(), os.totalmem()));
  assert.equal(c.maxActivePerProject, 10);
  assert.equal(c.cdpPort, 9222);
  assert.equal(c.cdpWsBase, 'ws://localhost:9222');
  assert.equal(c.proxies.size, 0);
  assert.deepEqual(c.chromiumArgs, []);
});

test('when Debian\'s Chromium binary is not installed, then CHROMIUM_PATH defaults to /usr/bin/chromium', () => {
  assert.equal(defaultChromiumPath(() => false), '/usr/bin/chromium');
  assert.equal(defaultChromiumPath((f) => f === DEBIAN_CHROMIUM_BINARY), DEBIAN_CHROMIUM_BINARY);
  assert.equal(loadBrowserPoolConfig({ CHROMIUM_PATH: '/opt/chrome/chrome' }).chromiumPath, '/opt/chrome/chrome');
});

test('when the machine is small (2 cores or fewer, or under 8 GiB), then one warm browser is kept by default, else two; POOL_WARM_SIZE still wins', () => {
  const GiB = 2 ** 30;
  assert.equal(defaultWarmSize(2, 64 * GiB), 1);
  assert.equal(defaultWarmSize(8, 4 * GiB), 1);
  assert.equal(defaultWarmSize(4, 8 * GiB), 2);
  assert.equal(loadBrowserPoolConfig({ POOL_WARM_SIZE: '3' }).warmSize, 3);
});

test('when the CDP public URL is http or https, then cdpUrl uses ws or wss on the same host', () => {
  assert.equal(toWebSocketBase('http://localhost:9222'), 'ws://localhost:9222');
  assert.equal(toWebSocketBase('https://cdp.example.com/'), 'wss://cdp.example.com');
  assert.equal(loadBrowserPoolConfig({ CDP_PUBLIC_URL: 'https://cdp.example.com' }).cdpWsBase, 'wss://cdp.example.com');
});

test('when proxies come from PROXIES and PROXY_<CC>, then each country maps to its URL', () => {
  const p = parseProxies('{"DE":"http://user:p%40ss@proxy.example:3128","fr":"socks5://10.0.0.1:1080"}', { PROXY_US: 'http://us.example:8080', OTHER: 'x' });
  assert.deepEqual([...p.keys()].sort(), ['de', 'fr', 'us']);
  assert.equal(p.get('de')!.password, 'p%40ss');
  assert.equal(p.get('fr')!.protocol, 'socks5:');
});

test('when a proxy is malformed, then the error names the variable and the country', () => {
  assert.throws(() => parseProxies('not json', {}), (e: unknown) => e instanceof ConfigError && /PROXIES must be a JSON object/.test(e.message));
  assert.throws(() => parseProxies(undefined, { PROXY_DE: 'ftp://x:21' }), (e: unknown) => e instanceof ConfigError && /PROXY_DE: the proxy of de must be/.test(e.message));
  assert.throws(() => parseProxies('{"germany":"http://x:1"}', {}), (e: unknown) => e instanceof ConfigError && /"germany" is not a two-letter/.test(e.message));
  assert.throws(() => parseProxies('{"de":"socks5://u:p@x:1"}', {}), (e: unknown) => e instanceof ConfigError && /credentials/.test(e.message));
});

test('when a number is out of range, then the variable is named', () => {
  assert.throws(() => loadBrowserPoolConfig({ POOL_WARM_SIZE: '-1', MAX_ACTIVE_BROWSERS_PER_PROJECT: 'lots' }), (e: unknown) => {
    assert.ok(e instanceof ConfigError);
    assert.match(e.message, /POOL_WARM_SIZE/);
    assert.match(e.message, /MAX_ACTIVE_BROWSERS_PER_PROJECT/);
    return true;
  });
});

test("when the services' addresses are configured (host:port, dns:///host:port or a list of replicas), then browsers are denied every internal port, wherever the service runs", () => {
  const c = loadBrowserPoolConfig({
    DATABASE_URL: 'postgres://u:p@db.internal:6543/ats',
    NATS_URL: 'nats://nats:4333',
    FILE_STORAGE_SERVICE_ADDR: 'dns:///files:7000',
    LIVE_VIEW_SERVICE_ADDR: 'ipv4:10.0.0.5:50054,10.0.0.6:50055',
    CDP_PORT: '9333',
    BROWSER_DENIED_PORTS: '8125, 9000',
  });
  for (const p of [50051, 50052, 50053, 50054, 50055, 4222, 5432, 6543, 4333, 7000, 9333, 8125, 9000]) assert.ok(c.egress.deniedLocalPorts.includes(p), `port ${p}`);
  assert.deepEqual(
    c.egress.deniedEndpoints.map((e) => `${e.host}:${e.port}`).sort(),
    ['10.0.0.5:50054', '10.0.0.6:50055', 'db.internal:6543', 'files:7000', 'nats:4333'].sort(),
  );
  assert.equal(c.egress.allowPrivateNetworks, true, 'loopback and private networks are reachable by default (local development)');
  assert.equal(loadBrowserPoolConfig({ BROWSER_ALLOW_PRIVATE_NETWORKS: 'false' }).egress.allowPrivateNetworks, false);
  assert.throws(() => loadBrowserPoolConfig({ BROWSER_DENIED_PORTS: '80,http' }), (e: unknown) => e instanceof ConfigError && /BROWSER_DENIED_PORTS/.test(e.message));
});

test('when the replica settings are unset, then the instance is named after the host and its data directory, reached on loopback, and drains for half the shutdown time', () => {
  const c = loadBrowserPoolConfig({ SHUTDOWN_TIMEOUT_MS: '30000', DATA_DIR: '/srv/a' });
  assert.equal(c.instanceId, defaultInstanceId('/srv/a'));
  assert.notEqual(loadBrowserPoolConfig({ DATA_DIR: '/srv/b' }).instanceId, c.instanceId, 'another stack on this host, another id');
  assert.equal(loadBrowserPoolConfig({ DATA_DIR: '/srv/b', POOL_INSTANCE_ID: 'pool-0' }).instanceId, 'pool-0', 'a setting wins');
  assert.equal(c.advertiseGrpcAddr, undefined, 'main.ts advertises 127.0.0.1:<bound port>');
  assert.equal(c.advertiseCdpUrl, undefined);
  assert.equal(c.heartbeatIntervalMs, 5000);
  assert.equal(c.heartbeatTimeoutMs, 20000);
  assert.equal(c.drainTimeoutMs, 15000);
  const k8s = loadBrowserPoolConfig({ POOL_INSTANCE_ID: 'browser-pool-1', POOL_ADVERTISE_GRPC_ADDR: '10.1.2.3:50052', POOL_ADVERTISE_CDP_URL: 'http://10.1.2.3:9222', POOL_DRAIN_TIMEOUT_MS: '0' });
  assert.equal(k8s.instanceId, 'browser-pool-1');
  assert.equal(k8s.advertiseGrpcAddr, '10.1.2.3:50052');
  assert.equal(k8s.advertiseCdpUrl, 'ws://10.1.2.3:9222');
  assert.equal(k8s.drainTimeoutMs, 0);
});

test('when the replica settings contradict each other or are malformed, then every variable at fault is named', () => {
  assert.throws(
    () => loadBrowserPoolConfig({ POOL_INSTANCE_ID: 'pod one', POOL_ADVERTISE_GRPC_ADDR: 'ipv4:10.0.0.1:1,10.0.0.2:1', POOL_HEARTBEAT_INTERVAL_MS: '5000', POOL_HEARTBEAT_TIMEOUT_MS: '6000', SHUTDOWN_TIMEOUT_MS: '10000', POOL_DRAIN_TIMEOUT_MS: '10000' }),
    (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      assert.deepEqual(e.problems.map((p) => p.split(' ')[0]), ['POOL_INSTANCE_ID', 'POOL_ADVERTISE_GRPC_ADDR', 'POOL_HEARTBEAT_TIMEOUT_MS', 'POOL_DRAIN_TIMEOUT_MS']);
      return true;
    },
  );
  assert.throws(() => loadBrowserPoolConfig({ POOL_ADVERTISE_CDP_URL: 'tcp://10.0.0.1:9222' }), (e: unknown) => e instanceof ConfigError && /POOL_ADVERTISE_CDP_URL/.test(e.message));
});

test('when the warm pool and node capacity are not set, then the warm pool follows demand from its floor (by the machine) up to two per core (at most 8), and the node takes a browser per 256 MiB', () => {
  const c = loadBrowserPoolConfig({}, 8 * 1024 ** 3, 2);
  assert.deepEqual([c.warmSize, c.warmMax, c.warmWindowSeconds, c.warmParallelLaunches, c.maxBrowsers], [defaultWarmSize(os.availableParallelism(), os.totalmem()), 4, 30, 2, 32]);
  assert.equal(loadBrowserPoolConfig({}, 8 * 1024 ** 3, 16).warmMax, 8, 'at most 8 on a big machine');
  assert.equal(loadBrowserPoolConfig({}, 512 * 1024 ** 2).maxBrowsers, 4, 'at least 4 on a small machine');
  const set = loadBrowserPoolConfig({ POOL_WARM_SIZE: '1', POOL_WARM_MAX: '3', POOL_WARM_WINDOW_SECONDS: '5', POOL_WARM_PARALLEL_LAUNCHES: '1', POOL_MAX_BROWSERS: '6' });
  assert.deepEqual([set.warmSize, set.warmMax, set.warmWindowSeconds, set.warmParallelLaunches, set.maxBrowsers], [1, 3, 5, 1, 6]);
  assert.equal(loadBrowserPoolConfig({ POOL_WARM_SIZE: '12' }).warmMax, 12, 'the default ceiling is never under the floor');
});

test('when the warm ceiling is under its floor or a capacity is out of range, then the variable is named', () => {
  assert.throws(() => loadBrowserPoolConfig({ POOL_WARM_SIZE: '4', POOL_WARM_MAX: '2' }), (e: unknown) => e instanceof ConfigError && /POOL_WARM_MAX must be at least POOL_WARM_SIZE/.test(e.message));
  for (const [name, value] of [['POOL_MAX_BROWSERS', '0'], ['POOL_WARM_PARALLEL_LAUNCHES', '0'], ['POOL_WARM_WINDOW_SECONDS', 'soon'], ['POOL_WARM_MAX', '65']]) {
    assert.throws(() => loadBrowserPoolConfig({ [name!]: value }), (e: unknown) => e instanceof ConfigError && e.message.includes(name!), name);
  }
});
