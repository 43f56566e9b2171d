import test from 'ava';
import { buildSnapshot, servicePortKey } from '../../src/model/normalise.ts';
import { parseObject } from '../../src/model/parse.ts';
import type { ParsedObject } from '../../src/model/parsed.ts';
import { buildFrom, FIXTURES, render, renderAll } from './model-helpers.ts';

test('servicePortKey is kube-proxy\'s ServicePortName string', (t) => {
  t.is(servicePortKey('default', 'web', 'http'), 'default/web:http');
  t.is(servicePortKey('default', 'web', ''), 'default/web');
});

test('multi-doc YAML and Lists: all objects read, ConfigMap ignored, unnamed port matched by ""', async (t) => {
  const r = await buildFrom([`${FIXTURES}/multi-doc.yaml`]);
  t.deepEqual(r.parseErrors, []);
  t.deepEqual(r.errors, []);
  t.deepEqual(renderAll(r.snapshot), ['shop/api 10.96.10.1:8080/TCP -> 10.244.3.7:8080', 'shop/cart:grpc 10.96.10.2:9000/TCP ->']);
});

test('legacy Endpoints: addresses ready, notReadyAddresses not ready, sorted numerically', async (t) => {
  const r = await buildFrom([`${FIXTURES}/legacy-endpoints.yaml`]);
  t.deepEqual(renderAll(r.snapshot), ['default/legacy:http 10.96.20.1:80/TCP -> 10.244.4.9:8080 10.244.4.10:8080 10.244.4.11:8080!r!s']);
  const eps = r.snapshot.services.get('default/legacy:http')!.endpoints;
  t.deepEqual(eps[1], { ip: '10.244.4.10', port: 8080, ready: true, serving: true, terminating: false, nodeName: 'node-a' });
});

test('EndpointSlices win over legacy Endpoints', async (t) => {
  const r = await buildFrom([`${FIXTURES}/slices-win.yaml`]);
  t.deepEqual(renderAll(r.snapshot), ['default/both 10.96.20.2:80/TCP -> 10.244.5.1:80']);
});

test('multi-port service: named targetPort, port-name matching, merged slices, dedup preferring ready, protocol must match', async (t) => {
  const r = await buildFrom([`${FIXTURES}/multi-port.yaml`]);
  t.deepEqual(r.errors, []);
  t.deepEqual(r.warnings.map(String), [
    `${FIXTURES}/multi-port.yaml: EndpointSlice shop/store-2: endpoint port "dns" is UDP but port "dns" of Service shop/store is TCP; endpoint port ignored`,
  ]);
  t.deepEqual(renderAll(r.snapshot), [
    'shop/store:admin 10.96.30.3:8081/TCP ->',
    'shop/store:dns 10.96.30.3:53/TCP ->',
    'shop/store:http 10.96.30.3:80/TCP -> 10.244.6.2:8080 10.244.6.9:8080!r!sT 10.244.6.10:8080',
    'shop/store:metrics 10.96.30.3:9100/TCP -> 10.244.6.2:9100 10.244.6.9:9100!r!sT 10.244.6.10:9100',
  ]);
  const http = r.snapshot.services.get('shop/store:http')!;
  t.like(http, {
    namespace: 'shop',
    name: 'store',
    portName: 'http',
    type: 'NodePort',
    frontends: { clusterIPs: [{ family: 'IPv4', ip: '10.96.30.3' }], nodePort: 30080 },
    clusterIPAllocated: false,
    sessionAffinity: { timeoutSeconds: 600 },
    internalTrafficPolicy: 'Cluster',
    externalTrafficPolicy: 'Local',
  });
  t.deepEqual(http.endpoints[2], { ip: '10.244.6.10', port: 8080, ready: true, serving: true, terminating: false, nodeName: 'node-b' });
});

test('headless and ExternalName give no ports; IPv6/FQDN/unlabelled slices are ignored', async (t) => {
  const r = await buildFrom([`${FIXTURES}/headless-externalname.yaml`]);
  t.deepEqual(r.parseErrors, []);
  t.deepEqual(r.errors, []);
  t.deepEqual(renderAll(r.snapshot), ['default/plain 10.96.40.4:80/TCP ->']);
  t.deepEqual(r.allocations, []);
});

test('bad input: the error names file, object and field; the other services are still served', async (t) => {
  // [file, parse errors, served, parse warnings]
  const cases: Array<[string, string[], string[], string[]?]> = [
    [
      'bad-ip.yaml',
      ['test/fixtures/model/bad-ip.yaml: Service default/web: spec.clusterIP: "10.96.1.300" is not a valid IPv4 address (dotted quad, no leading zeros)'],
      ['default/good:http 10.96.1.1:80/TCP -> 10.244.1.5:8080'],
      ['test/fixtures/model/bad-ip.yaml: EndpointSlice default/good-2: endpoints[0].addresses[0]: "10.244.1.6 -j ACCEPT" is not a valid IPv4 address; endpoint ignored'],
    ],
    [
      'bad-port.yaml',
      ['test/fixtures/model/bad-port.yaml: Service default/web: spec.ports[0].port: 70000 is out of range 1-65535'],
      ['default/good:http 10.96.2.2:80/TCP ->'],
    ],
    [
      'bad-protocol.yaml',
      ['test/fixtures/model/bad-protocol.yaml: Service default/web: spec.ports[0].protocol: "HTTP" is not a supported protocol (TCP, UDP or SCTP)'],
      ['default/good:dns 10.96.3.2:53/UDP ->'],
    ],
    [
      'bad-name.yaml',
      [
        'test/fixtures/model/bad-name.yaml: Service default/Web_Server: metadata.name: "Web_Server" is not a valid DNS-1123 label (lower-case alphanumerics and \'-\', alphanumeric at both ends, at most 63 characters)',
      ],
      ['default/good:http 10.96.4.2:80/TCP ->'],
    ],
    [
      'syntax',
      ['test/fixtures/model/syntax/b-broken.yaml:7:1: syntax error: Flow sequence in block collection must be sufficiently indented and end with a ]; file skipped'],
      ['default/fine 10.96.6.1:80/TCP ->'],
    ],
  ];
  for (const [file, errors, served, warnings = []] of cases) {
    const r = await buildFrom([`${FIXTURES}/${file}`]);
    t.deepEqual(r.parseErrors, errors, file);
    t.deepEqual(r.parseWarnings, warnings, file);
    t.deepEqual(renderAll(r.snapshot), served, file);
  }
});

test('duplicate ClusterIP:port:protocol: without creation times, first by namespace/name wins, whatever was served before', async (t) => {
  const file = `${FIXTURES}/duplicate-clusterip.yaml`;
  const r = await buildFrom([file]);
  t.deepEqual(r.errors, [], 'a refusal is no error: the source was read whole');
  t.deepEqual(r.refusals.map(String), [
    `${file}: Service default/beta: spec.ports[0]: 10.96.5.5:80/TCP is already used by Service default/alpha (${file}), first by namespace/name; service skipped`,
  ]);
  t.deepEqual(renderAll(r.snapshot), ['default/alpha:http 10.96.5.5:80/TCP ->', 'default/gamma:https 10.96.5.5:443/TCP ->']);

  // beta held the address before alpha appeared: history does not count, alpha still wins (as a restarted drover would decide).
  const betaOnly = buildSnapshot(
    [parsed({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'beta' }, spec: { clusterIP: '10.96.5.5', ports: [{ name: 'http', port: 80 }] } })],
    { serviceCIDR: '10.96.0.0/12' },
  );
  const r2 = await buildFrom([file], betaOnly.snapshot);
  t.deepEqual(r2.refusals.map(String), r.refusals.map(String));
  t.deepEqual(renderAll(r2.snapshot), renderAll(r.snapshot));
});

function parsed(raw: unknown, file = 'mem.yaml', index = 0): ParsedObject {
  const r = parseObject({ file, index, raw });
  if (r.status !== 'ok') throw new Error(JSON.stringify(r));
  return r.object;
}

const shepherd = (name: string, clusterIP = '') => ({
  kind: 'Service',
  metadata: { name, namespace: 'default' },
  spec: { ports: [{ name: 'http', port: 80, target_port: 8080 }] },
  status: { cluster_ip: clusterIP, endpoints: ['10.244.2.3:8080', '10.244.2.2:8080', '10.244.2.2:8080'] },
});

test('Shepherd services get allocated ClusterIPs, never an explicit one, and keep them via previous', (t) => {
  const first = buildSnapshot([parsed(shepherd('web-service'))], { serviceCIDR: '10.96.0.0/12' });
  t.deepEqual(first.allocations, [{ key: 'default/web-service', clusterIP: '10.107.148.169' }]);
  t.deepEqual(renderAll(first.snapshot), ['default/web-service:http 10.107.148.169:80/TCP -> 10.244.2.2:8080 10.244.2.3:8080']);
  t.true(first.snapshot.services.get('default/web-service:http')!.clusterIPAllocated);

  // An explicit ClusterIP always wins: web-service moves to the next free address.
  const explicit = parsed(shepherd('other', '10.107.148.169'), 'mem.yaml', 1);
  const second = buildSnapshot([parsed(shepherd('web-service')), explicit], { serviceCIDR: '10.96.0.0/12', previous: first.snapshot });
  t.deepEqual(second.allocations, [{ key: 'default/web-service', clusterIP: '10.107.148.170' }]);
  t.false(second.snapshot.services.get('default/other:http')!.clusterIPAllocated);

  // Once the explicit claim is gone, web-service keeps the address it has now (stickiness) instead of moving back.
  const third = buildSnapshot([parsed(shepherd('web-service'))], { serviceCIDR: '10.96.0.0/12', previous: second.snapshot });
  t.deepEqual(third.allocations, [{ key: 'default/web-service', clusterIP: '10.107.148.170' }]);
  // Without a previous snapshot it is the hash address again.
  t.deepEqual(buildSnapshot([parsed(shepherd('web-service'))], { serviceCIDR: '10.96.0.0/12' }).allocations[0]?.clusterIP, '10.107.148.169');
});

test('duplicate identities: the first wins', (t) => {
  const a = parsed({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web' }, spec: { clusterIP: '10.96.0.20', ports: [{ port: 80 }] } }, 'a.yaml');
  const b = parsed({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web' }, spec: { clusterIP: '10.96.0.21', ports: [{ port: 80 }] } }, 'b.yaml', 3);
  const r = buildSnapshot([a, b], { serviceCIDR: '10.96.0.0/12' });
  t.deepEqual(r.errors.map(String), ['b.yaml: Service default/web: duplicate Service default/web, already defined in a.yaml; this copy is skipped']);
  t.deepEqual(renderAll(r.snapshot), ['default/web 10.96.0.20:80/TCP ->']);
});

test('the snapshot is sorted by key and frozen', (t) => {
  const objs = ['zeta', 'alpha', 'mid'].map((n, i) =>
    parsed({ apiVersion: 'v1', kind: 'Service', metadata: { name: n }, spec: { clusterIP: `10.96.1.${i + 1}`, ports: [{ name: 'b', port: 81 }, { name: 'a', port: 80 }] } }),
  );
  const r = buildSnapshot(objs, { serviceCIDR: '10.96.0.0/12' });
  t.deepEqual([...r.snapshot.services.keys()], ['default/alpha:a', 'default/alpha:b', 'default/mid:a', 'default/mid:b', 'default/zeta:a', 'default/zeta:b']);
  const sp = r.snapshot.services.get('default/alpha:a')!;
  t.true(Object.isFrozen(r.snapshot));
  t.true(Object.isFrozen(sp));
  t.true(Object.isFrozen(sp.endpoints));
  t.throws(() => {
    (sp as { port: number }).port = 1;
  });
});

test('an invalid service CIDR is a configuration error', (t) => {
  t.throws(() => buildSnapshot([], { serviceCIDR: '10.96.0.0/33' }), { message: '"10.96.0.0/33" is not a valid IPv4 CIDR (expected e.g. "10.96.0.0/12")' });
});

test('endpoint objects without their Service, or for a Shepherd Service, are warned about and unused', (t) => {
  const slice = (name: string, service: string) =>
    parsed(
      {
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        metadata: { name, labels: { 'kubernetes.io/service-name': service } },
        addressType: 'IPv4',
        endpoints: [{ addresses: ['10.244.0.5'] }],
        ports: [{ name: 'http', port: 8080 }],
      },
      'eps.yaml',
      2,
    );
  const legacy = parsed({ apiVersion: 'v1', kind: 'Endpoints', metadata: { name: 'gone' }, subsets: [] }, 'eps.yaml', 3);
  const r = buildSnapshot([parsed(shepherd('web-service')), slice('ghost-abc', 'ghost'), slice('web-service-abc', 'web-service'), legacy], {
    serviceCIDR: '10.96.0.0/12',
  });
  t.deepEqual(r.errors, []);
  t.deepEqual(r.warnings.map(String), [
    'eps.yaml: EndpointSlice default/ghost-abc: Service default/ghost does not exist; endpoints ignored',
    'eps.yaml: EndpointSlice default/web-service-abc: Service default/web-service is a Shepherd Service, which lists its own endpoints; endpoints ignored',
    'eps.yaml: Endpoints default/gone: Service default/gone does not exist; endpoints ignored',
  ]);
  t.deepEqual(renderAll(r.snapshot), ['default/web-service:http 10.107.148.169:80/TCP -> 10.244.2.2:8080 10.244.2.3:8080']);
});

test('endpoint matching is linear: a Service and a slice with 20,000 ports each', (t) => {
  const n = 20_000;
  const names = Array.from({ length: n }, (_, i) => `p${i}`);
  const svc = parsed({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'wide' }, spec: { clusterIP: '10.96.0.50', ports: names.map((name, i) => ({ name, port: i + 1 })) } });
  const slice = parsed({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: 'wide-1', labels: { 'kubernetes.io/service-name': 'wide' } },
    addressType: 'IPv4',
    endpoints: [{ addresses: ['10.244.0.9'] }],
    ports: names.map((name, i) => ({ name, port: i + 1, protocol: i === 7 ? 'UDP' : 'TCP' })),
  }, 'mem.yaml', 1);
  const started = performance.now();
  const r = buildSnapshot([svc, slice], { serviceCIDR: '10.96.0.0/12' });
  t.true(performance.now() - started < 20_000);
  t.is(r.snapshot.services.size, n);
  t.is(renderAll(r.snapshot).filter((l) => l.endsWith('->')).length, 1);
  t.is(r.snapshot.services.get('default/wide:p19999')!.endpoints[0]!.port, 20000);
  t.deepEqual(r.warnings.map(String), ['mem.yaml: EndpointSlice default/wide-1: endpoint port "p7" is UDP but port "p7" of Service default/wide is TCP; endpoint port ignored']);
});

test('an endpoint port that matches no port of its Service is warned about, naming the Service\'s ports', (t) => {
  const service = (name: string, ports: unknown[], clusterIP: string) =>
    parsed({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'nsd' }, spec: { clusterIP, ports } }, 'svc.yaml');
  const slice = (name: string, svc: string, ports: unknown[], index: number) =>
    parsed(
      {
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        metadata: { name, namespace: 'nsd', labels: { 'kubernetes.io/service-name': svc } },
        addressType: 'IPv4',
        endpoints: [{ addresses: ['10.180.2.1'] }],
        ports,
      },
      'eps.yaml',
      index,
    );
  const wide = Array.from({ length: 12 }, (_, i) => ({ name: `p${i}`, port: 1000 + i }));
  const r = buildSnapshot(
    [
      service('good', [{ name: 'http', port: 80 }, { name: 'metrics', port: 9100 }], '10.96.0.60'),
      service('legacy', [{ port: 80 }], '10.96.0.61'),
      service('one', [{ name: 'http', port: 80 }], '10.96.0.62'),
      service('wide', wide, '10.96.0.63'),
      service('headless', [{ name: 'http', port: 80 }], 'None'),
      slice('good-1', 'good', [{ name: 'htp', port: 8081 }, { name: 'http', port: 8080 }, { name: 'metrics', port: 9100, protocol: 'UDP' }, { port: 9999 }, { name: 'htp', port: 8082 }], 0),
      slice('good-2', 'good', [{ name: 'htp', port: 8081 }, { name: 'metrics', port: 9100 }], 1),
      parsed({ apiVersion: 'v1', kind: 'Endpoints', metadata: { name: 'legacy', namespace: 'nsd' }, subsets: [{ addresses: [{ ip: '10.180.2.2' }], ports: [{ name: 'web', port: 8080 }] }] }, 'eps.yaml', 2),
      slice('one-1', 'one', [{ name: 'https', port: 8443 }], 3),
      slice('wide-1', 'wide', [{ name: 'p3', port: 2003 }, { name: 'zz', port: 2099 }], 4),
      slice('headless-1', 'headless', [{ name: 'other', port: 8080 }], 5),
    ],
    { serviceCIDR: '10.96.0.0/12' },
  );
  t.deepEqual(r.errors, []);
  t.deepEqual(r.warnings.map(String), [
    'eps.yaml: EndpointSlice nsd/good-1: endpoint port "htp" matches no port of Service nsd/good (its ports: "http", "metrics"); endpoint port ignored',
    'eps.yaml: EndpointSlice nsd/good-1: endpoint port "metrics" is UDP but port "metrics" of Service nsd/good is TCP; endpoint port ignored',
    'eps.yaml: EndpointSlice nsd/good-1: endpoint unnamed port matches no port of Service nsd/good (its ports: "http", "metrics"); endpoint port ignored',
    'eps.yaml: EndpointSlice nsd/good-2: endpoint port "htp" matches no port of Service nsd/good (its ports: "http", "metrics"); endpoint port ignored',
    'eps.yaml: Endpoints nsd/legacy: endpoint port "web" matches no port of Service nsd/legacy (its port is unnamed); endpoint port ignored',
    'eps.yaml: EndpointSlice nsd/one-1: endpoint port "https" matches no port of Service nsd/one (its port: "http"); endpoint port ignored',
    'eps.yaml: EndpointSlice nsd/wide-1: endpoint port "zz" matches no port of Service nsd/wide (its ports: "p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9" and 2 more); endpoint port ignored',
  ]);
  t.deepEqual(renderAll(r.snapshot).filter((l) => !l.startsWith('nsd/wide:')), [
    'nsd/good:http 10.96.0.60:80/TCP -> 10.180.2.1:8080',
    'nsd/good:metrics 10.96.0.60:9100/TCP -> 10.180.2.1:9100',
    'nsd/legacy 10.96.0.61:80/TCP ->',
    'nsd/one:http 10.96.0.62:80/TCP ->',
  ]);
  t.is(render(r.snapshot.services.get('nsd/wide:p3')!), 'nsd/wide:p3 10.96.0.63:1003/TCP -> 10.180.2.1:2003');
});
