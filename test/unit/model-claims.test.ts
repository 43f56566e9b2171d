/**
 * Frontend ownership (model/claims.ts): who keeps a ClusterIP, a NodePort
 * or an external address that two Services claim, decided by creation time
 * then namespace/name, whatever order the objects come in and whatever was
 * served before; NodePorts outside the node-port range left out. Every
 * mode renders exactly what the model decided.
 */
import test from 'ava';
import { parseNodePortRange } from '../../src/model/claims.ts';
import { compareByCreation, readCreationTime } from '../../src/model/created.ts';
import { buildSnapshot, type BuildOptions } from '../../src/model/normalise.ts';
import type { ParsedObject } from '../../src/model/parsed.ts';
import type { Snapshot } from '../../src/model/types.ts';
import { allModes } from '../../src/modes/registry.ts';
import { Decoder } from '../../src/sources/decoder.ts';
import { okObject, parse } from './model-helpers.ts';

const CIDR = { serviceCIDR: '10.96.0.0/12' };

/** A v1 Service with one or more TCP ports, created at `created` (RFC 3339) when given. */
function svc(ns: string, name: string, ip: string, opts: { created?: string; type?: string; ports?: unknown[]; extra?: Record<string, unknown> } = {}): ParsedObject {
  return okObject(
    parse({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace: ns, ...(opts.created !== undefined ? { creationTimestamp: opts.created } : {}) },
      spec: { type: opts.type ?? 'ClusterIP', clusterIP: ip, ports: opts.ports ?? [{ name: 'http', port: 80 }], ...opts.extra },
    }),
  );
}

/** An EndpointSlice of Service ns/name with one endpoint at `ip`:8080. */
function slice(ns: string, name: string, ip: string): ParsedObject {
  return okObject(
    parse({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: `${name}-1`, namespace: ns, labels: { 'kubernetes.io/service-name': name } },
      addressType: 'IPv4',
      ports: [{ name: 'http', port: 8080 }],
      endpoints: [{ addresses: [ip] }],
    }),
  );
}

/** Every order of `xs` (for a handful of items). */
function permutations<T>(xs: readonly T[]): T[][] {
  if (xs.length <= 1) return [[...xs]];
  return xs.flatMap((x, i) => permutations([...xs.slice(0, i), ...xs.slice(i + 1)]).map((rest) => [x, ...rest]));
}

const served = (s: Snapshot) => [...s.services.values()].map((sp) => `${sp.key} ${sp.clusterIP}:${sp.port} np=${sp.frontends.nodePort ?? '-'} eps=${sp.endpoints.map((e) => e.ip).join(',')}`);

test('the node-port range reads as the API server reads --service-node-port-range', (t) => {
  t.deepEqual(parseNodePortRange('30000-32767'), { first: 30000, last: 32767 });
  t.deepEqual(parseNodePortRange(' 30000+767 '), { first: 30000, last: 30767 });
  t.deepEqual(parseNodePortRange('8080'), { first: 8080, last: 8080 });
  t.throws(() => parseNodePortRange('a-b'), { message: '"a-b" is not a port range (expected e.g. 30000-32767)' });
  t.throws(() => parseNodePortRange('0-100'), { message: '"0-100": port 0 is out of range 1-65535' });
  t.throws(() => parseNodePortRange('30000-70000'), { message: '"30000-70000": port 70000 is out of range 1-65535' });
  t.throws(() => parseNodePortRange('32767-30000'), { message: '"32767-30000": the end port is less than the start port' });
});

test('creation times: RFC 3339 strings and Dates read, Go zero time is none, garbage is a problem; with a time goes first', (t) => {
  t.deepEqual(readCreationTime('2025-03-02T10:14:07Z'), { ms: Date.UTC(2025, 2, 2, 10, 14, 7) });
  t.deepEqual(readCreationTime('2025-03-02T11:14:07.123456789+01:00'), { ms: Date.UTC(2025, 2, 2, 10, 14, 7, 123) });
  t.deepEqual(readCreationTime(new Date(Date.UTC(2025, 0, 1))), { ms: Date.UTC(2025, 0, 1) });
  t.deepEqual(readCreationTime('0001-01-01T00:00:00Z'), {});
  t.deepEqual(readCreationTime(undefined), {});
  t.true('problem' in readCreationTime('yesterday'));
  const order = [
    { key: 'z/late', createdAt: 2000 },
    { key: 'a/none' },
    { key: 'b/none' },
    { key: 'z/early', createdAt: 1000 },
  ].sort(compareByCreation);
  t.deepEqual(order.map((o) => o.key), ['z/early', 'z/late', 'a/none', 'b/none']);
  // A bad time is a warning on a Service still served.
  const r = parse({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', creationTimestamp: 'yesterday' }, spec: { clusterIP: '10.96.0.10', ports: [{ port: 80 }] } });
  t.is(r.status, 'ok');
  t.deepEqual(r.status === 'ok' ? r.warnings.map(String) : [], [
    'in.yaml: Service default/web: metadata.creationTimestamp: "yesterday" is not an RFC 3339 time (e.g. "2025-03-02T10:14:07Z"); the Service counts as created after every Service with a creation time',
  ]);
});

/** default/web, created first, and aaa/clash, created later, on the same ClusterIP:port (the case): aaa/clash sorts first by name. */
const WEB = [svc('default', 'web', '10.96.0.10', { created: '2025-01-01T00:00:00Z' }), slice('default', 'web', '10.244.1.1')];
const CLASH = [svc('aaa', 'clash', '10.96.0.10', { created: '2025-06-01T00:00:00Z' }), slice('aaa', 'clash', '10.244.9.9')];

test('a ClusterIP clash goes to the Service created first, in every arrival order and whatever was served before', (t) => {
  const webOnly = buildSnapshot(WEB, CIDR).snapshot;
  const clashOnly = buildSnapshot(CLASH, CIDR).snapshot;
  for (const objects of permutations([...WEB, ...CLASH])) {
    for (const previous of [undefined, webOnly, clashOnly]) {
      const r = buildSnapshot(objects, { ...CIDR, ...(previous ? { previous } : {}) });
      t.deepEqual(served(r.snapshot), ['default/web:http 10.96.0.10:80 np=- eps=10.244.1.1']);
      t.deepEqual(r.errors, []);
      t.deepEqual(r.refusals.map(String), [
        'in.yaml: Service aaa/clash: spec.ports[0]: 10.96.0.10:80/TCP is already used by Service default/web (in.yaml), created earlier; service skipped',
      ]);
    }
  }
  // Without creation times, namespace/name decides; a Service with a time beats one without.
  const untimed = [svc('default', 'web', '10.96.0.10'), svc('aaa', 'clash', '10.96.0.10')];
  t.deepEqual(served(buildSnapshot(untimed, CIDR).snapshot), ['aaa/clash:http 10.96.0.10:80 np=- eps=']);
  const webTimed = [svc('default', 'web', '10.96.0.10', { created: '2025-01-01T00:00:00Z' }), svc('aaa', 'clash', '10.96.0.10')];
  const r = buildSnapshot(webTimed, CIDR);
  t.deepEqual(served(r.snapshot), ['default/web:http 10.96.0.10:80 np=- eps=']);
  t.regex(r.refusals[0]!.message, /Service default\/web \(in\.yaml\), which has a creation time and this one has none; service skipped$/);
});

const NP = (port: number, nodePort: number, name = 'http') => ({ name, port, nodePort });

test('a NodePort outside the range is left out with one line naming the field; the ClusterIP and the other ports stay', (t) => {
  const objects = [
    svc('default', 'ssh', '10.96.0.30', { type: 'NodePort', ports: [NP(80, 22), NP(81, 30081, 'web')] }),
    svc('default', 'health', '10.96.0.31', { type: 'LoadBalancer', ports: [NP(80, 30090)], extra: { externalTrafficPolicy: 'Local', healthCheckNodePort: 10256 } }),
  ];
  const r = buildSnapshot(objects, CIDR);
  t.deepEqual(r.refusals.map(String), [
    'in.yaml: Service default/health: spec.healthCheckNodePort: 10256 is outside the NodePort range 30000-32767 (--service-node-port-range); health check not served',
    'in.yaml: Service default/ssh: spec.ports[0].nodePort: 22 is outside the NodePort range 30000-32767 (--service-node-port-range); NodePort not served',
  ]);
  t.deepEqual(served(r.snapshot), ['default/health:http 10.96.0.31:80 np=30090 eps=', 'default/ssh:http 10.96.0.30:80 np=- eps=', 'default/ssh:web 10.96.0.30:81 np=30081 eps=']);
  t.is(r.snapshot.services.get('default/health:http')!.frontends.healthCheckNodePort, undefined);
  // Another range: 22 is allowed, 30081 is not.
  const wide = buildSnapshot(objects, { ...CIDR, nodePortRange: parseNodePortRange('1-30000') });
  t.deepEqual(served(wide.snapshot).slice(1), ['default/ssh:http 10.96.0.30:80 np=22 eps=', 'default/ssh:web 10.96.0.30:81 np=- eps=']);
});

test('a NodePort clash leaves out only the later Service\'s NodePort; another protocol on the same number is no clash', (t) => {
  const first = svc('zzz', 'first', '10.96.0.20', { type: 'NodePort', created: '2025-01-01T00:00:00Z', ports: [NP(80, 30080)] });
  const later = svc('aaa', 'later', '10.96.0.21', { type: 'NodePort', created: '2025-02-01T00:00:00Z', ports: [NP(80, 30080), NP(81, 30082, 'two'), { name: 'dns', port: 53, protocol: 'UDP', nodePort: 30080 }] });
  for (const objects of permutations([first, later])) {
    const r = buildSnapshot(objects, CIDR);
    t.deepEqual(served(r.snapshot), [
      'aaa/later:dns 10.96.0.21:53 np=30080 eps=',
      'aaa/later:http 10.96.0.21:80 np=- eps=',
      'aaa/later:two 10.96.0.21:81 np=30082 eps=',
      'zzz/first:http 10.96.0.20:80 np=30080 eps=',
    ]);
    t.deepEqual(r.refusals.map(String), [
      'in.yaml: Service aaa/later: spec.ports[0].nodePort: NodePort 30080/TCP is already used by Service zzz/first (in.yaml), created earlier; NodePort not served',
    ]);
  }
});

test('an external IP on another Service\'s ClusterIP:port, or on an earlier Service\'s external IP, is left out at that port only', (t) => {
  const a = svc('default', 'a', '10.96.0.40', { created: '2025-01-01T00:00:00Z', extra: { externalIPs: ['192.0.2.7'] } });
  // b is older than c, but a ClusterIP always beats an external address.
  const b = svc('default', 'b', '10.96.0.41', { created: '2024-01-01T00:00:00Z', ports: [{ name: 'http', port: 80 }, { name: 'alt', port: 8080 }], extra: { externalIPs: ['10.96.0.42', '192.0.2.7'] } });
  const c = svc('default', 'c', '10.96.0.42', { created: '2025-03-01T00:00:00Z' });
  const r = buildSnapshot([c, b, a], CIDR);
  const ext = (key: string) => r.snapshot.services.get(key)!.frontends.externalIPs.map((e) => e.ip);
  t.deepEqual(ext('default/b:http'), ['192.0.2.7']);
  t.deepEqual(ext('default/b:alt'), ['10.96.0.42', '192.0.2.7']);
  t.deepEqual(ext('default/a:http'), []);
  t.deepEqual(r.refusals.map(String), [
    'in.yaml: Service default/b: spec.externalIPs: 10.96.0.42:80/TCP (port http) is already used by Service default/c (in.yaml) as its ClusterIP, which goes first; not served at this address',
    'in.yaml: Service default/a: spec.externalIPs: 192.0.2.7:80/TCP (port http) is already used by Service default/b (in.yaml), created earlier; not served at this address',
  ]);
});

test('every mode renders what the model decided: the same bytes in every arrival order, and the same as without the refused frontends', async (t) => {
  const np = (created: string, nodePort: number, ip: string, ns: string, name: string) =>
    svc(ns, name, ip, { type: 'NodePort', created, ports: [NP(80, nodePort)] });
  const objects = [
    ...WEB,
    ...CLASH,
    np('2025-01-01T00:00:00Z', 30080, '10.96.0.20', 'zzz', 'first'),
    np('2025-02-01T00:00:00Z', 30080, '10.96.0.21', 'aaa', 'later'),
    np('2025-01-01T00:00:00Z', 22, '10.96.0.30', 'default', 'ssh'),
    slice('aaa', 'later', '10.244.2.2'),
  ];
  // What the refusals leave: aaa/clash gone, aaa/later and default/ssh without NodePort.
  const expected = [
    ...WEB,
    slice('aaa', 'clash', '10.244.9.9'),
    np('2025-01-01T00:00:00Z', 30080, '10.96.0.20', 'zzz', 'first'),
    svc('aaa', 'later', '10.96.0.21', { type: 'NodePort', ports: [{ name: 'http', port: 80 }] }),
    svc('default', 'ssh', '10.96.0.30', { type: 'NodePort', ports: [{ name: 'http', port: 80 }] }),
    slice('aaa', 'later', '10.244.2.2'),
  ];
  const opts = { render: { source: 'test', masqueradeAll: false, clusterCidr: '10.244.0.0/16', serviceCidr: '10.96.0.0/12' }, modes: {} };
  const build = (objs: readonly ParsedObject[], o: Partial<BuildOptions> = {}) => buildSnapshot(objs, { ...CIDR, ...o }).snapshot;
  const orders = [objects, [...objects].reverse(), [...objects.slice(3), ...objects.slice(0, 3)]];
  for (const mode of allModes()) {
    const want = await mode.render(build(expected), opts, []);
    t.deepEqual(want.leftOut, [], mode.name);
    for (const order of orders) {
      for (const previous of [undefined, build(CLASH), build([objects[7]!])]) {
        const got = await mode.render(build(order, previous ? { previous } : {}), opts, []);
        t.deepEqual(got.leftOut, [], mode.name);
        t.is(got.text, want.text, `${mode.name}: the same rendering whatever the order and history`);
      }
    }
    t.true(want.text.includes('10.96.0.21'), `${mode.name}: the NodePort loser's ClusterIP is served`);
  }
});

test('partial changes: when the winner goes the loser takes over; when a newcomer loses nothing of the winner changes', (t) => {
  const decoder = new Decoder(CIDR);
  const [web, webSlice] = WEB as [ParsedObject, ParsedObject];
  const [clash, clashSlice] = CLASH as [ParsedObject, ParsedObject];
  const first = decoder.apply({ upsert: [[web.identity, [web]], [webSlice.identity, [webSlice]]], remove: [] });
  t.deepEqual(first.newRefusals, []);
  const added = decoder.apply({ upsert: [[clash.identity, [clash]], [clashSlice.identity, [clashSlice]]], remove: [] });
  t.deepEqual(added.changed, new Set(), 'the newcomer loses: no service port changed');
  t.is(added.newRefusals.length, 1);
  t.is(added.snapshot.services.get('default/web:http'), first.snapshot.services.get('default/web:http'));
  // The same refusal at the next apply is not new (logged once while it holds).
  t.deepEqual(decoder.apply({ upsert: [], remove: [] }).newRefusals, []);
  // An endpoint change of the loser changes nothing served.
  t.deepEqual(decoder.apply({ upsert: [[clashSlice.identity, [slice('aaa', 'clash', '10.244.9.8')]]], remove: [] }).changed, new Set());
  const gone = decoder.apply({ upsert: [], remove: [web.identity] });
  t.deepEqual([...gone.changed!].sort(), ['aaa/clash:http', 'default/web:http']);
  t.deepEqual(served(gone.snapshot), ['aaa/clash:http 10.96.0.10:80 np=- eps=10.244.9.8']);
  t.deepEqual(gone.refusals, []);

  // NodePorts: the loser is served without its NodePort, and gets it when the winner lets go.
  const d = new Decoder(CIDR);
  const a = svc('zzz', 'first', '10.96.0.20', { type: 'NodePort', created: '2025-01-01T00:00:00Z', ports: [NP(80, 30080)] });
  const b = svc('aaa', 'later', '10.96.0.21', { type: 'NodePort', created: '2025-02-01T00:00:00Z', ports: [NP(80, 30080)] });
  const bSlice = slice('aaa', 'later', '10.244.2.2');
  d.apply({ upsert: [[a.identity, [a]]], remove: [] });
  const withB = d.apply({ upsert: [[b.identity, [b]], [bSlice.identity, [bSlice]]], remove: [] });
  t.deepEqual(withB.changed, new Set(['aaa/later:http']));
  t.deepEqual(served(withB.snapshot), ['aaa/later:http 10.96.0.21:80 np=- eps=10.244.2.2', 'zzz/first:http 10.96.0.20:80 np=30080 eps=']);
  // An endpoint change of the loser keeps its NodePort left out (no patch that would bring it back).
  const moved = d.apply({ upsert: [[bSlice.identity, [slice('aaa', 'later', '10.244.2.3')]]], remove: [] });
  t.deepEqual(served(moved.snapshot), ['aaa/later:http 10.96.0.21:80 np=- eps=10.244.2.3', 'zzz/first:http 10.96.0.20:80 np=30080 eps=']);
  const aGone = d.apply({ upsert: [], remove: [a.identity] });
  t.deepEqual([...aGone.changed!].sort(), ['aaa/later:http', 'zzz/first:http']);
  t.deepEqual(served(aGone.snapshot), ['aaa/later:http 10.96.0.21:80 np=30080 eps=10.244.2.3']);
});
