/**
 * Validates the Kubernetes manifests and the Dockerfile under deploy/ without a cluster:
 * every file parses, kustomizations are complete, workloads are probed, bounded and
 * hardened, and the names that tie the pieces together (Services, ports, Secrets, public
 * hosts) agree with each other.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import YAML from 'yaml';
import { gatewayConfigSpec } from '../gateway/src/config.js';
import { browserPoolConfigSpec } from '../services/browser-pool/src/config.js';
import { fileStorageConfigSpec } from '../services/file-storage/src/config.js';
import { liveViewConfigSpec } from '../services/live-view/src/config.js';
import { runConfigSpec } from '../services/run/src/config.js';

const DEPLOY_DIR = fileURLToPath(new URL('../deploy/', import.meta.url));
const BASE_DIR = path.join(DEPLOY_DIR, 'base');
const DEV_DIR = path.join(DEPLOY_DIR, 'overlays', 'dev');
const PROD_DIR = path.join(DEPLOY_DIR, 'overlays', 'production');
const TSCONFIG = fileURLToPath(new URL('../tsconfig.json', import.meta.url));

const APP_IMAGE = 'agent-task-service';
const APP_UID = 10001;
const SECRET_NAME = 'agent-task-service-secrets';
const SECRET_VARS = ['DATABASE_URL', 'SIGNING_SECRET', 'INTERNAL_TOKEN', 'NATS_TOKEN', 'BOOTSTRAP_API_KEY'];
/** Required of every component; NATS_TOKEN is required of those that use NATS (see below). */
const REQUIRED_SECRET_VARS = ['DATABASE_URL', 'SIGNING_SECRET', 'INTERNAL_TOKEN'];
const LABEL_NAME = 'app.kubernetes.io/name';
const LABEL_PART_OF = 'app.kubernetes.io/part-of';
const WORKLOAD_KINDS = new Set(['Deployment', 'StatefulSet', 'DaemonSet']);

/** The service each *_SERVICE_ADDR variable must point at. */
const ADDRESS_TARGETS: Record<string, { service: string; port: number }> = {
  RUN_SERVICE_ADDR: { service: 'run', port: 50051 },
  BROWSER_POOL_SERVICE_ADDR: { service: 'browser-pool', port: 50052 },
  FILE_STORAGE_SERVICE_ADDR: { service: 'file-storage', port: 50053 },
  LIVE_VIEW_SERVICE_ADDR: { service: 'live-view', port: 50054 },
};

interface Component {
  kind: 'Deployment' | 'StatefulSet';
  /** TypeScript entry point; the container runs its compiled output. */
  source: string;
  /** gRPC port probed with grpc.health.v1; undefined for the HTTP-only gateway. */
  grpcPort?: number;
  /** Port variables the process reads, with the port each must be. */
  portVars: Record<string, number>;
  /** The addresses of the services it calls. */
  needs: string[];
}

const COMPONENTS: Record<string, Component> = {
  gateway: {
    kind: 'Deployment',
    source: 'gateway/src/main.ts',
    portVars: { PORT: 8080 },
    needs: ['RUN_SERVICE_ADDR', 'BROWSER_POOL_SERVICE_ADDR', 'FILE_STORAGE_SERVICE_ADDR', 'LIVE_VIEW_SERVICE_ADDR'],
  },
  run: {
    kind: 'Deployment',
    source: 'services/run/src/main.ts',
    grpcPort: 50051,
    portVars: { GRPC_PORT: 50051 },
    needs: ['BROWSER_POOL_SERVICE_ADDR', 'FILE_STORAGE_SERVICE_ADDR', 'LIVE_VIEW_SERVICE_ADDR'],
  },
  'browser-pool': {
    kind: 'Deployment',
    source: 'services/browser-pool/src/main.ts',
    grpcPort: 50052,
    portVars: { GRPC_PORT: 50052, CDP_PORT: 9222 },
    needs: ['FILE_STORAGE_SERVICE_ADDR', 'LIVE_VIEW_SERVICE_ADDR'],
  },
  'file-storage': {
    kind: 'StatefulSet',
    source: 'services/file-storage/src/main.ts',
    grpcPort: 50053,
    portVars: { GRPC_PORT: 50053, FILES_HTTP_PORT: 8081 },
    needs: [],
  },
  'live-view': {
    kind: 'Deployment',
    source: 'services/live-view/src/main.ts',
    grpcPort: 50054,
    portVars: { GRPC_PORT: 50054, LIVE_VIEW_HTTP_PORT: 8082 },
    needs: ['BROWSER_POOL_SERVICE_ADDR', 'FILE_STORAGE_SERVICE_ADDR'],
  },
};

/** Public URLs and where the Ingress must send their host. */
const PUBLIC_URLS: Record<string, { service: string; port: number; schemes: [secure: string, plain: string] }> = {
  FILES_PUBLIC_URL: { service: 'file-storage', port: 8081, schemes: ['https:', 'http:'] },
  LIVE_VIEW_BASE_URL: { service: 'live-view', port: 8082, schemes: ['https:', 'http:'] },
  CDP_PUBLIC_URL: { service: 'browser-pool', port: 9222, schemes: ['wss:', 'ws:'] },
};

// ---------------------------------------------------------------------------------------
// Loading

type Json = any;

interface K8s {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: Json;
}

interface Loaded {
  /** Path relative to deploy/. */
  file: string;
  obj: K8s;
}

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    return entry.isDirectory() ? walk(full) : [full];
  });
}

function rel(file: string): string {
  return path.relative(DEPLOY_DIR, file);
}

/** Every document of a YAML file; fails on the first syntax error, naming the file. */
function parseYaml(file: string): Json[] {
  const docs = YAML.parseAllDocuments(readFileSync(file, 'utf8'));
  const list = Array.isArray(docs) ? docs : [docs];
  for (const doc of list) {
    assert.deepEqual(doc.errors.map((e) => e.message), [], `${rel(file)} does not parse`);
  }
  return list.map((doc) => doc.toJS()).filter((value) => value !== null && value !== undefined);
}

const yamlFiles = walk(DEPLOY_DIR).filter((f) => /\.ya?ml$/.test(f));
const isKustomization = (file: string) => path.basename(file) === 'kustomization.yaml';
const manifestFiles = yamlFiles.filter((f) => !isKustomization(f));

/** Every Kubernetes object in every manifest file under deploy/ (base and overlays). */
function allObjects(): Loaded[] {
  return manifestFiles.flatMap((file) => parseYaml(file).map((obj: K8s) => ({ file: rel(file), obj })));
}

function kustomization(dir: string): Json {
  const [doc] = parseYaml(path.join(dir, 'kustomization.yaml'));
  return doc;
}

function objectsIn(file: string): K8s[] {
  return parseYaml(file) as K8s[];
}

/** Applies RFC 6902 operations (add, replace, remove) the way kustomize does: a path that does not exist is an error. */
function applyJsonPatch(target: Json, ops: Json[], where: string): void {
  for (const op of ops) {
    const tokens = String(op.path)
      .split('/')
      .slice(1)
      .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = tokens.pop();
    assert.ok(last !== undefined, `${where}: empty patch path`);
    let parent = target;
    for (const token of tokens) {
      parent = Array.isArray(parent) ? parent[Number(token)] : parent?.[token];
      assert.ok(parent !== undefined && parent !== null, `${where}: path ${op.path} does not exist`);
    }
    if (Array.isArray(parent)) {
      const index = last === '-' ? parent.length : Number(last);
      if (op.op === 'add') parent.splice(index, 0, op.value);
      else {
        assert.ok(index < parent.length, `${where}: path ${op.path} does not exist`);
        if (op.op === 'replace') parent[index] = op.value;
        else if (op.op === 'remove') parent.splice(index, 1);
        else assert.fail(`${where}: unsupported op ${op.op}`);
      }
    } else {
      if (op.op !== 'add') assert.ok(last in parent, `${where}: path ${op.path} does not exist`);
      if (op.op === 'add' || op.op === 'replace') parent[last] = op.value;
      else if (op.op === 'remove') delete parent[last];
      else assert.fail(`${where}: unsupported op ${op.op}`);
    }
  }
}

/**
 * Builds a kustomization the way `kubectl kustomize` would for the features these
 * manifests use: nested resources, inline JSON 6902 patches with a kind/name target, and
 * replicas. Fails when a patch or replica count names an object that is not there.
 */
function build(dir: string): K8s[] {
  const k = kustomization(dir);
  const objects: K8s[] = [];
  for (const entry of (k.resources ?? []) as string[]) {
    const target = path.join(dir, entry);
    if (statSync(target).isDirectory()) objects.push(...build(target));
    else objects.push(...objectsIn(target));
  }
  const out = structuredClone(objects);
  for (const patch of (k.patches ?? []) as Json[]) {
    const where = `${rel(dir)}: patch on ${patch.target?.kind}/${patch.target?.name}`;
    assert.equal(typeof patch.patch, 'string', `${where}: only inline JSON 6902 patches are understood by this test`);
    const matches = out.filter((o) => o.kind === patch.target.kind && o.metadata.name === patch.target.name);
    assert.equal(matches.length, 1, `${where}: target must match exactly one object`);
    applyJsonPatch(matches[0], YAML.parse(patch.patch), where);
  }
  for (const r of (k.replicas ?? []) as Json[]) {
    const matches = out.filter((o) => WORKLOAD_KINDS.has(o.kind) && o.metadata.name === r.name);
    assert.equal(matches.length, 1, `${rel(dir)}: replicas names ${r.name}, which is no workload`);
    matches[0].spec.replicas = r.count;
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Helpers over objects

function podSpec(workload: K8s): Json {
  return workload.spec.template.spec;
}

function containersOf(workload: K8s): Json[] {
  const spec = podSpec(workload);
  return [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
}

function isAppContainer(container: Json): boolean {
  return String(container.image).split(':')[0] === APP_IMAGE;
}

function find(objects: K8s[], kind: string, name: string): K8s | undefined {
  return objects.find((o) => o.kind === kind && o.metadata.name === name);
}

/** A variable's literal value in a container, from `env` or from a ConfigMap in `envFrom`. */
function envValue(container: Json, name: string, objects: K8s[]): string | undefined {
  const direct = (container.env ?? []).find((e: Json) => e.name === name);
  if (direct) return direct.value;
  for (const source of container.envFrom ?? []) {
    const cmName = source.configMapRef?.name;
    const cm = cmName ? find(objects, 'ConfigMap', cmName) : undefined;
    if (cm?.data && name in cm.data) return String(cm.data[name]);
  }
  return undefined;
}

/** Resolves a named or numbered port of a container to its number. */
function containerPortNumber(container: Json, port: number | string): number | undefined {
  if (typeof port === 'number') return (container.ports ?? []).some((p: Json) => p.containerPort === port) ? port : undefined;
  return (container.ports ?? []).find((p: Json) => p.name === port)?.containerPort;
}

function servicePort(service: K8s, port: Json): Json | undefined {
  return (service.spec.ports ?? []).find((p: Json) => (port.name !== undefined ? p.name === port.name : p.port === port.number));
}

function cpu(quantity: string | number): number {
  const m = /^(\d+(?:\.\d+)?)(m?)$/.exec(String(quantity));
  assert.ok(m, `bad CPU quantity ${quantity}`);
  return Number(m[1]) / (m[2] ? 1000 : 1);
}

function bytes(quantity: string | number): number {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(String(quantity));
  assert.ok(m, `bad memory quantity ${quantity}`);
  const unit: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  return Number(m[1]) * (m[2] ? unit[m[2]] : 1);
}

/** The `node <file>` a container runs, given that ENTRYPOINT (tini) stays in place. */
function entryFile(container: Json): string | undefined {
  const args: string[] = container.args ?? [];
  return args[0] === 'node' ? args[1] : undefined;
}

/** Where tsc writes the compiled form of a source file, per tsconfig's rootDir and outDir. */
function compiledPath(source: string): string {
  const { config, error } = ts.readConfigFile(TSCONFIG, ts.sys.readFile);
  assert.equal(error, undefined, 'tsconfig.json does not parse');
  const rootDir: string = config.compilerOptions.rootDir ?? '.';
  const outDir: string = config.compilerOptions.outDir;
  return path.posix.join(outDir, path.posix.relative(rootDir, source)).replace(/\.ts$/, '.js');
}

const baseObjects = () => build(BASE_DIR);
const workloads = (objects: Loaded[]) => objects.filter((l) => WORKLOAD_KINDS.has(l.obj.kind));

// ---------------------------------------------------------------------------------------
// Files and kustomizations

test('when any YAML file under deploy/ is parsed, then it parses and every object names its apiVersion, kind and name', () => {
  assert.ok(manifestFiles.length >= 10, `expected the base and overlay manifests, found ${manifestFiles.length}`);
  for (const file of yamlFiles) {
    const docs = parseYaml(file);
    assert.ok(docs.length > 0, `${rel(file)} is empty`);
    for (const doc of docs) {
      if (isKustomization(file)) {
        assert.equal(doc.kind, 'Kustomization', `${rel(file)}: kind`);
        assert.equal(doc.apiVersion, 'kustomize.config.k8s.io/v1beta1', `${rel(file)}: apiVersion`);
        continue;
      }
      assert.equal(typeof doc.apiVersion, 'string', `${rel(file)}: apiVersion`);
      assert.equal(typeof doc.kind, 'string', `${rel(file)}: kind`);
      assert.match(doc.metadata?.name ?? '', /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, `${rel(file)}: metadata.name of ${doc.kind}`);
    }
  }
});

test('when a kustomization lists resources, then each exists and every YAML file beside it is listed', () => {
  const kustomizations = yamlFiles.filter(isKustomization);
  assert.deepEqual(
    kustomizations.map(rel).sort(),
    ['base/kustomization.yaml', 'overlays/dev/kustomization.yaml', 'overlays/production/kustomization.yaml'],
  );
  for (const file of kustomizations) {
    const dir = path.dirname(file);
    const resources: string[] = kustomization(dir).resources ?? [];
    for (const entry of resources) {
      const target = path.join(dir, entry);
      assert.ok(existsSync(target), `${rel(file)} lists ${entry}, which does not exist`);
      if (statSync(target).isDirectory()) {
        assert.ok(existsSync(path.join(target, 'kustomization.yaml')), `${rel(file)}: ${entry} has no kustomization.yaml`);
      }
    }
    const siblings = readdirSync(dir).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml');
    for (const sibling of siblings) {
      assert.ok(resources.includes(sibling), `${rel(file)} does not list ${sibling}`);
    }
  }
  assert.ok(kustomization(DEV_DIR).resources.includes('../../base'), 'dev builds on the base');
  assert.ok(kustomization(PROD_DIR).resources.includes('../../base'), 'production builds on the base');
});

test('when the base is built, then it is namespace-less, holds no Secret and no two objects share a kind and name', () => {
  const objects = baseObjects();
  const keys = objects.map((o) => `${o.kind}/${o.metadata.name}`);
  assert.deepEqual(keys.filter((k, i) => keys.indexOf(k) !== i), [], 'duplicate objects');
  assert.deepEqual(objects.filter((o) => o.metadata.namespace).map((o) => `${o.kind}/${o.metadata.name}`), []);
  assert.deepEqual(objects.filter((o) => o.kind === 'Secret').map((o) => o.metadata.name), []);
  for (const [name, component] of Object.entries(COMPONENTS)) {
    assert.ok(find(objects, component.kind, name), `base defines ${component.kind} ${name}`);
  }
  assert.ok(find(objects, 'StatefulSet', 'nats'), 'base defines StatefulSet nats');
});

test('when an object is defined, then it carries the app.kubernetes.io name and part-of labels', () => {
  const missing = allObjects()
    .filter(({ obj }) => {
      const labels = obj.metadata.labels ?? {};
      const needsName = obj.kind !== 'Namespace';
      return labels[LABEL_PART_OF] !== 'agent-task-service' || (needsName && !labels[LABEL_NAME]);
    })
    .map(({ file, obj }) => `${file}: ${obj.kind}/${obj.metadata.name}`);
  assert.deepEqual(missing, []);
});

test('when the base names the app image, then its images entry pins a tag and every overlay retags the same image', () => {
  const images = kustomization(BASE_DIR).images ?? [];
  const used = new Set(
    baseObjects()
      .filter((o) => WORKLOAD_KINDS.has(o.kind))
      .flatMap((o) => containersOf(o).map((c) => String(c.image).split(':')[0])),
  );
  assert.ok(used.has(APP_IMAGE));
  const entry = images.find((i: Json) => i.name === APP_IMAGE);
  assert.ok(entry?.newTag && entry.newTag !== 'latest', 'base pins a tag for the app image');
  for (const dir of [DEV_DIR, PROD_DIR]) {
    for (const image of kustomization(dir).images ?? []) {
      assert.ok(used.has(image.name), `${rel(dir)} retags ${image.name}, which no container uses`);
    }
  }
});

// ---------------------------------------------------------------------------------------
// Workloads

test('when a workload runs, then liveness and readiness probe it: gRPC health for the services, /livez and /healthz for the gateway', () => {
  const objects = allObjects();
  for (const { file, obj } of workloads(objects)) {
    for (const c of podSpec(obj).containers) {
      assert.ok(c.livenessProbe, `${file}: ${c.name} has a livenessProbe`);
      assert.ok(c.readinessProbe, `${file}: ${c.name} has a readinessProbe`);
      for (const probe of [c.startupProbe, c.livenessProbe, c.readinessProbe].filter(Boolean)) {
        const port = probe.grpc?.port ?? probe.httpGet?.port ?? probe.tcpSocket?.port;
        if (port !== undefined) {
          assert.ok(containerPortNumber(c, port) !== undefined, `${file}: ${c.name} probes port ${port}, which it does not expose`);
        }
      }
    }
  }
  for (const [name, component] of Object.entries(COMPONENTS)) {
    const workload = find(objects.map((l) => l.obj), component.kind, name);
    assert.ok(workload, `${component.kind} ${name}`);
    const [c] = podSpec(workload).containers;
    if (component.grpcPort !== undefined) {
      for (const probe of [c.livenessProbe, c.readinessProbe]) {
        assert.deepEqual(probe.grpc, { port: component.grpcPort }, `${name}: probes gRPC health on ${component.grpcPort}`);
      }
    } else {
      assert.equal(c.livenessProbe.httpGet?.path, '/livez', `${name}: liveness must not depend on downstreams`);
      assert.equal(c.readinessProbe.httpGet?.path, '/healthz', `${name}: readiness reports downstream health`);
      for (const probe of [c.livenessProbe, c.readinessProbe]) {
        assert.equal(containerPortNumber(c, probe.httpGet.port), component.portVars.PORT);
      }
    }
  }
});

test('when a container is scheduled, then it requests and limits CPU and memory, with requests within limits', () => {
  const problems: string[] = [];
  for (const { file, obj } of workloads(allObjects())) {
    for (const c of containersOf(obj)) {
      const { requests = {}, limits = {} } = c.resources ?? {};
      for (const r of ['cpu', 'memory']) {
        if (requests[r] === undefined || limits[r] === undefined) {
          problems.push(`${file}: ${c.name} lacks ${r} request or limit`);
          continue;
        }
        const measure = r === 'cpu' ? cpu : bytes;
        if (measure(requests[r]) > measure(limits[r])) problems.push(`${file}: ${c.name} requests more ${r} than its limit`);
      }
    }
  }
  assert.deepEqual(problems, []);
  const browserPool = find(baseObjects(), 'Deployment', 'browser-pool');
  assert.ok(browserPool);
  const [chromium] = podSpec(browserPool).containers;
  assert.ok(bytes(chromium.resources.requests.memory) >= bytes('1Gi'), 'Chromium needs at least 1Gi');
});

test('when a pod starts, then it runs hardened: non-root, RuntimeDefault seccomp (the browser pool: user namespaces allowed), no escalation, read-only root, no capabilities, no token', () => {
  const problems: string[] = [];
  for (const { file, obj } of workloads(allObjects())) {
    const spec = podSpec(obj);
    const where = `${file}: ${obj.kind}/${obj.metadata.name}`;
    const pod = spec.securityContext ?? {};
    if (pod.runAsNonRoot !== true) problems.push(`${where}: pod runAsNonRoot`);
    if (!(Number.isInteger(pod.runAsUser) && pod.runAsUser > 0)) problems.push(`${where}: pod runAsUser must be a non-zero uid`);
    // The browser pool makes each browser's namespaces inside a user namespace, which RuntimeDefault refuses.
    const seccomp = obj.metadata.name === 'browser-pool' ? ['Unconfined', 'Localhost'] : ['RuntimeDefault'];
    if (!seccomp.includes(pod.seccompProfile?.type)) problems.push(`${where}: pod seccompProfile ${seccomp.join(' or ')}`);
    if (spec.automountServiceAccountToken !== false) problems.push(`${where}: automountServiceAccountToken false`);
    if (spec.hostNetwork || spec.hostPID || spec.hostIPC) problems.push(`${where}: shares a host namespace`);
    const volumes = new Set([
      ...(spec.volumes ?? []).map((v: Json) => v.name),
      ...(obj.spec.volumeClaimTemplates ?? []).map((v: Json) => v.metadata.name),
    ]);
    for (const v of spec.volumes ?? []) if (v.hostPath) problems.push(`${where}: hostPath volume ${v.name}`);
    for (const c of containersOf(obj)) {
      const sc = c.securityContext ?? {};
      const at = `${where} container ${c.name}`;
      if (sc.runAsNonRoot !== true) problems.push(`${at}: runAsNonRoot`);
      if (sc.runAsUser !== undefined && sc.runAsUser === 0) problems.push(`${at}: runAsUser 0`);
      if (sc.allowPrivilegeEscalation !== false) problems.push(`${at}: allowPrivilegeEscalation false`);
      if (sc.readOnlyRootFilesystem !== true) problems.push(`${at}: readOnlyRootFilesystem true`);
      if (!(sc.capabilities?.drop ?? []).includes('ALL')) problems.push(`${at}: capabilities.drop ALL`);
      if ((sc.capabilities?.add ?? []).length) problems.push(`${at}: adds capabilities`);
      if (sc.privileged) problems.push(`${at}: privileged`);
      for (const m of c.volumeMounts ?? []) {
        if (!volumes.has(m.name)) problems.push(`${at}: mounts undeclared volume ${m.name}`);
      }
      if (isAppContainer(c)) {
        if ((sc.runAsUser ?? pod.runAsUser) !== APP_UID) problems.push(`${at}: the app image runs as uid ${APP_UID}`);
        // A read-only root needs a writable /tmp (Node, Chromium, ffmpeg all use it).
        const tmp = (c.volumeMounts ?? []).find((m: Json) => m.mountPath === '/tmp');
        const tmpVolume = (spec.volumes ?? []).find((v: Json) => v.name === tmp?.name);
        if (!tmpVolume?.emptyDir) problems.push(`${at}: /tmp on an emptyDir`);
      }
    }
  }
  assert.deepEqual(problems, []);
  const browserPool = find(baseObjects(), 'Deployment', 'browser-pool');
  assert.ok(browserPool);
  const shm = podSpec(browserPool).containers[0].volumeMounts.find((m: Json) => m.mountPath === '/dev/shm');
  const shmVolume = podSpec(browserPool).volumes.find((v: Json) => v.name === shm?.name);
  assert.equal(shmVolume?.emptyDir?.medium, 'Memory', 'Chromium gets a memory-backed /dev/shm');
});

test('when a pod is stopped, then its grace period is at least 30 s and outlasts the preStop pause plus SHUTDOWN_TIMEOUT_MS', () => {
  const all = allObjects();
  const objects = [...baseObjects(), ...all.map((l) => l.obj)];
  for (const { file, obj } of workloads(all)) {
    const grace = podSpec(obj).terminationGracePeriodSeconds;
    assert.ok(Number.isInteger(grace) && grace >= 30, `${file}: ${obj.metadata.name} terminationGracePeriodSeconds ≥ 30`);
    for (const c of podSpec(obj).containers.filter(isAppContainer)) {
      const timeout = Number(envValue(c, 'SHUTDOWN_TIMEOUT_MS', objects));
      assert.ok(Number.isInteger(timeout) && timeout > 0, `${file}: ${c.name} sets SHUTDOWN_TIMEOUT_MS`);
      const command: string[] = c.lifecycle?.preStop?.exec?.command ?? [];
      const pause = command[0] === 'sleep' ? Number(command[1]) : (c.lifecycle?.preStop?.sleep?.seconds ?? 0);
      assert.ok(pause * 1000 + timeout < grace * 1000, `${file}: ${c.name} could be killed mid-shutdown`);
    }
  }
});

test('when a workload is defined, then its file also defines its ServiceAccount and a Service that selects its pods and exposes every containerPort', () => {
  const all = allObjects();
  for (const { file, obj } of workloads(all)) {
    const sameFile = all.filter((l) => l.file === file).map((l) => l.obj);
    const where = `${file}: ${obj.kind}/${obj.metadata.name}`;
    const spec = podSpec(obj);
    const podLabels: Record<string, string> = obj.spec.template.metadata.labels ?? {};
    for (const label of [LABEL_NAME, LABEL_PART_OF]) assert.ok(podLabels[label], `${where}: pod label ${label}`);
    for (const [k, v] of Object.entries(obj.spec.selector.matchLabels ?? {})) {
      assert.equal(podLabels[k], v, `${where}: selector ${k} must match the pod template`);
    }

    const sa = find(sameFile, 'ServiceAccount', spec.serviceAccountName);
    assert.ok(sa, `${where}: ServiceAccount ${spec.serviceAccountName} is defined in the same file`);
    assert.equal(sa.automountServiceAccountToken, false, `${where}: ServiceAccount does not mount a token`);

    const services = sameFile.filter((o) => o.kind === 'Service');
    const selecting = services.filter((s) => {
      const selector: Record<string, string> = s.spec.selector ?? {};
      return Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => podLabels[k] === v);
    });
    assert.equal(selecting.length, 1, `${where}: exactly one Service in the file selects its pods`);
    const [service] = selecting;
    if (obj.kind === 'StatefulSet') assert.equal(obj.spec.serviceName, service.metadata.name, `${where}: serviceName`);
    for (const c of spec.containers) {
      for (const p of c.ports ?? []) {
        const exposed = service.spec.ports.find(
          (sp: Json) => sp.targetPort === p.name || sp.targetPort === p.containerPort || (sp.targetPort === undefined && sp.port === p.containerPort),
        );
        assert.ok(exposed, `${where}: Service ${service.metadata.name} exposes containerPort ${p.containerPort}`);
      }
    }
    for (const sp of service.spec.ports) {
      const target = sp.targetPort ?? sp.port;
      assert.ok(
        spec.containers.some((c: Json) => containerPortNumber(c, target) !== undefined),
        `${where}: Service port ${sp.name ?? sp.port} targets ${target}, which no container exposes`,
      );
    }
  }
});

test('when a container runs a process of the app image, then ENTRYPOINT stays tini and the file it runs is where tsc compiles its entry point', () => {
  const objects = baseObjects();
  for (const [name, component] of Object.entries(COMPONENTS)) {
    const workload = find(objects, component.kind, name);
    assert.ok(workload);
    const [c] = podSpec(workload).containers;
    assert.ok(isAppContainer(c), `${name} runs the app image`);
    assert.equal(c.command, undefined, `${name}: command would replace tini as PID 1`);
    assert.equal(entryFile(c), compiledPath(component.source), `${name}: runs ${component.source} compiled`);
  }
});

test('when a process listens on a port, then its port variable equals the containerPort and every containerPort has one', () => {
  const objects = baseObjects();
  for (const [name, component] of Object.entries(COMPONENTS)) {
    const workload = find(objects, component.kind, name);
    assert.ok(workload);
    const [c] = podSpec(workload).containers;
    for (const [variable, port] of Object.entries(component.portVars)) {
      assert.equal(envValue(c, variable, objects), String(port), `${name}: ${variable}`);
      assert.ok(containerPortNumber(c, port) !== undefined, `${name}: containerPort ${port} for ${variable}`);
    }
    const declared = (c.ports ?? []).map((p: Json) => p.containerPort).sort();
    assert.deepEqual(declared, Object.values(component.portVars).sort(), `${name}: containerPorts`);
    if (component.grpcPort !== undefined) {
      assert.equal(envValue(c, 'GRPC_HOST', objects), '0.0.0.0', `${name}: gRPC binds beyond loopback`);
    }
  }
});

// ---------------------------------------------------------------------------------------
// Wiring

test('when a process reads a *_SERVICE_ADDR variable, then it names a base Service and one of its ports, and the right one', () => {
  const objects = baseObjects();
  const services = objects.filter((o) => o.kind === 'Service');
  const seen = new Set<string>();
  const check = (where: string, variable: string, value: string) => {
    const m = /^([a-z0-9-]+):(\d+)$/.exec(value);
    assert.ok(m, `${where}: ${variable}=${value} is host:port`);
    const service = services.find((s) => s.metadata.name === m[1]);
    assert.ok(service, `${where}: ${variable} names Service ${m[1]}, which base does not define`);
    assert.ok(service.spec.ports.some((p: Json) => p.port === Number(m[2])), `${where}: Service ${m[1]} has no port ${m[2]}`);
    const expected = ADDRESS_TARGETS[variable];
    if (expected) assert.equal(value, `${expected.service}:${expected.port}`, `${where}: ${variable}`);
    seen.add(variable);
  };
  for (const cm of objects.filter((o) => o.kind === 'ConfigMap')) {
    for (const [k, v] of Object.entries(cm.data ?? {})) if (k.endsWith('_SERVICE_ADDR')) check(`ConfigMap ${cm.metadata.name}`, k, String(v));
  }
  for (const w of objects.filter((o) => WORKLOAD_KINDS.has(o.kind))) {
    for (const c of containersOf(w)) {
      for (const e of c.env ?? []) {
        if (!e.name.endsWith('_SERVICE_ADDR')) continue;
        assert.equal(e.valueFrom, undefined, `${w.metadata.name}: ${e.name} is a literal address`);
        check(`${w.kind}/${w.metadata.name}`, e.name, e.value);
      }
    }
  }
  assert.deepEqual([...seen].sort(), Object.keys(ADDRESS_TARGETS).sort(), 'every address variable is wired somewhere');
  for (const [name, component] of Object.entries(COMPONENTS)) {
    const workload = find(objects, component.kind, name);
    assert.ok(workload);
    const [c] = podSpec(workload).containers;
    for (const variable of component.needs) {
      assert.ok(envValue(c, variable, objects), `${name} calls ${variable.replace(/_ADDR$/, '')}, so it needs ${variable}`);
    }
  }
});

test('when NATS_URL is configured, then it names the nats Service port and NATS runs JetStream on its volume', () => {
  const objects = baseObjects();
  const cm = find(objects, 'ConfigMap', 'agent-task-service-config');
  assert.ok(cm);
  const url = new URL(cm.data.NATS_URL);
  assert.equal(url.protocol, 'nats:');
  const service = find(objects, 'Service', url.hostname);
  assert.ok(service, `NATS_URL names Service ${url.hostname}`);
  assert.ok(service.spec.ports.some((p: Json) => p.port === Number(url.port)), `Service ${url.hostname} has port ${url.port}`);
  const nats = find(objects, 'StatefulSet', 'nats');
  assert.ok(nats);
  const [c] = podSpec(nats).containers;
  assert.match(c.image, /^nats:2\.10-alpine$/);
  const args: string[] = [...(c.command ?? []), ...(c.args ?? [])];
  assert.ok(args.includes('-js'), 'JetStream enabled');
  const storeDir = args[args.indexOf('-sd') + 1];
  assert.ok(args.includes('-sd') && storeDir, 'JetStream store dir set');
  const mount = c.volumeMounts.find((m: Json) => m.mountPath === storeDir);
  assert.ok(
    nats.spec.volumeClaimTemplates.some((t: Json) => t.metadata.name === mount?.name),
    'the JetStream store is on a PersistentVolumeClaim',
  );
});

test('when file-storage keeps files under DATA_DIR, then DATA_DIR is its PersistentVolumeClaim', () => {
  const objects = baseObjects();
  const fileStorage = find(objects, 'StatefulSet', 'file-storage');
  assert.ok(fileStorage);
  const [c] = podSpec(fileStorage).containers;
  const dataDir = envValue(c, 'DATA_DIR', objects);
  assert.ok(dataDir, 'DATA_DIR set');
  const mount = c.volumeMounts.find((m: Json) => m.mountPath === dataDir);
  assert.ok(mount, `${dataDir} is mounted`);
  assert.ok(fileStorage.spec.volumeClaimTemplates.some((t: Json) => t.metadata.name === mount.name), `${dataDir} is on a claim`);
});

test('when a secret-bearing variable is set in base, then it comes from a secretKeyRef on the shared Secret, never a literal or a ConfigMap', () => {
  const objects = baseObjects();
  for (const cm of objects.filter((o) => o.kind === 'ConfigMap')) {
    for (const key of Object.keys(cm.data ?? {})) {
      assert.ok(!SECRET_VARS.includes(key), `ConfigMap ${cm.metadata.name} holds ${key}`);
      assert.doesNotMatch(key, /SECRET|PASSWORD|TOKEN|API_KEY/, `ConfigMap ${cm.metadata.name} holds ${key}`);
    }
  }
  for (const w of objects.filter((o) => WORKLOAD_KINDS.has(o.kind))) {
    for (const c of containersOf(w)) {
      for (const e of c.env ?? []) {
        if (!SECRET_VARS.includes(e.name)) continue;
        const where = `${w.metadata.name}: ${e.name}`;
        assert.equal(e.value, undefined, `${where} is a literal`);
        assert.equal(e.valueFrom?.secretKeyRef?.name, SECRET_NAME, `${where} comes from Secret ${SECRET_NAME}`);
        assert.equal(e.valueFrom.secretKeyRef.key, e.name, `${where} reads the key of the same name`);
      }
    }
  }
  for (const [name, component] of Object.entries(COMPONENTS)) {
    const workload = find(objects, component.kind, name);
    assert.ok(workload);
    const [c] = podSpec(workload).containers;
    for (const variable of REQUIRED_SECRET_VARS) {
      const e = (c.env ?? []).find((x: Json) => x.name === variable);
      assert.ok(e?.valueFrom?.secretKeyRef, `${name} reads ${variable} from the Secret`);
      assert.notEqual(e.valueFrom.secretKeyRef.optional, true, `${name}: ${variable} is required`);
    }
  }
  const gateway = find(objects, 'Deployment', 'gateway');
  assert.ok(gateway);
  const bootstrap = podSpec(gateway).containers[0].env.find((e: Json) => e.name === 'BOOTSTRAP_API_KEY');
  assert.equal(bootstrap?.valueFrom?.secretKeyRef?.optional, true, 'BOOTSTRAP_API_KEY is optional');
});

// ---------------------------------------------------------------------------------------
// Trust between processes: credentials and NetworkPolicies

/** The variables each component's config module reads: the code, not a list kept by hand. */
const READS: Record<string, Set<string>> = Object.fromEntries(
  Object.entries({
    gateway: gatewayConfigSpec,
    run: runConfigSpec,
    'browser-pool': browserPoolConfigSpec,
    'file-storage': fileStorageConfigSpec,
    'live-view': liveViewConfigSpec,
  }).map(([name, spec]) => [name, new Set(Object.values(spec as Record<string, { env: string }>).map((f) => f.env))]),
);
const INGRESS_CONTROLLER = 'ingress-controller';
/** Internal connections to a public edge that no *_SERVICE_ADDR shows: the run service drives browsers through the CDP proxy (CDP_INTERNAL_URL). */
const INTERNAL_EDGE_CALLERS: { service: string; port: number; variable: string; callers: string[] }[] = [
  { service: 'browser-pool', port: 9222, variable: 'CDP_INTERNAL_URL', callers: ['run'] },
];

function secretRef(c: Json, name: string): Json | undefined {
  return (c.env ?? []).find((e: Json) => e.name === name)?.valueFrom?.secretKeyRef;
}

test('when a component runs, then its code reads INTERNAL_TOKEN and its pod gets it from the Secret; NATS_TOKEN goes to exactly the components that use NATS', () => {
  const objects = baseObjects();
  assert.ok(Object.values(READS).some((vars) => vars.has('NATS_URL')), 'some component uses NATS');
  for (const [name, component] of Object.entries(COMPONENTS)) {
    const workload = find(objects, component.kind, name);
    assert.ok(workload);
    const [c] = podSpec(workload).containers;
    assert.ok(READS[name].has('INTERNAL_TOKEN'), `${name}'s config reads INTERNAL_TOKEN`);
    const internal = secretRef(c, 'INTERNAL_TOKEN');
    assert.deepEqual([internal?.name, internal?.key, internal?.optional], [SECRET_NAME, 'INTERNAL_TOKEN', undefined], `${name}: INTERNAL_TOKEN`);
    const nats = secretRef(c, 'NATS_TOKEN');
    if (READS[name].has('NATS_URL')) {
      assert.ok(READS[name].has('NATS_TOKEN'), `${name}'s config reads NATS_TOKEN`);
      assert.deepEqual([nats?.name, nats?.key, nats?.optional], [SECRET_NAME, 'NATS_TOKEN', undefined], `${name}: NATS_TOKEN`);
    } else {
      assert.equal(nats, undefined, `${name} does not use NATS, so it does not get its token`);
    }
  }
});

test('when nats-server starts, then its config requires the token from the Secret, read from its environment, not from the ConfigMap or its arguments', () => {
  const objects = baseObjects();
  const nats = find(objects, 'StatefulSet', 'nats');
  assert.ok(nats);
  const [c] = podSpec(nats).containers;
  const ref = secretRef(c, 'NATS_TOKEN');
  assert.deepEqual([ref?.name, ref?.key, ref?.optional], [SECRET_NAME, 'NATS_TOKEN', undefined]);
  const args: string[] = [...(c.command ?? []), ...(c.args ?? [])];
  assert.ok(args.includes('-c'), 'nats-server reads a config file');
  const confPath = args[args.indexOf('-c') + 1];
  assert.ok(!args.some((a) => /--(auth|user|pass)\b/.test(a)), 'no credential on the command line');
  const mount = c.volumeMounts.find((m: Json) => confPath.startsWith(`${m.mountPath}/`));
  assert.ok(mount, `${confPath} is on a mounted volume`);
  const volume = podSpec(nats).volumes.find((v: Json) => v.name === mount.name);
  const cm = find(objects, 'ConfigMap', volume?.configMap?.name);
  assert.ok(cm, 'the config comes from a ConfigMap');
  const conf = String(cm.data[path.posix.basename(confPath)]);
  assert.match(conf, /authorization\s*\{[^}]*\btoken:\s*\$NATS_TOKEN\b/, 'clients must present $NATS_TOKEN');
});

/** Who a NetworkPolicy peer is: a component of this app by name, or the Ingress controller. */
function peerName(peer: Json, where: string): string {
  if (peer.namespaceSelector) {
    assert.equal(peer.namespaceSelector.matchLabels?.['kubernetes.io/metadata.name'], 'ingress-nginx', `${where}: the only other namespace is the Ingress controller's`);
    assert.equal(peer.podSelector?.matchLabels?.[LABEL_NAME], 'ingress-nginx', `${where}: the controller pods, not the whole namespace`);
    return INGRESS_CONTROLLER;
  }
  assert.equal(peer.ipBlock, undefined, `${where}: no ipBlock peers`);
  const labels = peer.podSelector?.matchLabels ?? {};
  assert.ok(labels[LABEL_NAME] && labels[LABEL_PART_OF] === 'agent-task-service', `${where}: a peer names one component (${JSON.stringify(peer)})`);
  return labels[LABEL_NAME];
}

/** Per selected component, per port: who the NetworkPolicies let in. */
function admitted(objects: K8s[]): Map<string, Map<number, Set<string>>> {
  const out = new Map<string, Map<number, Set<string>>>();
  for (const np of objects.filter((o) => o.kind === 'NetworkPolicy')) {
    const where = `NetworkPolicy ${np.metadata.name}`;
    assert.ok((np.spec.policyTypes ?? []).includes('Ingress'), `${where}: policyTypes Ingress`);
    const target = np.spec.podSelector?.matchLabels?.[LABEL_NAME];
    if (!target) continue; // the default deny
    assert.equal(np.spec.podSelector.matchLabels[LABEL_PART_OF], 'agent-task-service', `${where}: selects this app's pods`);
    const ports = out.get(target) ?? new Map<number, Set<string>>();
    out.set(target, ports);
    for (const rule of np.spec.ingress ?? []) {
      assert.ok(rule.ports?.length, `${where}: every rule names its ports`);
      assert.ok(rule.from?.length, `${where}: every rule names who may connect`);
      for (const p of rule.ports) {
        assert.equal(typeof p.port, 'number', `${where}: ports by number`);
        const peers = ports.get(p.port) ?? new Set<string>();
        ports.set(p.port, peers);
        for (const peer of rule.from) peers.add(peerName(peer, where));
      }
    }
  }
  return out;
}

const sorted = (m: Map<string, Map<number, Set<string>>>) =>
  Object.fromEntries([...m].sort(([a], [b]) => a.localeCompare(b)).map(([k, ports]) => [k, Object.fromEntries([...ports].sort(([a], [b]) => a - b).map(([p, s]) => [p, [...s].sort()]))]));

test('when the base is built, then a default-deny NetworkPolicy selects every pod and admits nothing', () => {
  const denies = baseObjects().filter((o) => o.kind === 'NetworkPolicy' && Object.keys(o.spec.podSelector ?? {}).length === 0);
  assert.equal(denies.length, 1, 'one policy selects every pod');
  const [deny] = denies;
  assert.deepEqual(deny.spec.policyTypes, ['Ingress']);
  assert.deepEqual(deny.spec.ingress ?? [], [], 'it admits nothing');
});

test("when the base is built, then each component's NetworkPolicy admits exactly the callers its peers' code names, port by port, and the Ingress controller only on public ports", () => {
  const objects = baseObjects();
  const expected = new Map<string, Map<number, Set<string>>>();
  const allow = (service: string, port: number, caller: string) => {
    const ports = expected.get(service) ?? new Map<number, Set<string>>();
    expected.set(service, ports);
    ports.set(port, (ports.get(port) ?? new Set()).add(caller));
  };
  const natsUrl = new URL(find(objects, 'ConfigMap', 'agent-task-service-config')!.data.NATS_URL);
  for (const [caller, vars] of Object.entries(READS)) {
    for (const v of vars) {
      const target = ADDRESS_TARGETS[v];
      if (target) allow(target.service, target.port, caller);
      if (v === 'NATS_URL') allow(natsUrl.hostname, Number(natsUrl.port), caller);
    }
  }
  allow('gateway', COMPONENTS.gateway.portVars.PORT, INGRESS_CONTROLLER);
  for (const edge of Object.values(PUBLIC_URLS)) allow(edge.service, edge.port, INGRESS_CONTROLLER);
  for (const edge of INTERNAL_EDGE_CALLERS) {
    const owner = find(objects, 'Deployment', edge.service) ?? find(objects, 'StatefulSet', edge.service);
    assert.ok(owner);
    const url = new URL(envValue(podSpec(owner).containers[0], edge.variable, objects) ?? 'x:');
    assert.deepEqual([url.hostname, Number(url.port)], [edge.service, edge.port], `${edge.variable} is the address these callers use`);
    for (const caller of edge.callers) allow(edge.service, edge.port, caller);
  }
  assert.deepEqual(sorted(admitted(objects)), sorted(expected));
  for (const w of objects.filter((o) => WORKLOAD_KINDS.has(o.kind))) {
    assert.ok(expected.has(w.spec.template.metadata.labels[LABEL_NAME]), `${w.metadata.name}: some policy lets its callers in`);
  }
});

test('when the dev overlay runs Postgres, then only the components whose code reads DATABASE_URL may connect to it', () => {
  const objects = build(DEV_DIR);
  const callers = Object.entries(READS).filter(([, vars]) => vars.has('DATABASE_URL')).map(([name]) => name);
  assert.equal(callers.length, Object.keys(COMPONENTS).length);
  assert.deepEqual(sorted(admitted(objects)).postgres, { 5432: callers.sort() });
  assert.equal(objects.filter((o) => o.kind === 'NetworkPolicy' && Object.keys(o.spec.podSelector ?? {}).length === 0).length, 1, 'the default deny covers the namespace');
});

// ---------------------------------------------------------------------------------------
// Overlays

test('when the dev overlay is built, then its Secret provides every key base reads and DATABASE_URL reaches the dev Postgres with its credentials', () => {
  const objects = build(DEV_DIR);
  const secret = find(objects, 'Secret', SECRET_NAME);
  assert.ok(secret, `dev defines Secret ${SECRET_NAME}`);
  const data: Record<string, string> = { ...(secret.stringData ?? {}) };
  for (const [k, v] of Object.entries(secret.data ?? {})) data[k] = Buffer.from(String(v), 'base64').toString('utf8');
  for (const key of SECRET_VARS) {
    assert.ok(data[key], `dev Secret provides ${key}`);
    assert.match(data[key], /dev-only/, `dev ${key} is marked as a dev-only placeholder`);
  }
  assert.ok(data.SIGNING_SECRET.length >= 32, 'SIGNING_SECRET is long enough for HMAC');
  assert.ok(data.INTERNAL_TOKEN.length >= 32 && !/\s/.test(data.INTERNAL_TOKEN), 'INTERNAL_TOKEN is one word of at least 32 characters (the services refuse less)');

  const db = new URL(data.DATABASE_URL);
  assert.match(db.protocol, /^postgres(ql)?:$/);
  const service = find(objects, 'Service', db.hostname);
  assert.ok(service, `DATABASE_URL names Service ${db.hostname}`);
  assert.ok(service.spec.ports.some((p: Json) => p.port === Number(db.port || 5432)), 'DATABASE_URL port');
  const postgres = find(objects, 'StatefulSet', 'postgres');
  assert.ok(postgres);
  const [c] = podSpec(postgres).containers;
  assert.match(c.image, /^postgres:16\b/);
  assert.equal(postgres.spec.replicas, 1);
  const credentials = find(objects, 'Secret', c.envFrom[0].secretRef.name);
  assert.ok(credentials, 'Postgres reads its credentials from a Secret');
  assert.equal(decodeURIComponent(db.username), credentials.stringData.POSTGRES_USER);
  assert.equal(decodeURIComponent(db.password), credentials.stringData.POSTGRES_PASSWORD);
  assert.equal(db.pathname.slice(1), credentials.stringData.POSTGRES_DB);
});

test('when the production overlay is built, then it runs two gateways and expects the Secret to be managed outside the manifests', () => {
  const objects = build(PROD_DIR);
  assert.equal(find(objects, 'Deployment', 'gateway')?.spec.replicas, 2);
  assert.equal(find(objects, 'Secret', SECRET_NAME), undefined, 'production does not ship secret values');
  assert.equal(find(objects, 'StatefulSet', 'postgres'), undefined, 'production uses an external Postgres');
  const text = readFileSync(path.join(PROD_DIR, 'kustomization.yaml'), 'utf8');
  for (const key of [SECRET_NAME, ...REQUIRED_SECRET_VARS, 'NATS_TOKEN']) assert.ok(text.includes(key), `production notes ${key}`);
});

for (const [label, dir] of [['base', BASE_DIR], ['dev', DEV_DIR], ['production', PROD_DIR]] as const) {
  test(`when the ${label} build is served through the Ingress, then each public URL's host routes to its Service port with the right scheme`, () => {
    const objects = build(dir);
    const ingresses = objects.filter((o) => o.kind === 'Ingress');
    const rules = ingresses.flatMap((ing) => (ing.spec.rules ?? []).map((rule: Json) => ({ ing, rule })));
    const hosts = rules.map(({ rule }) => rule.host);
    assert.deepEqual(hosts.filter((h, i) => hosts.indexOf(h) !== i), [], 'no host is claimed twice');

    for (const { ing, rule } of rules) {
      for (const p of rule.http.paths) {
        const service = find(objects, 'Service', p.backend.service.name);
        assert.ok(service, `Ingress ${ing.metadata.name} routes to Service ${p.backend.service.name}, which does not exist`);
        assert.ok(servicePort(service, p.backend.service.port), `Ingress ${ing.metadata.name}: Service ${service.metadata.name} has no such port`);
      }
      for (const tls of ing.spec.tls ?? []) assert.ok(tls.hosts.every((h: string) => hosts.includes(h)), `${ing.metadata.name}: TLS hosts`);
    }

    const cm = find(objects, 'ConfigMap', 'agent-task-service-config');
    assert.ok(cm);
    const routes = (host: string) => rules.filter(({ rule }) => rule.host === host);
    const apiRoute = rules.find(({ rule }) => rule.http.paths.some((p: Json) => p.backend.service.name === 'gateway'));
    assert.ok(apiRoute, 'the API is exposed');
    for (const [variable, expected] of Object.entries(PUBLIC_URLS)) {
      const url: URL = new URL(cm.data[variable]);
      const [match] = routes(url.hostname);
      assert.ok(match, `${variable} host ${url.hostname} has an Ingress rule`);
      const backend = match.rule.http.paths.find((p: Json) => p.path === '/')?.backend.service;
      assert.equal(backend?.name, expected.service, `${variable} routes to ${expected.service}`);
      const service = find(objects, 'Service', backend.name);
      assert.ok(service);
      assert.equal(servicePort(service, backend.port)?.port, expected.port, `${variable} routes to port ${expected.port}`);
      const secured = (match.ing.spec.tls ?? []).some((t: Json) => t.hosts.includes(url.hostname));
      assert.equal(url.protocol, expected.schemes[secured ? 0 : 1], `${variable} scheme fits the Ingress TLS`);
      if (expected.service !== 'file-storage') {
        const annotations = match.ing.metadata.annotations ?? {};
        for (const a of ['proxy-read-timeout', 'proxy-send-timeout']) {
          assert.ok(Number(annotations[`nginx.ingress.kubernetes.io/${a}`]) >= 3600, `${variable}: WebSocket ${a} ≥ 3600`);
        }
      }
    }
    const files = ingresses.find((ing) => ing.spec.rules.some((r: Json) => r.host === new URL(cm.data.FILES_PUBLIC_URL).hostname));
    const bodySize = files?.metadata.annotations?.['nginx.ingress.kubernetes.io/proxy-body-size'] ?? '1m';
    assert.ok(bytes(bodySize.replace(/m$/, 'Mi')) > bytes('100Mi'), 'uploads up to the 100 MiB cap pass the Ingress');
  });
}

// ---------------------------------------------------------------------------------------
// Dockerfile

interface Instruction {
  op: string;
  args: string;
}

function dockerStages(): { name: string; from: string; steps: Instruction[] }[] {
  const text = readFileSync(path.join(DEPLOY_DIR, 'Dockerfile'), 'utf8');
  const lines = text
    .split('\n')
    .filter((line) => !/^\s*#/.test(line))
    .join('\n')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean);
  const globalArgs: Record<string, string> = {};
  const stages: { name: string; from: string; steps: Instruction[] }[] = [];
  for (const line of lines) {
    const [, op, args] = /^(\S+)\s+(.*)$/.exec(line) ?? [];
    assert.ok(op, `Dockerfile line: ${line}`);
    const upper = op.toUpperCase();
    if (upper === 'ARG' && stages.length === 0) {
      const [k, v] = args.split('=');
      globalArgs[k] = v ?? '';
    } else if (upper === 'FROM') {
      const [image, , name] = args.split(/\s+/);
      const resolved = image.replace(/^\$\{?(\w+)\}?$/, (_, k: string) => globalArgs[k] ?? image);
      stages.push({ name: name ?? String(stages.length), from: resolved, steps: [] });
    } else {
      assert.ok(stages.length, `${op} before FROM`);
      stages[stages.length - 1].steps.push({ op: upper, args });
    }
  }
  return stages;
}

test('when the image is built, then it compiles in one stage, installs only production dependencies in another and runs as a non-root uid under tini', () => {
  const stages = dockerStages();
  assert.ok(stages.length >= 3, 'build, production dependencies and runtime stages');
  for (const stage of stages) assert.equal(stage.from, 'node:22-bookworm-slim', `stage ${stage.name} runs Node 22 LTS (@nats-io/nuid needs >= 22)`);
  const runs = (stage: { steps: Instruction[] }) => stage.steps.filter((s) => s.op === 'RUN').map((s) => s.args);
  const runtime = stages[stages.length - 1];
  const earlier = stages.slice(0, -1);

  const build = earlier.find((s) => runs(s).some((r) => /\bnpm ci\b(?!.*--omit=dev)/.test(r)) && runs(s).some((r) => /npm run build/.test(r)));
  assert.ok(build, 'a stage runs npm ci and npm run build');
  const prodDeps = earlier.find((s) => runs(s).some((r) => /npm ci\b.*--omit=dev/.test(r)));
  assert.ok(prodDeps, 'a stage runs npm ci --omit=dev');
  const copies = runtime.steps.filter((s) => s.op === 'COPY').map((s) => s.args);
  assert.ok(copies.some((c) => c.includes(`--from=${prodDeps.name}`) && c.includes('node_modules')), 'runtime takes production node_modules');
  assert.ok(copies.some((c) => c.includes(`--from=${build.name}`) && /\bdist\b/.test(c)), 'runtime takes the compiled dist');
  assert.ok(!copies.some((c) => c.includes(`--from=${build.name}`) && c.includes('node_modules')), 'dev dependencies stay out of the runtime');
  assert.ok(copies.some((c) => !c.includes('--from') && c.split(/\s+/).includes('package.json')), 'package.json ("type": "module") is in the runtime');
  assert.ok(!runs(runtime).some((r) => /\bnpm (ci|install)\b/.test(r)), 'the runtime installs no npm packages itself');

  const install = runs(runtime).find((r) => /apt-get install/.test(r));
  assert.ok(install, 'the runtime installs Debian packages');
  assert.match(install, /--no-install-recommends/);
  const packages = install.split(/\s+/);
  for (const pkg of ['chromium', 'ffmpeg', 'tini']) assert.ok(packages.includes(pkg), `installs ${pkg}`);
  assert.match(install, /rm -rf \/var\/lib\/apt\/lists/, 'apt lists are removed');

  const users = runtime.steps.filter((s) => s.op === 'USER');
  assert.ok(users.length, 'the runtime sets USER');
  const user = users[users.length - 1].args.trim();
  const m = /^(\d+)(?::(\d+))?$/.exec(user);
  assert.ok(m, `USER ${user} is numeric, so runAsNonRoot can verify it`);
  assert.ok(Number(m[1]) > 0, 'USER is not root');
  assert.equal(Number(m[1]), APP_UID, 'USER matches runAsUser in the manifests');

  const entrypoint = runtime.steps.filter((s) => s.op === 'ENTRYPOINT').pop();
  assert.ok(entrypoint, 'ENTRYPOINT set');
  const argv: string[] = JSON.parse(entrypoint.args);
  assert.match(argv[0], /(^|\/)tini$/, 'tini is PID 1');
  const cmd = runtime.steps.filter((s) => s.op === 'CMD').pop();
  assert.ok(cmd, 'a default CMD');
  assert.equal(JSON.parse(cmd.args)[1], compiledPath(COMPONENTS.gateway.source), 'the default process is the gateway');
});
