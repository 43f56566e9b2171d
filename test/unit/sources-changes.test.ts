/** The service ports a source reports changed: exactly those that differ between two loads, found from the objects that changed. */
import { mkdir, mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import test from 'ava';
import { parseObject } from '../../src/model/parse.ts';
import type { ParsedObject } from '../../src/model/parsed.ts';
import type { Snapshot } from '../../src/model/types.ts';
import { changedServicePorts } from '../../src/proxier/changes.ts';
import { Decoder } from '../../src/sources/decoder.ts';
import { FileSource } from '../../src/sources/file.ts';
import { silentLogger } from '../../src/util/log.ts';

async function tempDir(t: { teardown: (fn: () => Promise<void>) => void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-changes-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A small seeded PRNG (mulberry32), so that a failing sequence can be replayed from its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const NAMES = ['a', 'b', 'c', 'd'];
/** Few addresses, so that ClusterIP conflicts happen. */
const CLUSTER_IPS = ['10.96.0.10', '10.96.0.11', '10.96.0.12'];
const POD_IPS = ['10.244.0.1', '10.244.0.2', '10.244.0.3'];
/** Few creation times, so that Services share one too (then namespace/name decides). */
const CREATED = ['2025-01-01T00:00:00Z', '2025-02-01T00:00:00Z', '2025-03-01T00:00:00Z'];
const PODS = ['p1', 'p2', 'p3'];
const SELECTORS = [{ app: 'a' }, { app: 'b' }, { app: 'a', tier: 'x' }];

function generator(rnd: () => number) {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const some = <T>(xs: readonly T[]): T[] => {
    const out = xs.filter(() => rnd() < 0.5);
    return out.length > 0 ? out : [pick(xs)];
  };
  const servicePorts = () => some([{ name: 'http', port: 80, protocol: 'TCP' }, { name: 'dns', port: pick([53, 54]), protocol: 'UDP' }]);
  const endpointPorts = () => some([{ name: 'http', port: 8080, protocol: 'TCP' }, { name: 'dns', port: 5353, protocol: 'UDP' }]);
  const objects: Array<() => unknown> = [
    () => ({ apiVersion: 'v1', kind: 'Service', metadata: { name: pick(NAMES), namespace: 'default', ...(rnd() < 0.5 ? { creationTimestamp: pick(CREATED) } : {}) }, spec: { clusterIP: pick(CLUSTER_IPS), ports: servicePorts() } }),
    () => ({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: `${pick(NAMES)}-${pick(['x', 'y'])}`, namespace: 'default', labels: { 'kubernetes.io/service-name': pick(NAMES) } },
      addressType: 'IPv4',
      ports: endpointPorts(),
      endpoints: some(POD_IPS).map((ip) => ({ addresses: [ip], conditions: { ready: rnd() < 0.8 } })),
    }),
    () => ({
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: { name: pick(NAMES), namespace: 'default' },
      subsets: [{ addresses: some(POD_IPS).map((ip) => ({ ip })), ports: endpointPorts() }],
    }),
    // NodePorts (one out of range) and external IPs on the few ClusterIPs, with and without creation times: frontend claims (model/claims.ts).
    () => ({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: pick(NAMES), namespace: 'np', ...(rnd() < 0.7 ? { creationTimestamp: pick(CREATED) } : {}) },
      spec: { type: 'NodePort', clusterIP: pick(CLUSTER_IPS), ports: [{ name: 'http', port: 80, nodePort: pick([30080, 30081, 22]) }], externalIPs: rnd() < 0.3 ? [pick(CLUSTER_IPS)] : [] },
    }),
    // Shepherd: no ClusterIP, so drover allocates one.
    () => ({
      kind: 'Service',
      metadata: { name: pick(NAMES), namespace: 'shepherd' },
      spec: { ports: [{ name: 'http', port: pick([80, 81]), target_port: 8080, protocol: 'tcp' }], type: 'ClusterIP' },
      status: { cluster_ip: '', endpoints: some(POD_IPS).map((ip) => `${ip}:8080`) },
    }),
    // Selector Services, Pods and Nodes: the endpoints of a Service without slices come from the Pods it selects.
    () => ({
      apiVersion: 'v1',
      kind: 'Service',
      // Names no slice has, so that Pods decide their endpoints.
      metadata: { name: pick(['s1', 's2', 's3']), namespace: 'default' },
      spec: { clusterIP: pick(['10.96.1.1', '10.96.1.2']), ports: [{ name: 'http', port: 80, targetPort: pick([8080, 'http']) }], selector: pick(SELECTORS), publishNotReadyAddresses: rnd() < 0.2 },
    }),
    () => ({
      kind: 'Service',
      metadata: { name: pick(['s1', 's2']), namespace: 'shepherd' },
      spec: { ports: [{ name: 'http', port: pick([80, 81]), target_port: 8080 }], selector: pick(SELECTORS) },
      status: { cluster_ip: '', endpoints: [] },
    }),
    () => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: pick(PODS), namespace: pick(['default', 'default', 'shepherd', 'other']), labels: pick(SELECTORS), ...(rnd() < 0.2 ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}) },
      spec: { nodeName: pick(['n1', 'n2']), containers: [{ ports: [{ name: pick(['http', 'web']), containerPort: pick([8080, 9090]) }] }] },
      status: { phase: pick(['Running', 'Running', 'Pending', 'Failed']), ...(rnd() < 0.9 ? { podIP: pick(POD_IPS) } : {}), conditions: [{ type: 'Ready', status: pick(['True', 'False']) }] },
    }),
    () => ({
      kind: 'Pod',
      metadata: { name: pick(PODS), namespace: pick(['default', 'shepherd']), labels: pick(SELECTORS) },
      status: { phase: pick(['Running', 'Pending']), pod_ip: pick(POD_IPS) },
    }),
    () => ({ apiVersion: 'v1', kind: 'Node', metadata: { name: pick(['n1', 'n2']), labels: { 'topology.kubernetes.io/zone': pick(['z1', 'z2']) } } }),
    // Invalid: the object keeps its last valid version, if it has one.
    () => ({ apiVersion: 'v1', kind: 'Service', metadata: { name: pick(NAMES), namespace: 'default' }, spec: { clusterIP: pick(CLUSTER_IPS), ports: [{ name: 'http', port: 70000 }] } }),
  ];
  return { pick, object: () => pick(objects)() };
}

const FILES = ['f0.yaml', 'f1.yaml', 'f2.json', 'sub/f3.yaml', 'sub/f4.yaml'];

test('over random file edits, the reported changes are exactly the service ports that differ between loads', async (t) => {
  for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
    const dir = await tempDir(t);
    await mkdir(join(dir, 'sub'));
    const rnd = prng(seed);
    const gen = generator(rnd);
    const files = new Map<string, { docs: unknown[]; broken: boolean }>();
    const src = new FileSource(dir, { serviceCIDR: '10.96.0.0/12', logger: silentLogger() });
    let before: Snapshot | undefined;
    for (let step = 0; step < 30; step++) {
      const touched = new Set<string>();
      for (let n = 1 + Math.floor(rnd() * 3); n > 0; n--) {
        const name = gen.pick(FILES);
        touched.add(name);
        const f = files.get(name) ?? { docs: [], broken: false };
        files.set(name, f);
        const op = rnd();
        if (op < 0.4 || f.docs.length === 0) f.docs.push(gen.object());
        else if (op < 0.65) f.docs[Math.floor(rnd() * f.docs.length)] = gen.object();
        else if (op < 0.85) f.docs.splice(Math.floor(rnd() * f.docs.length), 1);
        else if (op < 0.93) f.broken = !f.broken;
        else files.delete(name);
      }
      for (const name of touched) {
        const f = files.get(name);
        if (f === undefined) await rm(join(dir, name), { force: true });
        else {
          const docs = f.docs.map((d) => JSON.stringify(d));
          if (f.broken) docs.push('{ unterminated: [');
          await writeFile(join(dir, name), docs.join('\n---\n'));
        }
      }
      const r = await src.load();
      if (before === undefined) t.is(r.changed, undefined, 'the first load cannot tell');
      else t.deepEqual([...r.changed!].sort(), [...changedServicePorts(before, r.snapshot)].sort(), `seed ${seed}, step ${step}`);
      before = r.snapshot;
    }
  }
});

const service = (name: string, ip: string) =>
  `apiVersion: v1\nkind: Service\nmetadata: {name: ${name}, namespace: default}\nspec:\n  clusterIP: ${ip}\n  ports: [{name: http, port: 80}, {name: dns, port: 53, protocol: UDP}]\n`;
const slice = (name: string, ip: string) =>
  `apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: ${name}-1, namespace: default, labels: {kubernetes.io/service-name: ${name}}}\naddressType: IPv4\n` +
  `ports: [{name: http, port: 8080}, {name: dns, port: 5353, protocol: UDP}]\nendpoints: [{addresses: [${ip}]}]\n`;

test('one changed slice in a folder of many files yields exactly its Service ports', async (t) => {
  const dir = await tempDir(t);
  const old = new Date(Date.now() - 60_000); // older than the cache's racy window, so unchanged files are not read again
  for (let i = 0; i < 60; i++) {
    for (const [file, text] of [
      [`svc-${i}.yaml`, service(`s${i}`, `10.96.1.${i + 1}`)],
      [`eps/slice-${i}.yaml`, slice(`s${i}`, `10.244.1.${i + 1}`)],
    ] as const) {
      await mkdir(dirname(join(dir, file)), { recursive: true });
      await writeFile(join(dir, file), text);
      await utimes(join(dir, file), old, old);
    }
  }
  const src = new FileSource(dir, { serviceCIDR: '10.96.0.0/12', logger: silentLogger() });
  const first = await src.load();
  t.is(first.snapshot.services.size, 120);
  t.deepEqual((await src.load()).changed, new Set(), 'nothing changed: nothing reported');

  await writeFile(join(dir, 'eps/slice-17.yaml'), slice('s17', '10.244.9.9'));
  await utimes(join(dir, 'eps/slice-17.yaml'), old, new Date(Date.now() - 30_000));
  const r = await src.load();
  t.deepEqual([...r.changed!].sort(), ['default/s17:dns', 'default/s17:http']);
  t.deepEqual([...r.changed!].sort(), [...changedServicePorts(first.snapshot, r.snapshot)].sort());
});

/** Parse a raw object as an API source would hand it over. */
function parsed(raw: unknown): ParsedObject {
  const r = parseObject({ file: 'api', index: 0, raw });
  if (r.status !== 'ok') throw new Error(`test object does not parse: ${JSON.stringify(r)}`);
  return r.object;
}

test('the Decoder fed object by object reports the service ports of each changed object', (t) => {
  const decoder = new Decoder({ serviceCIDR: '10.96.0.0/12' });
  const web = parsed({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: 'default' }, spec: { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80 }] } });
  const db = parsed({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'db', namespace: 'default' }, spec: { clusterIP: '10.96.0.11', ports: [{ name: 'pg', port: 5432 }] } });
  const webSlice = (ip: string) =>
    parsed({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'web-1', namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } },
      addressType: 'IPv4',
      ports: [{ name: 'http', port: 8080 }],
      endpoints: [{ addresses: [ip] }],
    });
  const first = decoder.apply({ upsert: [[web.identity, [web]], [db.identity, [db]], ['EndpointSlice/default/web-1', [webSlice('10.244.0.1')]]], remove: [] });
  t.is(first.changed, undefined);
  t.is(first.snapshot.services.size, 2);

  t.deepEqual(decoder.apply({ upsert: [['EndpointSlice/default/web-1', [webSlice('10.244.0.2')]]], remove: [] }).changed, new Set(['default/web:http']));
  t.deepEqual(decoder.apply({ upsert: [['EndpointSlice/default/web-1', [webSlice('10.244.0.2')]]], remove: [] }).changed, new Set(), 'the same again: no change');
  const gone = decoder.apply({ upsert: [], remove: [db.identity] });
  t.deepEqual(gone.changed, new Set(['default/db:pg']));
  t.deepEqual([...gone.snapshot.services.keys()], ['default/web:http']);
  t.is(decoder.current, gone.snapshot);
});

const k8sService = (name: string, ip: string, port = 80) =>
  parsed({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default' }, spec: { clusterIP: ip, ports: [{ name: 'http', port }] } });

test('a service that wins a ClusterIP conflict when the other one leaves is reported, though its objects did not change', (t) => {
  const decoder = new Decoder({ serviceCIDR: '10.96.0.0/12' });
  const a = k8sService('a', '10.96.0.10');
  const b = k8sService('b', '10.96.0.10');
  const first = decoder.apply({ upsert: [[a.identity, [a]], [b.identity, [b]]], remove: [] });
  t.deepEqual([...first.snapshot.services.keys()], ['default/a:http']);
  t.deepEqual(decoder.apply({ upsert: [[a.identity, [k8sService('a', '10.96.0.11')]]], remove: [] }).changed, new Set(['default/a:http', 'default/b:http']));
});

test('a service whose allocated ClusterIP another service takes is reported, though its objects did not change', (t) => {
  const decoder = new Decoder({ serviceCIDR: '10.96.0.0/12' });
  const shepherd = parsed({
    kind: 'Service',
    metadata: { name: 'web', namespace: 'default' },
    spec: { ports: [{ name: 'http', port: 80, target_port: 8080, protocol: 'tcp' }], type: 'ClusterIP' },
    status: { cluster_ip: '', endpoints: ['10.244.0.1:8080'] },
  });
  const first = decoder.apply({ upsert: [[shepherd.identity, [shepherd]]], remove: [] });
  const [allocation] = first.allocations;
  const taker = k8sService('taker', allocation!.clusterIP, 443);
  const r = decoder.apply({ upsert: [[taker.identity, [taker]]], remove: [] });
  t.not(r.allocations[0]!.clusterIP, allocation!.clusterIP);
  t.deepEqual(r.changed, new Set(['default/taker:http', 'default/web:http']));
});

const selectorService = (name: string, ip: string, app: string) =>
  parsed({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default' }, spec: { clusterIP: ip, ports: [{ name: 'http', port: 80, targetPort: 8080 }], selector: { app } } });
const webPod = (app: string, ready: boolean, namespace = 'default') =>
  parsed({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'p1', namespace, labels: { app } },
    spec: { nodeName: 'n1' },
    status: { phase: 'Running', podIP: '10.244.0.1', conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
  });

test('a Pod change reports the Services that select it before or after, and no other', (t) => {
  const decoder = new Decoder({ serviceCIDR: '10.96.0.0/12' });
  const a = selectorService('a', '10.96.0.10', 'a');
  const b = selectorService('b', '10.96.0.11', 'b');
  const c = selectorService('c', '10.96.0.12', 'c');
  decoder.apply({ upsert: [[a.identity, [a]], [b.identity, [b]], [c.identity, [c]], ['Pod/default/p1', [webPod('a', true)]]], remove: [] });
  t.deepEqual(decoder.current.services.get('default/a:http')?.endpoints.map((e) => e.pod), ['default/p1']);

  t.deepEqual(decoder.apply({ upsert: [['Pod/default/p1', [webPod('a', false)]]], remove: [] }).changed, new Set(['default/a:http']), 'not ready');
  t.deepEqual(decoder.apply({ upsert: [['Pod/default/p1', [webPod('a', false)]]], remove: [] }).changed, new Set(), 'the same again');
  t.deepEqual(decoder.apply({ upsert: [['Pod/default/p1', [webPod('b', true)]]], remove: [] }).changed, new Set(['default/a:http', 'default/b:http']), 'relabelled');
  t.deepEqual(decoder.apply({ upsert: [['Pod/default/p1', [webPod('b', true, 'other')]]], remove: [] }).changed, new Set(['default/b:http']), 'moved away');
  t.deepEqual(decoder.apply({ upsert: [['Pod/default/p1', [webPod('b', true)]]], remove: [] }).changed, new Set(['default/b:http']), 'back');
  t.deepEqual(decoder.apply({ upsert: [], remove: ['Pod/default/p1'] }).changed, new Set(['default/b:http']), 'deleted');
  t.deepEqual(decoder.current.services.get('default/b:http')?.endpoints, []);
});

test('a Node change reports the Services whose Pod-derived endpoints take its zone', (t) => {
  const decoder = new Decoder({ serviceCIDR: '10.96.0.0/12' });
  const a = selectorService('a', '10.96.0.10', 'a');
  const plain = k8sService('plain', '10.96.0.20');
  const node = (zone: string) => parsed({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1', labels: { 'topology.kubernetes.io/zone': zone } } });
  decoder.apply({ upsert: [[a.identity, [a]], [plain.identity, [plain]], ['Pod/default/p1', [webPod('a', true)]], ['Node//n1', [node('z1')]]], remove: [] });
  const r = decoder.apply({ upsert: [['Node//n1', [node('z2')]]], remove: [] });
  t.deepEqual(r.changed, new Set(['default/a:http']));
  t.is(r.snapshot.services.get('default/a:http')?.endpoints[0]?.zone, 'z2');
});
