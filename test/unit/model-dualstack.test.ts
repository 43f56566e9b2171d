/**
 * Dual-stack and IPv6 in the model: Services of either primary family,
 * EndpointSlices of addressType IPv6, addresses of the wrong family, and
 * the per-family views (family.ts), as kube-proxy's metaproxier splits a
 * cluster between its IPv4 and IPv6 proxiers.
 */
import test from 'ava';
import { familyView } from '../../src/model/family.ts';
import { buildSnapshot } from '../../src/model/normalise.ts';
import type { ParsedObject, ParsedPod, ParsedService } from '../../src/model/parsed.ts';
import { buildFrom, okObject, parse, render, renderAll } from './model-helpers.ts';

const FIXTURE = 'test/fixtures/dualstack/services.yaml';

const service = (spec: Record<string, unknown>, name = 'web') => ({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default' }, spec });

test('an IPv6-primary dual-stack Service keeps its IPv4 ClusterIP', (t) => {
  const svc = okObject(
    parse(service({ ipFamilies: ['IPv6', 'IPv4'], clusterIP: 'fd00::10', clusterIPs: ['fd00::10', '10.96.0.10'], ports: [{ port: 80 }] })),
  ) as ParsedService;
  t.is(svc.clusterIP, '10.96.0.10');
  t.deepEqual(svc.clusterIPs, [
    { family: 'IPv6', ip: 'fd00::10' },
    { family: 'IPv4', ip: '10.96.0.10' },
  ]);
});

test('a single-stack IPv6 Service has no IPv4 ClusterIP and gets none allocated', (t) => {
  const svc = okObject(parse(service({ clusterIP: 'fd00::10', ports: [{ port: 80 }] }))) as ParsedService;
  t.is(svc.clusterIP, undefined);
  const built = buildSnapshot([svc], { serviceCIDR: '10.96.0.0/12' });
  t.deepEqual(built.allocations, []);
  t.deepEqual([...built.snapshot.services.keys()], []);
  t.deepEqual(renderAll(familyView(built.snapshot, 'IPv6')), ['default/web fd00::10:80/TCP ->']);
});

test('the fixture: each family view has its ClusterIP and its endpoints; wrong-family addresses are warned about', async (t) => {
  const r = await buildFrom([FIXTURE]);
  t.deepEqual(r.parseErrors, []);
  t.deepEqual(r.errors.map(String), []);
  t.deepEqual(r.parseWarnings, [
    `${FIXTURE}: EndpointSlice default/web-v6: endpoints[2].addresses[0]: "10.244.1.9" is an IPv4 address, not an IPv6 one; endpoint ignored`,
  ]);
  t.deepEqual(renderAll(familyView(r.snapshot, 'IPv4')), [
    'default/empty:http 10.96.0.30:80/UDP ->',
    'default/web:http 10.96.0.10:80/TCP -> 10.244.1.2:8080 10.244.1.3:8080',
  ]);
  t.deepEqual(renderAll(familyView(r.snapshot, 'IPv6')), [
    'default/empty:http fd00:96::30:80/UDP ->',
    'default/v6only:http fd00:96::20:80/TCP -> fd00:244:1::4:8080',
    'default/web:http fd00:96::10:80/TCP -> fd00:244:1::2:8080 fd00:244:1::3:8080',
  ]);
  // The IPv4 view is the snapshot's `services`; both views share the node and the frontends.
  t.is(familyView(r.snapshot, 'IPv4').services, r.snapshot.services);
  const web6 = familyView(r.snapshot, 'IPv6').services.get('default/web:http')!;
  t.is(web6.frontends.nodePort, 30080);
  t.deepEqual(web6.frontends.clusterIPs.map((c) => c.ip), ['fd00:96::10', '10.96.0.10']);
});

test('a snapshot without IPv6 is its own IPv4 view, and its IPv6 view is empty', async (t) => {
  const r = await buildFrom(['examples/kubernetes.yaml']);
  t.is(familyView(r.snapshot, 'IPv4'), r.snapshot);
  t.is(familyView(r.snapshot, 'IPv6').services.size, 0);
  t.is(r.snapshot.ipv6Services, undefined);
});

test('IPv6 endpoint addresses: canonical form, non-canonical read with a note, special ones skipped', (t) => {
  const r = parse({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: 'web-v6', namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } },
    addressType: 'IPv6',
    endpoints: [
      { addresses: ['FD00:0:0::01'] },
      { addresses: ['::1'] },
      { addresses: ['fe80::1'] },
      { addresses: ['ff02::1'] },
      { addresses: ['::ffff:10.0.0.1'] },
      { addresses: ['fd00::1 -j ACCEPT'] },
    ],
    ports: [{ name: 'http', port: 8080 }],
  });
  if (r.status !== 'ok') return t.fail();
  const at = 'in.yaml: EndpointSlice default/web-v6: endpoints';
  t.deepEqual(r.warnings.map(String), [
    `${at}[0].addresses[0]: "FD00:0:0::01" is not in canonical form; read as fd00::1`,
    `${at}[1].addresses[0]: "::1" is a loopback address; endpoint ignored`,
    `${at}[2].addresses[0]: "fe80::1" is a link-local address; endpoint ignored`,
    `${at}[3].addresses[0]: "ff02::1" is a multicast address; endpoint ignored`,
    `${at}[4].addresses[0]: "::ffff:10.0.0.1" is an IPv4-mapped address; endpoint ignored`,
    `${at}[5].addresses[0]: "fd00::1 -j ACCEPT" is not a valid IPv6 address; endpoint ignored`,
  ]);
  if (r.object.kind !== 'EndpointSlice') return t.fail();
  t.deepEqual(r.object.groups[0]!.addresses.map((a) => a.ip), ['fd00::1']);
});

test('an IPv6 address in an IPv4 slice is skipped with a warning; the rest of the slice serves', (t) => {
  const r = parse({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: 'web-v4', namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } },
    addressType: 'IPv4',
    endpoints: [{ addresses: ['fd00::2'] }, { addresses: ['10.244.1.2'] }],
    ports: [{ name: 'http', port: 8080 }],
  });
  if (r.status !== 'ok' || r.object.kind !== 'EndpointSlice') return t.fail();
  t.deepEqual(r.warnings.map(String), ['in.yaml: EndpointSlice default/web-v4: endpoints[0].addresses[0]: "fd00::2" is an IPv6 address, not an IPv4 one; endpoint ignored']);
  t.deepEqual(r.object.groups[0]!.addresses.map((a) => a.ip), ['10.244.1.2']);
});

test('an external IP of a family the Service has no ClusterIP of is warned about', (t) => {
  const r = parse(service({ clusterIP: '10.96.0.10', externalIPs: ['2001:db8::5', '192.0.2.5'], ports: [{ port: 80 }] }));
  if (r.status !== 'ok') return t.fail();
  t.deepEqual(r.warnings.map(String), [
    'in.yaml: Service default/web: spec.externalIPs[0]: "2001:db8::5" is IPv6 and the Service has no IPv6 ClusterIP; address ignored',
  ]);
});

test('Pods give an endpoint of each family; a bad IPv6 Pod IP costs only the IPv6 endpoint', (t) => {
  const pod = (podIPs: string[], name = 'p1') =>
    parse({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: 'default', labels: { app: 'web' } },
      spec: { nodeName: 'n1', containers: [{ name: 'c', ports: [{ containerPort: 8080 }] }] },
      status: { phase: 'Running', podIPs: podIPs.map((ip) => ({ ip })), conditions: [{ type: 'Ready', status: 'True' }] },
    });
  const good = okObject(pod(['10.244.1.5', 'fd00:244:1::5'])) as ParsedPod;
  t.is(good.ip, '10.244.1.5');
  t.is(good.ipv6, 'fd00:244:1::5');
  const bad = pod(['10.244.1.6', 'fe80::6'], 'p2');
  if (bad.status !== 'ok') return t.fail();
  t.deepEqual(bad.warnings.map(String), ['in.yaml: Pod default/p2: status.podIPs[1].ip: "fe80::6" is a link-local address; address ignored']);
  const svc = okObject(
    parse(service({ selector: { app: 'web' }, ipFamilies: ['IPv4', 'IPv6'], clusterIPs: ['10.96.0.10', 'fd00::10'], clusterIP: '10.96.0.10', ports: [{ port: 80, targetPort: 8080 }] })),
  );
  const objects: ParsedObject[] = [svc, good, bad.object];
  const built = buildSnapshot(objects, { serviceCIDR: '10.96.0.0/12' });
  t.deepEqual(renderAll(familyView(built.snapshot, 'IPv4')), ['default/web 10.96.0.10:80/TCP -> 10.244.1.5:8080 10.244.1.6:8080']);
  t.deepEqual(renderAll(familyView(built.snapshot, 'IPv6')), ['default/web fd00::10:80/TCP -> fd00:244:1::5:8080']);
  t.is(render(familyView(built.snapshot, 'IPv6').services.get('default/web')!).includes('fd00::10'), true);
});

test('two Services on one IPv6 ClusterIP:port: the second is skipped with a refusal', (t) => {
  const a = okObject(parse(service({ clusterIP: 'fd00::10', ports: [{ port: 80 }] }, 'a')));
  const b = okObject(parse(service({ ipFamilies: ['IPv4', 'IPv6'], clusterIP: '10.96.0.11', clusterIPs: ['10.96.0.11', 'fd00::10'], ports: [{ port: 80 }] }, 'b'), 1));
  const built = buildSnapshot([a, b], { serviceCIDR: '10.96.0.0/12' });
  t.deepEqual(built.errors, []);
  t.deepEqual(built.refusals.map(String), ['in.yaml: Service default/b: spec.ports[0]: fd00::10:80/TCP is already used by Service default/a (in.yaml), first by namespace/name; service skipped']);
  t.deepEqual([...built.snapshot.services.keys()], []);
});
