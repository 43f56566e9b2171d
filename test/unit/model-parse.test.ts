import test from 'ava';
import type { ParsedEndpoints, ParsedEndpointSlice, ParsedService } from '../../src/model/parsed.ts';
import type { ParseResult } from '../../src/model/parse.ts';
import { errorText, FILE, okObject, parse } from './model-helpers.ts';
function ignoredReason(r: ParseResult): string {
  if (r.status !== 'ignored') throw new Error(`expected ignored, got ${JSON.stringify(r)}`);
  return r.reason;
}

const k8sService = (spec: Record<string, unknown>, metadata: Record<string, unknown> = { name: 'web', namespace: 'default' }) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata,
  spec,
});

test('Kubernetes Service: defaults and unknown fields', (t) => {
  const svc = okObject(
    parse({
      ...k8sService({
        clusterIP: '10.96.0.10',
        clusterIPs: ['10.96.0.10'],
        ipFamilies: ['IPv4'],
        ports: [{ port: 53, targetPort: 'dns-tcp', appProtocol: 'dns', someFutureField: { x: 1 } }],
        selector: { app: 'dns' },
      }, { name: 'dns', managedFields: [{ manager: 'kubectl' }], resourceVersion: '1' }),
      status: { loadBalancer: {} },
    }),
  );
  t.deepEqual(svc, {
    identity: 'Service/default/dns',
    source: 'kubernetes',
    file: FILE,
    index: 0,
    namespace: 'default',
    name: 'dns',
    kind: 'Service',
    type: 'ClusterIP',
    clusterIP: '10.96.0.10',
    clusterIPs: [{ family: 'IPv4', ip: '10.96.0.10' }],
    ports: [{ index: 0, name: '', port: 53, protocol: 'TCP', targetPort: 'dns-tcp' }],
    externalIPs: [],
    loadBalancerIngress: [],
    loadBalancerSourceRanges: [],
    sessionAffinity: null,
    internalTrafficPolicy: 'Cluster',
    externalTrafficPolicy: 'Cluster',
    selector: new Map([['app', 'dns']]),
    publishNotReadyAddresses: false,
  } satisfies ParsedService);
});

test('Kubernetes Service: NodePort, ClientIP affinity (default and explicit timeout), traffic policies', (t) => {
  const svc = okObject(
    parse(k8sService({
      type: 'NodePort',
      clusterIP: '10.96.0.11',
      ports: [{ name: 'http', port: 80, nodePort: 30080, protocol: 'TCP' }, { name: 'dns', port: 53, protocol: 'UDP' }],
      sessionAffinity: 'ClientIP',
      internalTrafficPolicy: 'Local',
      externalTrafficPolicy: 'Local',
    })),
  ) as ParsedService;
  t.is(svc.type, 'NodePort');
  t.deepEqual(svc.ports, [
    { index: 0, name: 'http', port: 80, protocol: 'TCP', nodePort: 30080, targetPort: 80 },
    { index: 1, name: 'dns', port: 53, protocol: 'UDP', targetPort: 53 },
  ]);
  t.deepEqual(svc.sessionAffinity, { timeoutSeconds: 10800 });
  t.is(svc.internalTrafficPolicy, 'Local');
  t.is(svc.externalTrafficPolicy, 'Local');
  const timed = okObject(
    parse(k8sService({
      clusterIP: '10.96.0.12',
      ports: [{ port: 80 }],
      sessionAffinity: 'ClientIP',
      sessionAffinityConfig: { clientIP: { timeoutSeconds: 60 } },
    })),
  ) as ParsedService;
  t.deepEqual(timed.sessionAffinity, { timeoutSeconds: 60 });
  t.is(
    errorText(parse(k8sService({ clusterIP: '10.96.0.12', ports: [{ port: 80 }], sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 90000 } } }))),
    'in.yaml: Service default/web: spec.sessionAffinityConfig.clientIP.timeoutSeconds: 90000 is out of range 1-86400',
  );
});

test('Kubernetes Service without clusterIP, headless and ExternalName have no proxied ports', (t) => {
  const unallocated = okObject(parse(k8sService({ ports: [{ port: 80 }] }))) as ParsedService;
  t.deepEqual(
    [unallocated.clusterIP, unallocated.ports, unallocated.unproxiedReason],
    [undefined, [], 'without a ClusterIP (not yet allocated by the API server; kube-proxy skips it too)'],
  );
  const headless = okObject(parse(k8sService({ clusterIP: 'None', ports: [{ port: 5432 }] }))) as ParsedService;
  t.deepEqual([headless.clusterIP, headless.ports, headless.unproxiedReason], [undefined, [], 'headless (clusterIP: None, not proxied)']);
  const ext = okObject(parse(k8sService({ type: 'ExternalName', externalName: 'example.com', ports: [{ port: 443 }] }))) as ParsedService;
  t.deepEqual([ext.type, ext.clusterIP, ext.ports, ext.unproxiedReason], ['ExternalName', undefined, [], 'type ExternalName (DNS only, not proxied)']);
});

test("Services labelled as another proxy's or as headless are not drover's, in every source, as kube-proxy's label selector", (t) => {
  const labelled = (labels: Record<string, string>) =>
    okObject(parse(k8sService({ clusterIP: '10.96.0.20', ports: [{ port: 80 }] }, { name: 'web', namespace: 'default', labels }))) as ParsedService;
  const other = labelled({ 'service.kubernetes.io/service-proxy-name': 'other-proxy', app: 'web' });
  t.deepEqual([other.ports, other.unproxiedReason], [[], 'labelled service.kubernetes.io/service-proxy-name (another service proxy serves it)']);
  const empty = labelled({ 'service.kubernetes.io/service-proxy-name': '' });
  t.deepEqual(empty.ports, [], 'the label counts whatever its value');
  const headless = labelled({ 'service.kubernetes.io/headless': '' });
  t.deepEqual([headless.ports, headless.unproxiedReason], [[], 'labelled service.kubernetes.io/headless (not proxied)']);
  t.is(labelled({ app: 'web', 'service.kubernetes.io/service-proxy-name-x': 'y' }).ports.length, 1, 'other labels change nothing');
});

test('ignored objects: other kinds, other API versions, FQDN slices', (t) => {
  t.is(ignoredReason(parse({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' } })), 'kind ConfigMap is not read by drover');
  t.is(ignoredReason(parse({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'x' } })), 'kind Deployment is not read by drover');
  t.is(ignoredReason(parse({ apiVersion: 'v2', kind: 'Pod', metadata: { name: 'x' } })), 'Pod of apiVersion v2 is neither a core v1 nor a Shepherd Pod');
  t.is(
    ignoredReason(parse({ apiVersion: 'serving.knative.dev/v1', kind: 'Service', metadata: { name: 'x' } })),
    'Service of apiVersion "serving.knative.dev/v1" is neither a core v1 nor a Shepherd Service',
  );
  t.is(
    ignoredReason(parse({ apiVersion: 'discovery.k8s.io/v1beta1', kind: 'EndpointSlice', metadata: { name: 'x' } })),
    'EndpointSlice of apiVersion "discovery.k8s.io/v1beta1" is not supported (only discovery.k8s.io/v1)',
  );
  const slice = (addressType: string, labels?: Record<string, string>) => ({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: 's', namespace: 'default', ...(labels ? { labels } : {}) },
    addressType,
    endpoints: [{ addresses: ['fd00::1'] }],
  });
  t.is(ignoredReason(parse(slice('FQDN', { 'kubernetes.io/service-name': 'web' }))), 'addressType FQDN: only IPv4 and IPv6 EndpointSlices are supported');
  t.is(ignoredReason(parse(slice('IPv4'))), 'no kubernetes.io/service-name label: not tied to a Service (kube-proxy ignores it too)');
});

test('EndpointSlice: conditions with API nil semantics, first address, ports', (t) => {
  const slice = okObject(
    parse({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'web-abc.1', namespace: 'default', labels: { 'kubernetes.io/service-name': 'web', other: 'x' }, ownerReferences: [] },
      addressType: 'IPv4',
      endpoints: [
        { addresses: ['10.244.0.1', '10.244.0.100'], nodeName: 'node-1', zone: 'z1', hints: { forZones: [{ name: 'z1' }] }, targetRef: { kind: 'Pod' } },
        { addresses: ['10.244.0.2'], conditions: { ready: false } },
        { addresses: ['10.244.0.3'], conditions: { ready: false, serving: true, terminating: true } },
        { addresses: ['10.244.0.4'], conditions: { ready: null, serving: null, terminating: null } },
      ],
      ports: [{ name: 'http', port: 8080, protocol: 'TCP', appProtocol: 'http' }, { name: 'all' }, { port: 9090, protocol: 'UDP' }],
    }),
  ) as ParsedEndpointSlice;
  t.is(slice.identity, 'EndpointSlice/default/web-abc.1');
  t.is(slice.serviceName, 'web');
  t.deepEqual(slice.groups, [
    {
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }, { name: '', port: 9090, protocol: 'UDP' }],
      addresses: [
        { ip: '10.244.0.1', ready: true, serving: true, terminating: false, nodeName: 'node-1', zone: 'z1', zoneHints: ['z1'] },
        { ip: '10.244.0.2', ready: false, serving: false, terminating: false },
        { ip: '10.244.0.3', ready: false, serving: true, terminating: true },
        { ip: '10.244.0.4', ready: true, serving: true, terminating: false },
      ],
    },
  ]);
  const r = parse({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: 'web-abc', labels: { 'kubernetes.io/service-name': 'web' } },
    addressType: 'IPv4',
    endpoints: null,
    ports: [{ name: 'all' }],
  });
  t.is(r.status, 'ok');
  if (r.status === 'ok') {
    t.deepEqual(r.warnings.map(String), ['in.yaml: EndpointSlice default/web-abc: ports[0].port: absent ("all ports" is not supported by kube-proxy); port ignored']);
  }
});

test('legacy Endpoints: addresses ready, notReadyAddresses not', (t) => {
  const eps = okObject(
    parse({
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: { name: 'web', namespace: 'default' },
      subsets: [{ addresses: [{ ip: '10.244.0.5', nodeName: 'n1', hostname: 'h' }], notReadyAddresses: [{ ip: '10.244.0.6' }], ports: [{ name: 'http', port: 80 }] }],
    }),
  );
  t.deepEqual(eps, {
    identity: 'Endpoints/default/web',
    source: 'kubernetes',
    file: FILE,
    index: 0,
    namespace: 'default',
    name: 'web',
    kind: 'Endpoints',
    serviceName: 'web',
    groups: [
      {
        ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
        addresses: [
          { ip: '10.244.0.5', ready: true, serving: true, terminating: false, nodeName: 'n1' },
          { ip: '10.244.0.6', ready: false, serving: false, terminating: false },
        ],
        // Only DNS reads an address's hostname (a headless Service's per-endpoint names).
        hostnames: new Map([['10.244.0.5', 'h']]),
      },
    ],
  });
});

test('Shepherd Service: snake_case, lower-case protocol, target_port matching, missing protocol and target_port', (t) => {
  const r = parse(
    {
      kind: 'Service',
      metadata: { name: 'web-service', namespace: 'default' },
      spec: {
        selector: { app: 'web' },
        ports: [
          { name: 'http', port: 80, target_port: 8080, protocol: 'tcp' },
          { name: 'metrics', port: 9100 },
          { name: 'syslog', port: 514, target_port: 5514, protocol: 'udp' },
        ],
        type: 'ClusterIP',
      },
      status: { cluster_ip: '', endpoints: ['10.20.0.2:8080', '10.20.0.3:8080', '10.20.0.2:9100', '10.20.0.2:5514', '10.20.0.9:7777'] },
    },
    4,
  );
  if (r.status !== 'ok') return t.fail(JSON.stringify(r));
  t.deepEqual(r.warnings.map(String), ['in.yaml: Service default/web-service: status.endpoints[4]: "10.20.0.9:7777" matches no target_port of the service; entry ignored']);
  const ready = { ready: true, serving: true, terminating: false };
  t.deepEqual(r.object, {
    identity: 'Service/default/web-service',
    source: 'shepherd',
    file: FILE,
    index: 4,
    namespace: 'default',
    name: 'web-service',
    kind: 'Service',
    type: 'ClusterIP',
    clusterIP: undefined,
    clusterIPs: [],
    externalIPs: [],
    loadBalancerIngress: [],
    loadBalancerSourceRanges: [],
    ports: [
      { index: 0, name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 },
      { index: 1, name: 'metrics', port: 9100, protocol: 'TCP', targetPort: 9100 },
      { index: 2, name: 'syslog', port: 514, protocol: 'UDP', targetPort: 5514 },
    ],
    sessionAffinity: null,
    internalTrafficPolicy: 'Cluster',
    externalTrafficPolicy: 'Cluster',
    inlineEndpoints: [
      { ports: [{ name: 'http', port: 8080, protocol: 'TCP' }], addresses: [{ ip: '10.20.0.2', ...ready }, { ip: '10.20.0.3', ...ready }] },
      { ports: [{ name: 'metrics', port: 9100, protocol: 'TCP' }], addresses: [{ ip: '10.20.0.2', ...ready }] },
      { ports: [{ name: 'syslog', port: 5514, protocol: 'UDP' }], addresses: [{ ip: '10.20.0.2', ...ready }] },
    ],
    selector: new Map([['app', 'web']]),
    publishNotReadyAddresses: false,
  } satisfies ParsedService);
  const withIP = okObject(parse({ kind: 'Service', metadata: { name: 'a' }, spec: { ports: [{ port: 80 }] }, status: { cluster_ip: '10.96.9.9' } })) as ParsedService;
  t.is(withIP.clusterIP, '10.96.9.9');
  t.is(withIP.namespace, 'default');
  t.deepEqual(withIP.inlineEndpoints, [{ ports: [{ name: '', port: 80, protocol: 'TCP' }], addresses: [] }]);
});

test('Shepherd Service errors: bad endpoint entry (a warning), bad protocol, bad cluster_ip', (t) => {
  const shep = (ports: unknown[], status: unknown) => ({ kind: 'Service', metadata: { name: 'web-service', namespace: 'default' }, spec: { ports }, status });
  const badEntry = parse(shep([{ name: 'http', port: 80, target_port: 8080 }], { endpoints: ['10.20.0.2:8080', '10.20.0.3'] }));
  t.deepEqual(warningLines(badEntry), [
    'in.yaml: Service default/web-service: status.endpoints[1]: "10.20.0.3" is not an "ip:port" endpoint; entry ignored',
  ]);
  t.deepEqual((okObject(badEntry) as ParsedService).inlineEndpoints?.[0]?.addresses.map((a) => a.ip), ['10.20.0.2']);
  t.is(
    errorText(parse(shep([{ name: 'http', port: 80, protocol: 'http' }], {}))),
    'in.yaml: Service default/web-service: spec.ports[0].protocol: "http" is not a supported protocol (TCP, UDP or SCTP)',
  );
  t.is(
    errorText(parse(shep([{ port: 80 }], { cluster_ip: '10.96.0.1/32' }))),
    'in.yaml: Service default/web-service: status.cluster_ip: "10.96.0.1/32" is not a valid IPv4 address (dotted quad, no leading zeros)',
  );
  t.is(
    errorText(parse(shep([{ port: 80, target_port: 0 }], {}))),
    'in.yaml: Service default/web-service: spec.ports[0].target_port: 0 is out of range 1-65535',
  );
});

test('Kubernetes errors name the object and the field', (t) => {
  const cases: Array<[unknown, string]> = [
    [k8sService({ clusterIP: '10.96.1.300', ports: [{ port: 80 }] }), 'spec.clusterIP: "10.96.1.300" is not a valid IPv4 address (dotted quad, no leading zeros)'],
    [k8sService({ clusterIP: '127.0.0.1', ports: [{ port: 80 }] }), 'spec.clusterIP: "127.0.0.1" is a loopback address'],
    [k8sService({ clusterIP: '10.96.1.3', ports: [{ port: 70000 }] }), 'spec.ports[0].port: 70000 is out of range 1-65535'],
    [k8sService({ clusterIP: '10.96.1.3', ports: [{ port: '80' }] }), 'spec.ports[0].port: expected number, got string "80"'],
    [k8sService({ clusterIP: '10.96.1.3', ports: [{ port: 80, protocol: 'tcp' }] }), 'spec.ports[0].protocol: "tcp" is not a supported protocol (TCP, UDP or SCTP)'],
    [k8sService({ clusterIP: '10.96.1.3', ports: [{ port: 80, targetPort: 'Not Valid' }] }), 'spec.ports[0].targetPort: "Not Valid" is not a valid port name (IANA service name: lower-case alphanumerics and \'-\', at most 15 characters, at least one letter)'],
    [k8sService({ clusterIP: '10.96.1.3', ports: [{ name: 'a', port: 80 }, { port: 81 }] }), 'spec.ports[1].name: a name is required when the Service has more than one port'],
    [k8sService({ clusterIP: '10.96.1.3', ports: [{ name: 'a', port: 80 }, { name: 'a', port: 81 }] }), 'spec.ports[1].name: duplicate port name "a" (same as port 0)'],
    [k8sService({ clusterIP: '10.96.1.3', ports: [{ name: 'a', port: 80 }, { name: 'b', port: 80 }] }), 'spec.ports[1].port: duplicate port 80/TCP (same as port 0)'],
    [k8sService({ clusterIP: '10.96.1.3', ports: [{ name: 'HTTP', port: 80 }] }), 'spec.ports[0].name: "HTTP" is not a valid DNS-1123 label (lower-case alphanumerics and \'-\', alphanumeric at both ends, at most 63 characters)'],
    [k8sService({ clusterIP: '10.96.1.3', type: 'Magic', ports: [{ port: 80 }] }), 'spec.type: Invalid option: expected one of "ClusterIP"|"NodePort"|"LoadBalancer"|"ExternalName"'],
    [k8sService({ clusterIP: '10.96.1.3', ports: { port: 80 } }), 'spec.ports: expected array, got an object'],
  ];
  for (const [raw, tail] of cases) t.is(errorText(parse(raw)), `in.yaml: Service default/web: ${tail}`);
  t.is(
    errorText(parse(k8sService({ clusterIP: '10.96.1.3', ports: [{ port: 80 }] }, { name: 'web', namespace: 'Bad NS' }))),
    'in.yaml: Service "Bad NS"/web: metadata.namespace: "Bad NS" is not a valid DNS-1123 label (lower-case alphanumerics and \'-\', alphanumeric at both ends, at most 63 characters)',
  );
  t.is(errorText(parse(k8sService({ ports: [] }, { namespace: 'default' }), 2)), 'in.yaml: Service #3: metadata.name: required');
  t.is(errorText(parse({ apiVersion: 'v1', metadata: { name: 'x' } })), 'in.yaml: object default/x: kind: required');
  t.is(errorText(parse('just a string', 1)), 'in.yaml: object #2: expected an object, got string');
  const badSlice = parse({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: 'web-1', namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } },
    addressType: 'IPv4',
    endpoints: [{ addresses: ['10.244.0.1'], nodeName: 'node 1;rm' }],
  });
  t.is(errorText(badSlice), 'in.yaml: EndpointSlice default/web-1: endpoints[0].nodeName: "node 1;rm" is not a valid DNS-1123 subdomain (dot-separated DNS-1123 labels, at most 253 characters)');
  if (badSlice.status === 'error') t.is(badSlice.identity, 'EndpointSlice/default/web-1');
  t.is(
    errorText(parse({ apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: { name: 'w', labels: { 'kubernetes.io/service-name': 'Web!' } }, addressType: 'IPv4' })),
    'in.yaml: EndpointSlice default/w: metadata.labels["kubernetes.io/service-name"]: "Web!" is not a valid DNS-1123 label (lower-case alphanumerics and \'-\', alphanumeric at both ends, at most 63 characters)',
  );
});

test('an absent or empty namespace means "default"', (t) => {
  for (const metadata of [{ name: 'web' }, { name: 'web', namespace: '' }, { name: 'web', namespace: null }]) {
    const svc = okObject(parse(k8sService({ clusterIP: '10.96.0.30', ports: [{ port: 80 }] }, metadata)));
    t.is(svc.identity, 'Service/default/web');
    t.is(svc.namespace, 'default');
  }
});

test('the port-set rules are linear: 80,000 ports parse in seconds, a late duplicate names the first', (t) => {
  const n = 80_000;
  const ports = Array.from({ length: n }, (_, i) => ({ name: `p${i}`, port: (i % 65535) + 1, protocol: i < 65535 ? 'TCP' : 'UDP' }));
  const started = performance.now();
  const svc = okObject(parse(k8sService({ clusterIP: '10.96.0.40', ports }))) as ParsedService;
  t.true(performance.now() - started < 30_000);
  t.is(svc.ports.length, n);
  t.deepEqual(svc.ports[n - 1], { index: n - 1, name: `p${n - 1}`, port: (n - 1) % 65535 + 1, protocol: 'UDP', targetPort: (n - 1) % 65535 + 1 });
  const dup = [...ports, { name: 'late', port: 80, protocol: 'UDP' }, { name: 'p3', port: 1, protocol: 'SCTP' }];
  t.is(errorText(parse(k8sService({ clusterIP: '10.96.0.40', ports: dup }))), 'in.yaml: Service default/web: spec.ports[80000].port: duplicate port 80/UDP (same as port 65614) (and 1 more problem)');
});

test('Shepherd protocols ignore ASCII case only: a Unicode look-alike is rejected', (t) => {
  const shep = (protocol: string) => ({ kind: 'Service', metadata: { name: 'web-service' }, spec: { ports: [{ name: 'sctp', port: 80, protocol }] } });
  t.is((okObject(parse(shep('sCtP'))) as ParsedService).ports[0]!.protocol, 'SCTP');
  t.is(
    errorText(parse(shep('\u017Fctp'))),
    'in.yaml: Service default/web-service: spec.ports[0].protocol: "\u017Fctp" is not a supported protocol (TCP, UDP or SCTP)',
  );
});

/** The warnings of an ok result, as lines. */
function warningLines(r: ParseResult): string[] {
  if (r.status !== 'ok') throw new Error(`expected ok, got ${JSON.stringify(r)}`);
  return r.warnings.map(String);
}

test('EndpointSlice: a bad address skips only its endpoint; leading zeros are read as decimal, with a warning', (t) => {
  const r = parse(
    {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'good-1', namespace: 'nsd', labels: { 'kubernetes.io/service-name': 'good' } },
      addressType: 'IPv4',
      endpoints: [
        { addresses: ['10.180.0.01'], nodeName: 'node-a' },
        { addresses: ['10.180.2.1'] },
        { addresses: ['10.180.0.999'] },
        { addresses: ['abc'] },
        { addresses: ['fd00::1'] },
        { addresses: ['127.0.0.1'] },
        { addresses: ['10.180.2.2', 'nope'], conditions: { ready: false } },
        { addresses: ['10.180.2.3 -j ACCEPT', '10.180.2.4'] },
      ],
      ports: [{ name: 'http', port: 8080 }],
    },
    3,
  );
  const at = 'in.yaml: EndpointSlice nsd/good-1: endpoints';
  t.deepEqual(warningLines(r), [
    `${at}[0].addresses[0]: "10.180.0.01" has leading zeros; read as 10.180.0.1, as kube-proxy does`,
    `${at}[2].addresses[0]: "10.180.0.999" is not a valid IPv4 address; endpoint ignored`,
    `${at}[3].addresses[0]: "abc" is not a valid IPv4 address; endpoint ignored`,
    `${at}[4].addresses[0]: "fd00::1" is an IPv6 address, not an IPv4 one; endpoint ignored`,
    `${at}[5].addresses[0]: "127.0.0.1" is a loopback address; endpoint ignored`,
    `${at}[6].addresses[1]: "nope" is not a valid IPv4 address; address ignored`,
    `${at}[7].addresses[0]: "10.180.2.3 -j ACCEPT" is not a valid IPv4 address; endpoint ignored`,
  ]);
  if (r.status === 'ok') t.is(r.warnings[0]!.index, 3);
  const slice = okObject(r) as ParsedEndpointSlice;
  t.deepEqual(slice.groups, [
    {
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
      addresses: [
        { ip: '10.180.0.1', ready: true, serving: true, terminating: false, nodeName: 'node-a' },
        { ip: '10.180.2.1', ready: true, serving: true, terminating: false },
        { ip: '10.180.2.2', ready: false, serving: false, terminating: false },
      ],
    },
  ]);
  // Structural problems still make the whole slice invalid.
  const structural = (endpoints: unknown) =>
    errorText(parse({ apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: { name: 'good-1', namespace: 'nsd', labels: { 'kubernetes.io/service-name': 'good' } }, addressType: 'IPv4', endpoints }));
  t.is(structural({ addresses: ['10.180.2.1'] }), 'in.yaml: EndpointSlice nsd/good-1: endpoints: expected array, got an object');
  t.is(structural([{ addresses: [] }]), 'in.yaml: EndpointSlice nsd/good-1: endpoints[0].addresses: Too small: expected array to have >=1 items');
});

test('legacy Endpoints: a bad address skips only itself', (t) => {
  const r = parse({
    apiVersion: 'v1',
    kind: 'Endpoints',
    metadata: { name: 'web', namespace: 'nsd' },
    subsets: [
      { addresses: [{ ip: '10.180.3.1' }, { ip: '10.180.3.300' }], notReadyAddresses: [{ ip: '10.180.3.02', nodeName: 'n1' }], ports: [{ name: 'http', port: 80 }] },
      { addresses: [{ ip: 'fd00::2' }, { ip: '10.180.3.3' }], ports: [{ name: 'http', port: 81 }] },
    ],
  });
  t.deepEqual(warningLines(r), [
    'in.yaml: Endpoints nsd/web: subsets[0].addresses[1].ip: "10.180.3.300" is not a valid IPv4 address; endpoint ignored',
    'in.yaml: Endpoints nsd/web: subsets[0].notReadyAddresses[0].ip: "10.180.3.02" has leading zeros; read as 10.180.3.2, as kube-proxy does',
  ]);
  // An IPv6 address is an endpoint too, of the IPv6 view (a dual-stack Service's Endpoints list both families).
  const groups = (okObject(r) as ParsedEndpoints).groups;
  t.deepEqual(groups.map((g) => g.addresses.map((a) => `${a.ip}${a.ready ? '' : '!r'}`)), [['10.180.3.1', '10.180.3.2!r'], ['fd00::2', '10.180.3.3']]);
  t.is(groups[0]!.addresses[1]!.nodeName, 'n1');
});

test('Shepherd Service: a bad endpoint entry is skipped alone; leading zeros are read as decimal', (t) => {
  const r = parse({
    kind: 'Service',
    metadata: { name: 'web-service', namespace: 'nsd' },
    spec: { ports: [{ name: 'http', port: 80, target_port: 8080 }] },
    status: { endpoints: ['10.20.0.2:8080', '10.20.0.3', '10.20.0.04:8080', '10.20.0.999:8080', '10.20.0.5:99999', '10.20.0.06:7777'] },
  });
  const at = 'in.yaml: Service nsd/web-service: status.endpoints';
  t.deepEqual(warningLines(r), [
    `${at}[1]: "10.20.0.3" is not an "ip:port" endpoint; entry ignored`,
    `${at}[2]: "10.20.0.04:8080": "10.20.0.04" has leading zeros; read as 10.20.0.4, as kube-proxy does`,
    `${at}[3]: "10.20.0.999:8080": "10.20.0.999" is not a valid IPv4 address; entry ignored`,
    `${at}[4]: "10.20.0.5:99999": 99999 is out of range 1-65535; entry ignored`,
    `${at}[5]: "10.20.0.06:7777": "10.20.0.06" has leading zeros; read as 10.20.0.6, as kube-proxy does`,
    `${at}[5]: "10.20.0.6:7777" matches no target_port of the service; entry ignored`,
  ]);
  const ready = { ready: true, serving: true, terminating: false };
  t.deepEqual((okObject(r) as ParsedService).inlineEndpoints, [
    { ports: [{ name: 'http', port: 8080, protocol: 'TCP' }], addresses: [{ ip: '10.20.0.2', ...ready }, { ip: '10.20.0.4', ...ready }] },
  ]);
});

test('what is read before any schema (kind, name, namespace; a slice\'s addressType and label) never fails on odd shapes', (t) => {
  const outcome = (raw: unknown) => {
    const r = parse(raw, 2);
    return r.status === 'error' ? [r.error.message, r.identity] : r.status === 'ignored' ? r.reason : r.status;
  };
  const slice = { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: { name: 'w', labels: { 'kubernetes.io/service-name': 'web' } } };
  const noLabel = 'no kubernetes.io/service-name label: not tied to a Service (kube-proxy ignores it too)';
  t.deepEqual(outcome({ apiVersion: 'v1', kind: 5, metadata: { name: 'x' } }), ['in.yaml: object default/x: kind: expected a string', undefined]);
  t.deepEqual(outcome({ apiVersion: 'v1', kind: null, metadata: null }), ['in.yaml: object #3: kind: required', undefined]);
  t.deepEqual(outcome({ apiVersion: 'v1', kind: 'Service', metadata: ['x'] }), ['in.yaml: Service #3: metadata: expected object, got a list (and 1 more problem)', undefined]);
  t.deepEqual(outcome({ apiVersion: 'v1', kind: 'Service', metadata: { name: 7, namespace: 'ns' } }), [
    'in.yaml: Service #3: metadata.name: expected string, got number 7 (and 1 more problem)',
    undefined,
  ]);
  t.deepEqual(outcome({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: 7 }, spec: {} }), [
    'in.yaml: Service default/web: metadata.namespace: expected string, got number 7',
    'Service/default/web',
  ]);
  t.deepEqual(outcome({ ...slice, addressType: 4 }), ['in.yaml: EndpointSlice default/w: addressType: expected a string', 'EndpointSlice/default/w']);
  t.deepEqual(outcome(slice), ['in.yaml: EndpointSlice default/w: addressType: required', 'EndpointSlice/default/w']);
  t.is(outcome({ ...slice, metadata: { name: 'w', labels: ['kubernetes.io/service-name'] }, addressType: 'IPv4' }), noLabel);
  t.is(outcome({ ...slice, metadata: null, addressType: 'IPv4' }), noLabel);
  t.deepEqual(outcome({ ...slice, metadata: { name: 'w', labels: { 'kubernetes.io/service-name': 5 } }, addressType: 'IPv4' }), [
    'in.yaml: EndpointSlice default/w: metadata.labels["kubernetes.io/service-name"]: expected string, got number 5',
    'EndpointSlice/default/w',
  ]);
});
