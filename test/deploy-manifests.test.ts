/**
 * Validates the Kubernetes manifests and the Dockerfile under deploy/ without a cluster:
 * every file parses, kustomizations are complete, workloads are probed, bounded and
 * hardened, and the names that tie the pieces together (Services, ports, Secrets, public
 * hosts, disruption budgets, autoscalers, network policies) agree with each other and with
 * the variables the services' own config specs declare.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import YAML from 'yaml';
import { gatewayConfigSpec } from '../gateway/src/config.js';
import { FieldProblem, type Field } from '../services/common/src/config.js';
import { browserPoolConfigSpec } from '../services/browser-pool/src/config.js';
import { fileStorageConfigSpec } from '../services/file-storage/src/config.js';
import { liveViewConfigSpec } from '../services/live-view/src/config.js';
import { runConfigSpec } from '../services/run/src/config.js';
import { webhooksConfigSpec } from '../services/webhooks/src/config.js';

const DEPLOY_DIR = fileURLToPath(new URL('../deploy/', import.meta.url));
const BASE_DIR = path.join(DEPLOY_DIR, 'base');
const DEV_DIR = path.join(DEPLOY_DIR, 'overlays', 'dev');
const PROD_DIR = path.join(DEPLOY_DIR, 'overlays', 'production');
const SECCOMP_DIR = path.join(DEPLOY_DIR, 'seccomp');
const TSCONFIG = fileURLToPath(new URL('../tsconfig.json', import.meta.url));

const APP_IMAGE = 'agent-task-service';
const APP_UID = 10001;
const SECRET_NAME = 'agent-task-service-secrets';
const CONFIG_MAP_NAME = 'agent-task-service-config';
/**
 * Optional in the specs (a single machine generates or goes without them) but required of a
 * cluster, by every component whose spec reads them: without them each pod would sign, trust
 * and store on its own. NATS_TOKEN is required of the components that use NATS (see below).
 */
const REQUIRED_SECRET_VARS = ['DATABASE_URL', 'SIGNING_SECRET', 'INTERNAL_TOKEN'];
const LABEL_NAME = 'app.kubernetes.io/name';
const LABEL_PART_OF = 'app.kubernetes.io/part-of';
/** Long-running workloads: probed, served, budgeted. */
const WORKLOAD_KINDS = new Set(['Deployment', 'StatefulSet', 'DaemonSet']);
/** Everything that runs pods: hardened and bounded like the workloads. */
const POD_KINDS = new Set([...WORKLOAD_KINDS, 'Job']);

/** The component and headless gRPC Service each *_SERVICE_ADDR variable must point at (dns:///<service>:<port>). */
const ADDRESS_TARGETS: Record<string, { component: string; service: string; port: number }> = {
  RUN_SERVICE_ADDR: { component: 'run', service: 'run-grpc', port: 50051 },
  BROWSER_POOL_SERVICE_ADDR: { component: 'browser-pool', service: 'browser-pool-grpc', port: 50052 },
  FILE_STORAGE_SERVICE_ADDR: { component: 'file-storage', service: 'file-storage-grpc', port: 50053 },
  LIVE_VIEW_SERVICE_ADDR: { component: 'live-view', service: 'live-view-grpc', port: 50054 },
  WEBHOOKS_SERVICE_ADDR: { component: 'webhooks', service: 'webhooks-grpc', port: 50055 },
};

/** Each component's config spec: the variables its process reads, whether each is required, its default. */
const SPECS: Record<string, Record<string, Field<unknown>>> = {
  gateway: gatewayConfigSpec,
  run: runConfigSpec,
  'browser-pool': browserPoolConfigSpec,
  'file-storage': fileStorageConfigSpec,
  'live-view': liveViewConfigSpec,
  webhooks: webhooksConfigSpec,
};

/** Variables of the process itself (Node, Chromium, ffmpeg read them), not of a config spec. */
const PROCESS_VARS = new Set(['HOME']);

/** The variables each component's config reads: its spec, not a list kept by hand. */
const READS: Record<string, Set<string>> = Object.fromEntries(
  Object.entries(SPECS).map(([name, spec]) => [
    name,
    new Set(Object.values(spec).map((f) => f.env)),
  ]),
);

/**
 * Credentials, which only the Secret may hold. The specs carry no secret marker, so the names
 * decide: keys, tokens, passwords and secrets (not a *_FILE path, not a token's lifetime), the
 * database URL (it holds a password) and PROXIES (proxy URLs with credentials).
 */
function isSecretVar(name: string): boolean {
  return /(^|_)(SECRET|PASSWORD|TOKEN)$|_SECRET_|API_KEY$|ACCESS_KEY(_ID)?$/.test(name) || name === 'DATABASE_URL' || name === 'PROXIES';
}

/** Whether the process refuses to start without the field's variable: required, and no default. */
function requiredWithoutDefault(field: Field<unknown>): boolean {
  try {
    field.parse(undefined);
    return false;
  } catch (err) {
    if (err instanceof FieldProblem) return true;
    throw err;
  }
}

interface Component {
  kind: 'Deployment' | 'StatefulSet';
  /** TypeScript entry point; the container runs its compiled output. */
  source: string;
  /** gRPC port probed with grpc.health.v1; undefined for the HTTP-only gateway. */
  grpcPort?: number;
  /** Port variables the process reads, with the port each must be. */
  portVars: Record<string, number>;
}

const COMPONENTS: Record<string, Component> = {
  gateway: {
    kind: 'Deployment',
    source: 'gateway/src/main.ts',
    portVars: { PORT: 8080 },
  },
  run: {
    kind: 'Deployment',
    source: 'services/run/src/main.ts',
    grpcPort: 50051,
    portVars: { GRPC_PORT: 50051 },
  },
  'browser-pool': {
    kind: 'Deployment',
    source: 'services/browser-pool/src/main.ts',
    grpcPort: 50052,
    portVars: { GRPC_PORT: 50052, CDP_PORT: 9222 },
  },
  'file-storage': {
    kind: 'Deployment',
    source: 'services/file-storage/src/main.ts',
    grpcPort: 50053,
    portVars: { GRPC_PORT: 50053, FILES_HTTP_PORT: 8081 },
  },
  'live-view': {
    kind: 'Deployment',
    source: 'services/live-view/src/main.ts',
    grpcPort: 50054,
    portVars: { GRPC_PORT: 50054, LIVE_VIEW_HTTP_PORT: 8082 },
  },
  webhooks: {
    kind: 'Deployment',
    source: 'services/webhooks/src/main.ts',
    grpcPort: 50055,
    portVars: { GRPC_PORT: 50055 },
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

/** Applies RFC 6902 operations (test, add, replace, remove) the way kustomize does: a path that does not exist, or a failed test, is an error. */
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
    if (op.op === 'test') {
      assert.deepEqual(Array.isArray(parent) ? parent[Number(last)] : parent[last], op.value, `${where}: test of ${op.path} fails`);
      continue;
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

/** Whether every label a selector names is on `labels` (an empty selector matches nothing here: it is never meant). */
function selects(matchLabels: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean {
  const entries = Object.entries(matchLabels ?? {});
  return entries.length > 0 && entries.every(([k, v]) => labels?.[k] === v);
}

/** The workloads whose pods a label selector picks. */
function selectedWorkloads(objects: K8s[], matchLabels: Record<string, string> | undefined): K8s[] {
  return objects.filter((o) => POD_KINDS.has(o.kind) && selects(matchLabels, o.spec.template.metadata.labels));
}

/** The workload of one of the five components. */
function component(objects: K8s[], name: string): K8s {
  const workload = find(objects, COMPONENTS[name]!.kind, name);
  assert.ok(workload, `${COMPONENTS[name]!.kind} ${name}`);
  return workload;
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
const podRunners = (objects: Loaded[]) => objects.filter((l) => POD_KINDS.has(l.obj.kind));

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

/** kubectl's own kustomize, where this machine has kubectl; undefined otherwise. */
function kubectlKustomize(dir: string): K8s[] | undefined {
  let out: string;
  try {
    out = execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  return YAML.parseAllDocuments(out).map((d) => d.toJS() as K8s);
}

test("when kubectl is installed, then its kustomize builds every overlay into what this test's build checks (namespace and image names aside)", (t) => {
  // Namespaces and the images: transformer are the two kustomize features build() leaves out.
  const normalize = (objects: K8s[]) =>
    Object.fromEntries(
      structuredClone(objects).map((o) => {
        delete o.metadata.namespace;
        if (POD_KINDS.has(o.kind)) for (const c of containersOf(o)) c.image = String(c.image).split('/').pop()!.split(':')[0];
        return [`${o.kind}/${o.metadata.name}`, o];
      }),
    );
  for (const [label, dir] of BUILDS) {
    const real = kubectlKustomize(dir);
    if (!real) return t.skip('kubectl is not installed');
    assert.deepEqual(normalize(build(dir)), normalize(real), `${label}: kubectl kustomize ${rel(dir)}`);
  }
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

test('when a workload runs, then liveness and readiness probe it: gRPC health for the services, /livez and /readyz for the gateway (neither asks a downstream service)', () => {
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
      // /healthz is 503 while any downstream is down: one service's rollout would take every gateway out of service.
      assert.equal(c.readinessProbe.httpGet?.path, '/readyz', `${name}: readiness depends on the gateway alone`);
      for (const probe of [c.livenessProbe, c.readinessProbe]) {
        assert.equal(containerPortNumber(c, probe.httpGet.port), component.portVars.PORT);
      }
    }
  }
});

test('when a container is scheduled, then it requests and limits CPU and memory, with requests within limits', () => {
  const problems: string[] = [];
  for (const { file, obj } of podRunners(allObjects())) {
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

test('when a pod starts, then it runs hardened: non-root, RuntimeDefault seccomp (the browser pool may use its Localhost profile; never Unconfined), no escalation, read-only root, no capabilities, no token', () => {
  const problems: string[] = [];
  for (const { file, obj } of podRunners(allObjects())) {
    const spec = podSpec(obj);
    const where = `${file}: ${obj.kind}/${obj.metadata.name}`;
    const pod = spec.securityContext ?? {};
    if (pod.runAsNonRoot !== true) problems.push(`${where}: pod runAsNonRoot`);
    if (!(Number.isInteger(pod.runAsUser) && pod.runAsUser > 0)) problems.push(`${where}: pod runAsUser must be a non-zero uid`);
    // The browser pool's sandbox needs user namespaces, which RuntimeDefault refuses; Unconfined
    // breaks the namespace's Pod Security level (even baseline), so the pod would not be admitted.
    const seccomp = obj.metadata.name === 'browser-pool' ? ['RuntimeDefault', 'Localhost'] : ['RuntimeDefault'];
    if (!seccomp.includes(pod.seccompProfile?.type)) problems.push(`${where}: pod seccompProfile ${seccomp.join(' or ')}`);
    if (pod.appArmorProfile?.type === 'Unconfined') problems.push(`${where}: AppArmor Unconfined`);
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
      if (sc.seccompProfile && sc.seccompProfile.type !== pod.seccompProfile?.type) problems.push(`${at}: overrides the pod's seccompProfile`);
      if (sc.appArmorProfile?.type === 'Unconfined') problems.push(`${at}: AppArmor Unconfined`);
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

const BUILDS = [['base', BASE_DIR], ['dev', DEV_DIR], ['production', PROD_DIR]] as const;

/** What Chromium's sandbox and the pool's namespaces call: user, PID and network namespaces, mounts, chroot. */
const SANDBOX_SYSCALLS = ['unshare', 'clone', 'clone3', 'mount', 'umount2', 'chroot'];

/** Whether a seccomp profile refuses a syscall (any rule naming it with a non-allowing action, else the default). */
function seccompDenies(profile: Json, syscall: string): boolean {
  const allowing = new Set(['SCMP_ACT_ALLOW', 'SCMP_ACT_LOG']);
  const rules = (profile.syscalls ?? []).filter((r: Json) => (r.names ?? [r.name]).includes(syscall));
  if (rules.length) return rules.some((r: Json) => !allowing.has(r.action));
  return !allowing.has(profile.defaultAction);
}

for (const [label, dir] of BUILDS) {
  test(`when the ${label} build starts browsers, then its sandbox choice is explicit and the pod allows it: on needs a shipped Localhost seccomp profile that lets user namespaces through, off is CHROMIUM_NO_SANDBOX=true`, () => {
    const objects = build(dir);
    const pool = component(objects, 'browser-pool');
    const [c] = podSpec(pool).containers;
    const noSandbox = envValue(c, 'CHROMIUM_NO_SANDBOX', objects);
    assert.ok(noSandbox === 'true' || noSandbox === 'false', `CHROMIUM_NO_SANDBOX is set (got ${noSandbox}); unset, each node's probe would decide`);
    assert.notEqual(envValue(c, 'BROWSER_CONFINEMENT', objects), 'off', "the pool's own confinement stays on");
    const seccomp = podSpec(pool).securityContext?.seccompProfile ?? {};
    if (noSandbox === 'true') {
      assert.equal(seccomp.type, 'RuntimeDefault', 'without the sandbox nothing needs user namespaces: the default profile stays');
      return;
    }
    assert.equal(seccomp.type, 'Localhost', "Chromium's sandbox needs user namespaces, which RuntimeDefault refuses (and Unconfined breaks Pod Security)");
    const m = /^agent-task-service\/([a-z0-9-]+\.json)$/.exec(seccomp.localhostProfile ?? '');
    assert.ok(m, `localhostProfile ${seccomp.localhostProfile} is agent-task-service/<file>.json`);
    const file = path.join(SECCOMP_DIR, m[1]!);
    assert.ok(existsSync(file), `the profile is shipped as deploy/seccomp/${m[1]}`);
    const profile = JSON.parse(readFileSync(file, 'utf8'));
    for (const call of SANDBOX_SYSCALLS) assert.ok(!seccompDenies(profile, call), `the profile lets ${call} through`);
    for (const call of ['bpf', 'keyctl', 'userfaultfd', 'fsconfig']) assert.ok(seccompDenies(profile, call), `the profile still refuses ${call}`);
  });
}

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

test('when a workload is defined, then its file also defines its ServiceAccount and Services that select its pods and expose every containerPort between them', () => {
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

    const services = sameFile.filter((o) => o.kind === 'Service' && selects(o.spec.selector, podLabels));
    assert.ok(services.length > 0, `${where}: a Service in the file selects its pods`);
    if (obj.kind === 'StatefulSet') {
      assert.ok(services.some((s) => s.metadata.name === obj.spec.serviceName), `${where}: serviceName ${obj.spec.serviceName} is one of them`);
    }
    for (const c of spec.containers) {
      for (const p of c.ports ?? []) {
        const exposed = services.some((service) =>
          service.spec.ports.some((sp: Json) => sp.targetPort === p.name || sp.targetPort === p.containerPort || (sp.targetPort === undefined && sp.port === p.containerPort)),
        );
        assert.ok(exposed, `${where}: a Service exposes containerPort ${p.containerPort}`);
      }
    }
    for (const service of services) {
      for (const sp of service.spec.ports) {
        const target = sp.targetPort ?? sp.port;
        assert.ok(
          spec.containers.some((c: Json) => containerPortNumber(c, target) !== undefined),
          `${where}: Service ${service.metadata.name} port ${sp.name ?? sp.port} targets ${target}, which no container exposes`,
        );
      }
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

test('when a process reads a *_SERVICE_ADDR variable, then it is dns:/// of the headless Service of the right component and port, so the client reaches every replica', () => {
  const objects = baseObjects();
  const services = objects.filter((o) => o.kind === 'Service');
  for (const [variable, target] of Object.entries(ADDRESS_TARGETS)) {
    const service = find(objects, 'Service', target.service);
    assert.ok(service, `Service ${target.service}`);
    assert.equal(service.spec.clusterIP, 'None', `${target.service} is headless: DNS answers with every pod, not one virtual IP`);
    assert.ok(service.spec.ports.some((p: Json) => p.port === target.port), `${target.service} has port ${target.port}`);
    assert.deepEqual(selectedWorkloads(objects, service.spec.selector).map((w) => w.metadata.name), [target.component], `${target.service} selects ${target.component}'s pods`);
    // A virtual IP would pin each client's one HTTP/2 connection to one pod.
    const viaVirtualIp = services.filter((s) => s.spec.clusterIP !== 'None' && selects(s.spec.selector, component(objects, target.component).spec.template.metadata.labels) && s.spec.ports.some((p: Json) => p.port === target.port));
    assert.deepEqual(viaVirtualIp.map((s) => s.metadata.name), [], `${variable}: the gRPC port is only on the headless Service`);
  }
  for (const cm of objects.filter((o) => o.kind === 'ConfigMap')) {
    for (const k of Object.keys(cm.data ?? {})) assert.ok(!k.endsWith('_SERVICE_ADDR'), `ConfigMap ${cm.metadata.name}: ${k} belongs to the containers that call the service`);
  }
  const seen = new Set<string>();
  for (const name of Object.keys(COMPONENTS)) {
    const [c] = podSpec(component(objects, name)).containers;
    for (const variable of READS[name]!) {
      const target = ADDRESS_TARGETS[variable];
      if (!variable.endsWith('_SERVICE_ADDR')) continue;
      assert.ok(target, `${name} reads ${variable}, which this test does not know`);
      const e = (c.env ?? []).find((x: Json) => x.name === variable);
      // Unset, the address would default to loopback.
      assert.ok(e, `${name} calls ${variable.replace(/_SERVICE_ADDR$/, '')}, so it sets ${variable}`);
      assert.equal(e.value, `dns:///${target.service}:${target.port}`, `${name}: ${variable}`);
      seen.add(variable);
    }
  }
  assert.deepEqual([...seen].sort(), Object.keys(ADDRESS_TARGETS).sort(), 'every address variable is wired somewhere');
});

/** The `routes: [...]` URLs of a nats.conf. */
function natsRoutes(conf: string): string[] {
  const block = /routes\s*[:=]?\s*\[([^\]]*)\]/.exec(conf)?.[1] ?? '';
  return block.split(/[\s,]+/).filter(Boolean);
}

test('when NATS_URL is configured, then it names the nats Service port, and NATS runs core NATS only: no JetStream, no volume', () => {
  const objects = baseObjects();
  const cm = find(objects, 'ConfigMap', CONFIG_MAP_NAME);
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
  // No service uses JetStream (grep -rn jetstream services): a stream store would hold nothing.
  assert.ok(!args.some((a) => ['-js', '--jetstream', '-sd', '--store_dir'].includes(a)), 'JetStream is not enabled on the command line');
  const conf = String(find(objects, 'ConfigMap', 'nats-config')?.data['nats.conf']);
  assert.doesNotMatch(conf, /jetstream/i, 'nor in nats.conf');
  assert.equal(nats.spec.volumeClaimTemplates, undefined, 'no volume');
});

for (const [label, dir] of BUILDS) {
  test(`when the ${label} build runs NATS, then its cluster routes name each of its pods through the headless Service, which the nodes may reach on the route port`, () => {
    const objects = build(dir);
    const nats = find(objects, 'StatefulSet', 'nats');
    assert.ok(nats);
    const headless = find(objects, 'Service', nats.spec.serviceName);
    assert.equal(headless?.spec.clusterIP, 'None', `serviceName ${nats.spec.serviceName} is headless (a DNS name per pod)`);
    const conf = String(find(objects, 'ConfigMap', 'nats-config')?.data['nats.conf']);
    const port = Number(/cluster\s*\{[^}]*\bport:\s*(\d+)/.exec(conf)?.[1]);
    assert.ok(headless.spec.ports.some((p: Json) => p.port === port), `${headless.metadata.name} has the route port ${port}`);
    const replicas = nats.spec.replicas ?? 1;
    const expected = Array.from({ length: replicas }, (_, i) => `nats-route://nats-${i}.${headless.metadata.name}:${port}`);
    assert.deepEqual(natsRoutes(conf), expected, 'one route per pod, no more: a missing one splits the cluster, an extra one is retried forever');
    assert.deepEqual(sorted(admitted(objects)).nats?.[port], ['nats'], 'only NATS nodes reach the route port');
  });
}

test('when a pod mounts a volume claim, then the claim exists, and every claim (or claim template) is mounted by some container', () => {
  for (const [label, dir] of BUILDS) {
    const objects = build(dir);
    const claims = objects.filter((o) => o.kind === 'PersistentVolumeClaim').map((o) => o.metadata.name);
    const used = new Set<string>();
    for (const w of objects.filter((o) => POD_KINDS.has(o.kind))) {
      const where = `${label}: ${w.kind}/${w.metadata.name}`;
      const mounted = new Set(containersOf(w).flatMap((c) => (c.volumeMounts ?? []).map((m: Json) => m.name)));
      for (const t of w.spec.volumeClaimTemplates ?? []) assert.ok(mounted.has(t.metadata.name), `${where}: claim template ${t.metadata.name} is mounted`);
      for (const v of podSpec(w).volumes ?? []) {
        if (!v.persistentVolumeClaim) continue;
        assert.ok(claims.includes(v.persistentVolumeClaim.claimName), `${where}: claim ${v.persistentVolumeClaim.claimName} exists`);
        assert.ok(mounted.has(v.name), `${where}: volume ${v.name} is mounted`);
        used.add(v.persistentVolumeClaim.claimName);
      }
    }
    assert.deepEqual(claims.filter((c) => !used.has(c)), [], `${label}: claims no pod uses`);
  }
});

test('when file-storage runs on the object store, then it is a Deployment without a volume claim, BLOB_STORE=s3 with a bucket and endpoint, and credentials from the Secret', () => {
  for (const [label, dir] of BUILDS) {
    const objects = build(dir);
    const fileStorage = component(objects, 'file-storage');
    const [c] = podSpec(fileStorage).containers;
    assert.equal(envValue(c, 'BLOB_STORE', objects), 's3', `${label}: BLOB_STORE`);
    for (const v of ['S3_BUCKET', 'S3_ENDPOINT', 'S3_REGION']) assert.ok(envValue(c, v, objects), `${label}: ${v} set`);
    assert.ok(/^https?:$/.test(new URL(envValue(c, 'S3_ENDPOINT', objects)!).protocol), `${label}: S3_ENDPOINT is an http(s) URL`);
    for (const v of ['S3_ACCESS_KEY_ID', 'S3_SECRET_ACCESS_KEY']) {
      const ref = secretRef(c, v);
      assert.deepEqual([ref?.name, ref?.key, ref?.optional], [SECRET_NAME, v, undefined], `${label}: ${v} from the Secret, required`);
    }
    assert.ok(!(podSpec(fileStorage).volumes ?? []).some((v: Json) => v.persistentVolumeClaim), `${label}: no volume claim`);
  }
});

test('when the gateway is deployed, then its CORS allow-list and per-key rate limits are set explicitly in every build, parse as the gateway parses them, allow no wildcard (and only https in production), and keep every limit on', () => {
  const VARS = ['corsAllowedOrigins', 'rateLimitPerSecond', 'rateLimitBurst', 'rateLimitCreatesPerMinute'] as const;
  for (const [label, dir] of BUILDS) {
    const objects = build(dir);
    const [c] = podSpec(component(objects, 'gateway')).containers;
    const raw = (k: (typeof VARS)[number]) => envValue(c, gatewayConfigSpec[k].env, objects);
    for (const k of VARS) assert.notEqual(raw(k), undefined, `${label}: ${gatewayConfigSpec[k].env} is set, not left to the code's default`);
    const origins = gatewayConfigSpec.corsAllowedOrigins.parse(raw('corsAllowedOrigins'));
    const [perSecond, burst, createsPerMinute] = [gatewayConfigSpec.rateLimitPerSecond.parse(raw('rateLimitPerSecond')), gatewayConfigSpec.rateLimitBurst.parse(raw('rateLimitBurst')), gatewayConfigSpec.rateLimitCreatesPerMinute.parse(raw('rateLimitCreatesPerMinute'))];
    assert.ok(perSecond > 0 && createsPerMinute > 0, `${label}: no limit turned off (${perSecond}/s, ${createsPerMinute} creates/min)`);
    assert.ok(burst >= perSecond, `${label}: the burst (${burst}) is at least a second's worth (${perSecond})`);
    if (label !== 'dev') assert.deepEqual(origins.filter((o) => !o.startsWith('https://')), [], `${label}: a page served over plain http cannot hold a key safely`);
  }
  assert.deepEqual(gatewayConfigSpec.corsAllowedOrigins.parse(envValue(podSpec(component(build(BASE_DIR), 'gateway')).containers[0], 'CORS_ALLOWED_ORIGINS', build(BASE_DIR))), [], 'base allows no origin');
});

test('when browser-pool and live-view run several replicas, then each pod is named by its pod name, rolls without stopping the others, and production runs two of each', () => {
  const fromPod = (c: Json, v: string) => (c.env ?? []).find((e: Json) => e.name === v)?.valueFrom?.fieldRef?.fieldPath;
  for (const [label, dir] of BUILDS) {
    const objects = build(dir);
    for (const [name, idVar] of [['browser-pool', 'POOL_INSTANCE_ID'], ['live-view', 'LIVE_VIEW_INSTANCE_ID']] as const) {
      const workload = component(objects, name);
      const [c] = podSpec(workload).containers;
      assert.ok(READS[name]!.has(idVar), `${name} reads ${idVar}`);
      assert.equal(fromPod(c, idVar), 'metadata.name', `${label}: ${name}'s ${idVar} is its pod's name (two replicas never share one)`);
      assert.notEqual(workload.spec.strategy?.type, 'Recreate', `${label}: ${name} rolls one pod at a time (its replicas hand over to each other)`);
      if (label === 'production') assert.equal(workload.spec.replicas, 2, `${label}: two ${name} replicas`);
    }
    const [pool] = podSpec(component(objects, 'browser-pool')).containers;
    assert.equal(fromPod(pool, 'POD_IP'), 'status.podIP', `${label}: the pool advertises its pod address`);
  }
});

test("when a container sets a variable, then its component's config spec declares it (a misspelt name fails here, not silently at run time)", () => {
  for (const [label, dir] of BUILDS) {
    const objects = build(dir);
    for (const name of Object.keys(COMPONENTS)) {
      const [c] = podSpec(component(objects, name)).containers;
      // A variable that only feeds another's value (`$(POD_IP)`) is read by the kubelet, not the process.
      const feeds = (v: string) => (c.env ?? []).some((e: Json) => typeof e.value === 'string' && e.value.includes(`$(${v})`));
      const unknown = (c.env ?? []).map((e: Json) => e.name).filter((v: string) => !READS[name]!.has(v) && !PROCESS_VARS.has(v) && !feeds(v));
      assert.deepEqual(unknown, [], `${label}: ${name} sets variables its config does not read`);
    }
    for (const cm of objects.filter((o) => o.kind === 'ConfigMap' && o.metadata.name === CONFIG_MAP_NAME)) {
      const readers = Object.keys(COMPONENTS).filter((name) => podSpec(component(objects, name)).containers[0].envFrom?.some((f: Json) => f.configMapRef?.name === CONFIG_MAP_NAME));
      assert.deepEqual(readers.sort(), Object.keys(COMPONENTS).sort(), `${label}: every component reads ConfigMap ${CONFIG_MAP_NAME}`);
      const unknown = Object.keys(cm.data ?? {}).filter((k) => !readers.some((name) => READS[name]!.has(k)) && !PROCESS_VARS.has(k));
      assert.deepEqual(unknown, [], `${label}: ConfigMap ${CONFIG_MAP_NAME} holds variables no component reads`);
    }
  }
});

test("when a component's spec requires a variable that has no default, then its container sets it (from the ConfigMap, the Secret or env)", () => {
  for (const [label, dir] of BUILDS) {
    const objects = build(dir);
    for (const [name, spec] of Object.entries(SPECS)) {
      const [c] = podSpec(component(objects, name)).containers;
      for (const field of Object.values(spec).filter(requiredWithoutDefault)) {
        const e = (c.env ?? []).find((x: Json) => x.name === field.env);
        const set = envValue(c, field.env, objects) !== undefined || (e?.valueFrom?.secretKeyRef && e.valueFrom.secretKeyRef.optional !== true);
        assert.ok(set, `${label}: ${name} cannot start without ${field.env}`);
      }
    }
  }
});

test('when a credential is set, then it comes from a secretKeyRef on the shared Secret, never a literal or a ConfigMap; the cluster-wide ones are required', () => {
  const credentials = new Set(Object.values(READS).flatMap((vars) => [...vars].filter(isSecretVar)));
  for (const v of ['DATABASE_URL', 'SIGNING_SECRET', 'INTERNAL_TOKEN', 'NATS_TOKEN', 'BOOTSTRAP_API_KEY', 'S3_SECRET_ACCESS_KEY', 'OPENAI_API_KEY']) {
    assert.ok(credentials.has(v), `${v} counts as a credential`);
  }
  for (const v of ['INTERNAL_TOKEN_FILE', 'LIVE_VIEW_TOKEN_TTL_SECONDS', 'S3_BUCKET']) assert.ok(!credentials.has(v), `${v} is no credential`);
  for (const [label, dir] of BUILDS) {
    const objects = build(dir);
    for (const cm of objects.filter((o) => o.kind === 'ConfigMap')) {
      const held = Object.keys(cm.data ?? {}).filter((k) => credentials.has(k));
      assert.deepEqual(held, [], `${label}: ConfigMap ${cm.metadata.name} holds credentials`);
    }
    for (const name of Object.keys(COMPONENTS)) {
      for (const c of containersOf(component(objects, name))) {
        for (const e of c.env ?? []) {
          if (!credentials.has(e.name)) continue;
          const where = `${label}: ${name}: ${e.name}`;
          assert.equal(e.value, undefined, `${where} is a literal`);
          assert.equal(e.valueFrom?.secretKeyRef?.name, SECRET_NAME, `${where} comes from Secret ${SECRET_NAME}`);
          assert.equal(e.valueFrom.secretKeyRef.key, e.name, `${where} reads the key of the same name`);
        }
      }
    }
  }
  const objects = baseObjects();
  for (const variable of REQUIRED_SECRET_VARS) assert.ok(Object.values(READS).some((vars) => vars.has(variable)), `some component reads ${variable}`);
  for (const name of Object.keys(COMPONENTS)) {
    const [c] = podSpec(component(objects, name)).containers;
    for (const variable of REQUIRED_SECRET_VARS.filter((v) => READS[name]!.has(v))) {
      const ref = secretRef(c, variable);
      assert.ok(ref, `${name} reads ${variable} from the Secret`);
      assert.notEqual(ref.optional, true, `${name}: ${variable} is required`);
    }
  }
  const [gateway] = podSpec(component(objects, 'gateway')).containers;
  assert.equal(secretRef(gateway, 'BOOTSTRAP_API_KEY')?.optional, true, 'BOOTSTRAP_API_KEY is optional');
});

// ---------------------------------------------------------------------------------------
// Trust between processes: credentials and NetworkPolicies

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

const policies = (objects: K8s[], type: 'Ingress' | 'Egress') =>
  objects.filter((o) => o.kind === 'NetworkPolicy').filter((np) => {
    assert.ok(np.spec.policyTypes?.length, `NetworkPolicy ${np.metadata.name}: policyTypes named`);
    return np.spec.policyTypes.includes(type);
  });

/** Per selected component, per port: who the NetworkPolicies let in. */
function admitted(objects: K8s[]): Map<string, Map<number, Set<string>>> {
  const out = new Map<string, Map<number, Set<string>>>();
  for (const np of policies(objects, 'Ingress')) {
    const where = `NetworkPolicy ${np.metadata.name}`;
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

/** The egress rules of every policy that limits a component's egress; undefined when none does (egress open). */
function egressRules(objects: K8s[], name: string): Json[] | undefined {
  const limiting = policies(objects, 'Egress').filter((np) => np.spec.podSelector?.matchLabels?.[LABEL_NAME] === name);
  return limiting.length ? limiting.flatMap((np) => np.spec.egress ?? []) : undefined;
}

const sorted = (m: Map<string, Map<number, Set<string>>>) =>
  Object.fromEntries([...m].sort(([a], [b]) => a.localeCompare(b)).map(([k, ports]) => [k, Object.fromEntries([...ports].sort(([a], [b]) => a - b).map(([p, s]) => [p, [...s].sort()]))]));

/** The cluster port of NATS, from its config. */
function natsClusterPort(objects: K8s[]): number {
  const conf = String(find(objects, 'ConfigMap', 'nats-config')?.data['nats.conf']);
  return Number(/cluster\s*\{[^}]*\bport:\s*(\d+)/.exec(conf)?.[1]);
}

test('when the base is built, then a default-deny NetworkPolicy selects every pod and admits nothing', () => {
  const denies = baseObjects().filter((o) => o.kind === 'NetworkPolicy' && Object.keys(o.spec.podSelector ?? {}).length === 0);
  assert.equal(denies.length, 1, 'one policy selects every pod');
  const [deny] = denies;
  assert.deepEqual(deny.spec.policyTypes, ['Ingress']);
  assert.deepEqual(deny.spec.ingress ?? [], [], 'it admits nothing');
});

/**
 * The ports a component's replicas call each other on: the addresses it advertises to its peers
 * (`*_ADVERTISE_*` of its spec, e.g. the pool's pod address, where calls about its browsers are
 * forwarded).
 */
function advertisedPeers(objects: Json[]): { component: string; port: number }[] {
  return Object.entries(READS).flatMap(([name, vars]) =>
    [...vars]
      .filter((v) => v.includes('_ADVERTISE_'))
      .map((v) => {
        const value = envValue(podSpec(component(objects, name)).containers[0], v, objects);
        assert.ok(value, `${name} sets ${v}: its peers reach it there`);
        assert.match(value, /\$\(POD_IP\):\d+$/, `${name}: ${v} is its own pod's address`);
        return { component: name, port: Number(/:(\d+)$/.exec(value)![1]) };
      }),
  );
}

test("when the base is built, then each component's NetworkPolicy admits exactly the callers its peers' code names, port by port, and the Ingress controller only on public ports", () => {
  const objects = baseObjects();
  const expected = new Map<string, Map<number, Set<string>>>();
  const allow = (service: string, port: number, caller: string) => {
    const ports = expected.get(service) ?? new Map<number, Set<string>>();
    expected.set(service, ports);
    ports.set(port, (ports.get(port) ?? new Set()).add(caller));
  };
  const natsUrl = new URL(find(objects, 'ConfigMap', CONFIG_MAP_NAME)!.data.NATS_URL);
  for (const [caller, vars] of Object.entries(READS)) {
    for (const v of vars) {
      const target = ADDRESS_TARGETS[v];
      if (target) allow(target.component, target.port, caller);
      if (v === 'NATS_URL') allow(natsUrl.hostname, Number(natsUrl.port), caller);
    }
  }
  allow('nats', natsClusterPort(objects), 'nats');
  for (const peer of advertisedPeers(objects)) allow(peer.component, peer.port, peer.component);
  allow('gateway', COMPONENTS.gateway!.portVars.PORT!, INGRESS_CONTROLLER);
  for (const edge of Object.values(PUBLIC_URLS)) allow(edge.service, edge.port, INGRESS_CONTROLLER);
  for (const edge of INTERNAL_EDGE_CALLERS) {
    const url = new URL(envValue(podSpec(component(objects, edge.service)).containers[0], edge.variable, objects) ?? 'x:');
    assert.deepEqual([url.hostname, Number(url.port)], [edge.service, edge.port], `${edge.variable} is the address these callers use`);
    for (const caller of edge.callers) allow(edge.service, edge.port, caller);
  }
  assert.deepEqual(sorted(admitted(objects)), sorted(expected));
  for (const w of objects.filter((o) => WORKLOAD_KINDS.has(o.kind))) {
    assert.ok(expected.has(w.spec.template.metadata.labels[LABEL_NAME]), `${w.metadata.name}: some policy lets its callers in`);
  }
});

for (const [label, dir] of BUILDS) {
  test(`when the ${label} build is reached from the Ingress controller, then exactly the gateway and the three public edges admit it: 8080, 8081, 8082 and 9222`, () => {
    const fromController = Object.entries(sorted(admitted(build(dir)))).flatMap(([service, ports]) =>
      Object.entries(ports)
        .filter(([, peers]) => peers.includes(INGRESS_CONTROLLER))
        .map(([port]) => `${service}:${port}`),
    );
    assert.deepEqual(fromController.sort(), ['browser-pool:9222', 'file-storage:8081', 'gateway:8080', 'live-view:8082']);
  });

  test(`when the ${label} build's NetworkPolicies name pods, then each selector picks pods a workload of the build runs`, () => {
    const objects = build(dir);
    for (const np of objects.filter((o) => o.kind === 'NetworkPolicy')) {
      const where = `${label}: NetworkPolicy ${np.metadata.name}`;
      if (Object.keys(np.spec.podSelector ?? {}).length) assert.ok(selectedWorkloads(objects, np.spec.podSelector.matchLabels).length, `${where}: podSelector matches no pod`);
      const peers = [...(np.spec.ingress ?? []).flatMap((r: Json) => r.from ?? []), ...(np.spec.egress ?? []).flatMap((r: Json) => r.to ?? [])];
      for (const peer of peers.filter((p: Json) => p.podSelector && !p.namespaceSelector)) {
        assert.ok(selectedWorkloads(objects, peer.podSelector.matchLabels).length, `${where}: peer ${JSON.stringify(peer.podSelector.matchLabels)} matches no pod`);
      }
    }
  });
}

/** Private, loopback, link-local, shared (CGNAT) and "this network" ranges: where cluster-internal addresses live. */
const INTERNAL_RANGES = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '0.0.0.0/8', 'fc00::/7', 'fe80::/10', '::1/128'];

test("when a browser opens pages, then the browser pool's egress reaches DNS, the callees its config names on their ports, Postgres, and public addresses only; other components' egress stays open", () => {
  for (const [label, dir] of BUILDS) {
    const objects = build(dir);
    const rules = egressRules(objects, 'browser-pool');
    assert.ok(rules, `${label}: a policy limits the browser pool's egress`);
    const expected = new Set<string>();
    for (const v of READS['browser-pool']!) {
      const target = ADDRESS_TARGETS[v];
      if (target) expected.add(`${target.component}:${target.port}`);
    }
    const natsUrl = new URL(find(objects, 'ConfigMap', CONFIG_MAP_NAME)!.data.NATS_URL);
    expected.add(`${natsUrl.hostname}:${natsUrl.port}`);
    if (find(objects, 'StatefulSet', 'postgres')) expected.add('postgres:5432');
    for (const peer of advertisedPeers(objects)) if (peer.component === 'browser-pool') expected.add(`browser-pool:${peer.port}`);
    const reached = new Set<string>();
    let dns = false;
    for (const rule of rules) {
      const ports = (rule.ports ?? []).map((p: Json) => `${p.port}/${p.protocol ?? 'TCP'}`).sort();
      for (const peer of rule.to ?? []) {
        if (peer.namespaceSelector) {
          assert.equal(peer.podSelector?.matchLabels?.['k8s-app'], 'kube-dns', `${label}: the only other namespace reached is DNS`);
          assert.deepEqual(ports, ['53/TCP', '53/UDP'], `${label}: DNS ports only`);
          dns = true;
        } else if (peer.podSelector) {
          for (const p of rule.ports ?? []) reached.add(`${peerName(peer, 'browser-pool egress')}:${p.port}`);
        } else {
          const { cidr, except = [] } = peer.ipBlock;
          if (ports.length) {
            // DATABASE_URL is external in production: its port, anywhere.
            assert.ok(READS['browser-pool']!.has('DATABASE_URL'));
            assert.deepEqual(ports, ['5432/TCP'], `${label}: ${cidr} is reached on the Postgres port only`);
          } else {
            const internal = INTERNAL_RANGES.filter((r) => r.includes(':') === cidr.includes(':'));
            assert.deepEqual(internal.filter((r) => !except.includes(r)), [], `${label}: ${cidr} on any port leaves out every internal range`);
          }
        }
      }
    }
    assert.ok(dns, `${label}: DNS is reachable`);
    assert.deepEqual([...reached].sort(), [...expected].sort(), `${label}: the in-namespace pods the browser pool reaches`);
    for (const name of Object.keys(COMPONENTS).filter((n) => n !== 'browser-pool')) {
      assert.equal(egressRules(objects, name), undefined, `${label}: ${name}'s egress stays open (model providers, object store)`);
    }
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

/** The keys of Secret SECRET_NAME the base's containers read, and whether each is required. */
function secretKeysRead(objects: K8s[]): Map<string, boolean> {
  const keys = new Map<string, boolean>();
  for (const w of objects.filter((o) => POD_KINDS.has(o.kind))) {
    for (const c of containersOf(w)) {
      for (const e of c.env ?? []) {
        const ref = e.valueFrom?.secretKeyRef;
        if (ref?.name === SECRET_NAME) keys.set(ref.key, (keys.get(ref.key) ?? false) || ref.optional !== true);
      }
    }
  }
  return keys;
}

/** A Secret's values, from stringData and (base64) data. */
function secretData(secret: K8s): Record<string, string> {
  const data: Record<string, string> = { ...(secret.stringData ?? {}) };
  for (const [k, v] of Object.entries(secret.data ?? {})) data[k] = Buffer.from(String(v), 'base64').toString('utf8');
  return data;
}

test('when the dev overlay is built, then its Secret provides every key base requires, all dev-only, and DATABASE_URL reaches the dev Postgres with its credentials', () => {
  const objects = build(DEV_DIR);
  const secret = find(objects, 'Secret', SECRET_NAME);
  assert.ok(secret, `dev defines Secret ${SECRET_NAME}`);
  const data = secretData(secret);
  for (const [key, required] of secretKeysRead(baseObjects())) if (required) assert.ok(data[key], `dev Secret provides ${key}`);
  for (const [key, value] of Object.entries(data)) assert.match(value, /dev-only/, `dev ${key} is marked as a dev-only placeholder`);
  assert.ok(data.SIGNING_SECRET!.length >= 32, 'SIGNING_SECRET is long enough for HMAC');
  assert.ok(data.INTERNAL_TOKEN!.length >= 32 && !/\s/.test(data.INTERNAL_TOKEN!), 'INTERNAL_TOKEN is one word of at least 32 characters (the services refuse less)');

  const db = new URL(data.DATABASE_URL!);
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

test("when the dev overlay runs MinIO, then file-storage's endpoint names its Service, its keys are MinIO's, the Job creates S3_BUCKET and only file-storage (and the Job) reach it", () => {
  const objects = build(DEV_DIR);
  const cm = find(objects, 'ConfigMap', CONFIG_MAP_NAME)!;
  const endpoint = new URL(cm.data.S3_ENDPOINT);
  const service = find(objects, 'Service', endpoint.hostname);
  assert.ok(service, `S3_ENDPOINT names Service ${endpoint.hostname}`);
  const port = service.spec.ports.find((p: Json) => p.port === Number(endpoint.port));
  assert.ok(port, `Service ${endpoint.hostname} has port ${endpoint.port}`);
  const [minio] = selectedWorkloads(objects, service.spec.selector);
  assert.ok(minio, 'a workload serves it');
  const [c] = podSpec(minio).containers;
  assert.match(c.image, /^minio\/minio:RELEASE\./, 'a pinned MinIO release');
  assert.equal(cm.data.S3_FORCE_PATH_STYLE, 'true', 'MinIO serves path-style bucket URLs');
  const root = secretData(find(objects, 'Secret', c.envFrom[0].secretRef.name)!);
  const app = secretData(find(objects, 'Secret', SECRET_NAME)!);
  assert.deepEqual([app.S3_ACCESS_KEY_ID, app.S3_SECRET_ACCESS_KEY], [root.MINIO_ROOT_USER, root.MINIO_ROOT_PASSWORD], "file-storage signs with MinIO's credentials");

  const job = objects.find((o) => o.kind === 'Job');
  assert.ok(job, 'a Job creates the bucket');
  const [mc] = podSpec(job).containers;
  const alias = (mc.env ?? []).find((e: Json) => /^MC_HOST_/.test(e.name));
  assert.ok(alias, 'mc gets its alias from MC_HOST_<alias>');
  const target = new URL(alias.value);
  assert.deepEqual([target.hostname, target.port], [endpoint.hostname, endpoint.port], 'the Job talks to the same MinIO');
  assert.ok(mc.args.includes(`${alias.name.slice('MC_HOST_'.length)}/${cm.data.S3_BUCKET}`), `the Job creates bucket ${cm.data.S3_BUCKET}`);
  assert.ok(mc.args.includes('--ignore-existing'), 'running it again is harmless');

  const podPort = containerPortNumber(c, port.targetPort ?? port.port);
  assert.deepEqual(sorted(admitted(objects))[minio.metadata.name], { [String(podPort)]: ['file-storage', job.spec.template.metadata.labels[LABEL_NAME]].sort() });
});

test('when the production overlay is built, then the autoscaler keeps two gateways, file-storage runs two pods, NATS three, browsers keep the sandbox, and the Secret is managed outside the manifests', () => {
  const objects = build(PROD_DIR);
  const gatewayHpa = objects.find((o) => o.kind === 'HorizontalPodAutoscaler' && o.spec.scaleTargetRef.name === 'gateway');
  assert.ok(gatewayHpa && gatewayHpa.spec.minReplicas >= 2, 'at least two gateways');
  assert.equal(component(objects, 'file-storage').spec.replicas, 2);
  assert.equal(find(objects, 'StatefulSet', 'nats')?.spec.replicas, 3);
  assert.equal(envValue(podSpec(component(objects, 'browser-pool')).containers[0], 'CHROMIUM_NO_SANDBOX', objects), 'false', "production keeps Chromium's sandbox");
  assert.equal(find(objects, 'Secret', SECRET_NAME), undefined, 'production does not ship secret values');
  assert.equal(find(objects, 'StatefulSet', 'postgres'), undefined, 'production uses an external Postgres');
  const text = readFileSync(path.join(PROD_DIR, 'kustomization.yaml'), 'utf8');
  for (const key of [SECRET_NAME, ...secretKeysRead(objects).keys()]) assert.ok(text.includes(key), `production notes ${key}`);
});

// ---------------------------------------------------------------------------------------
// Disruption budgets and autoscalers

/** The fewest pods a workload runs: its autoscaler's minimum, else its replica count (1 when unset). */
function fewestPods(objects: K8s[], workload: K8s): number {
  const hpa = objects.find((o) => o.kind === 'HorizontalPodAutoscaler' && o.spec.scaleTargetRef.kind === workload.kind && o.spec.scaleTargetRef.name === workload.metadata.name);
  return hpa?.spec.minReplicas ?? workload.spec.replicas ?? 1;
}

for (const [label, dir] of BUILDS) {
  test(`when the ${label} build's nodes are drained, then every component and NATS has one PodDisruptionBudget, each selects one workload's pods and never blocks the drain for good`, () => {
    const objects = build(dir);
    const budgets = objects.filter((o) => o.kind === 'PodDisruptionBudget');
    const covered: string[] = [];
    for (const pdb of budgets) {
      const where = `${label}: PodDisruptionBudget ${pdb.metadata.name}`;
      assert.equal(pdb.apiVersion, 'policy/v1', where);
      const selected = selectedWorkloads(objects, pdb.spec.selector?.matchLabels).filter((w) => WORKLOAD_KINDS.has(w.kind));
      assert.equal(selected.length, 1, `${where} selects exactly one workload's pods`);
      const [workload] = selected;
      covered.push(workload!.metadata.name);
      const { minAvailable, maxUnavailable } = pdb.spec;
      assert.ok((minAvailable === undefined) !== (maxUnavailable === undefined), `${where}: minAvailable or maxUnavailable`);
      if (maxUnavailable !== undefined) assert.ok(Number.isInteger(maxUnavailable) && maxUnavailable >= 1, `${where}: maxUnavailable ≥ 1`);
      else assert.ok(Number.isInteger(minAvailable) && minAvailable < fewestPods(objects, workload!), `${where}: minAvailable ${minAvailable} leaves a pod that may be evicted`);
    }
    assert.deepEqual(covered.sort(), [...Object.keys(COMPONENTS), 'nats'].sort(), `${label}: one budget per component`);
  });
}

test('when load grows, then the gateway and run scale on CPU through autoscaling/v2, each autoscaler targets an existing Deployment, and the Deployment leaves the replica count to it', () => {
  for (const [label, dir] of BUILDS) {
    const objects = build(dir);
    const hpas = objects.filter((o) => o.kind === 'HorizontalPodAutoscaler');
    assert.deepEqual(hpas.map((h) => h.spec.scaleTargetRef.name).sort(), ['gateway', 'run'], `${label}: autoscaled`);
    for (const hpa of hpas) {
      const where = `${label}: HorizontalPodAutoscaler ${hpa.metadata.name}`;
      assert.equal(hpa.apiVersion, 'autoscaling/v2', where);
      const ref = hpa.spec.scaleTargetRef;
      assert.deepEqual([ref.apiVersion, ref.kind], ['apps/v1', 'Deployment'], `${where}: targets a Deployment`);
      const target = find(objects, 'Deployment', ref.name);
      assert.ok(target, `${where}: Deployment ${ref.name} exists`);
      assert.equal(target.spec.replicas, undefined, `${where}: ${ref.name} sets no replicas (each apply would reset the autoscaler's count)`);
      assert.ok(hpa.spec.minReplicas >= 1 && hpa.spec.maxReplicas > hpa.spec.minReplicas, `${where}: a range to scale in`);
      const [c] = podSpec(target).containers;
      const metric = hpa.spec.metrics.find((m: Json) => m.type === 'Resource' && m.resource.name === 'cpu');
      assert.ok(metric?.resource.target.type === 'Utilization' && metric.resource.target.averageUtilization > 0, `${where}: CPU utilization`);
      assert.ok(c.resources.requests.cpu, `${where}: utilization is measured against a CPU request`);
    }
  }
});

for (const [label, dir] of BUILDS) {
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
