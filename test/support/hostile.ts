/**
 * fast-check generators of manifests with hostile strings, for the
 * hostile-input property test: Kubernetes Services with their
 * EndpointSlice or Endpoints, Shepherd Services and a Node, each valid or
 * "poisoned" in a few of its fields. Every generated object says what drover
 * must do with it (serve it, skip it with an error naming the field, ignore
 * it), and what it must serve when it is valid, so that the test can check
 * both that nothing hostile gets through and that everything valid does.
 */
import fc from 'fast-check';

/** Carried by every hostile string: no payload, netlink message or argument vector may ever contain it. */
export const MARKER = 'xpwnx';

/** Characters and fragments that no validated field (name, namespace, port name, zone, IP, protocol) accepts. */
const BREAKERS = [
  '\n', '\r', '\0', '"', "'", '\\', ' ', '\t', ';', '$(reboot)', '`id`', '#', '*', '%', '/', '=',
  'é', '名', '\u2028', '\u00a0', '\u202e', '\u200b', '\u009b', '🙂', 'ſ', 'Ａ', '١', '\ufeff',
];
/** The classic breakers, each also tried alone inside an otherwise valid name. */
const CLASSIC = [' ', '"', '\n', '\t', "'", '\\', ';', '$', '`', '#', '*', 'é', '\r', '\0'];
/** Fragments that read as iptables options, or break a restore line into two. */
const DASHY = ['--', '-j', '-A KUBE-SERVICES', ' -j ACCEPT', '--comment', '"x" -j DROP', '\n-A KUBE-SERVICES -j ACCEPT\nCOMMIT\n', '\nadd KUBE-CLUSTER-IP 1.2.3.4,tcp:1'];
/** Harmless pieces that make a hostile value look like a valid one. */
const CHUNKS = ['web', 'default', 'http', '10.96.0.1', 'tcp', 'TCP', 'a', '80'];

const fragment = fc.oneof(fc.constantFrom(...BREAKERS), fc.constantFrom(...DASHY), fc.constantFrom(...CHUNKS), fc.string({ unit: 'binary', maxLength: 3 }));

/**
 * A hostile string: {@link MARKER} next to at least one character no
 * validated field accepts (alone in an otherwise valid name, or among other
 * fragments), or behind a leading '-', or in a string too long for any name
 * (253+ characters).
 */
export const hostile: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: fc
    .tuple(fc.constantFrom('', 'web', 'a1'), fc.constantFrom(...CLASSIC), fc.constantFrom('', 'x', '9'))
    .map(([before, breaker, after]) => `${before}${breaker}${MARKER}${after}`) },
  { weight: 6, arbitrary: fc
    .tuple(fc.array(fragment, { maxLength: 3 }), fc.constantFrom(...BREAKERS), fc.array(fragment, { maxLength: 3 }), fc.boolean())
    .map(([a, b, c, markerFirst]) => [...a, ...(markerFirst ? [MARKER, b] : [b, MARKER]), ...c].join('')) },
  { weight: 1, arbitrary: fc.constantFrom(`--${MARKER}`, `-j${MARKER}`, `-${MARKER}`, `${MARKER}-`, `-A ${MARKER}`, `${MARKER}.`) },
  { weight: 1, arbitrary: fc.integer({ min: 250, max: 600 }).map((n) => `${MARKER}${'a'.repeat(n)}`) },
);

/** IP-like values that are no usable IPv4 address, for IP fields (besides {@link hostile} ones). None of them is IPv6. */
const BAD_IPS = [
  '10.96.0.256', '10.96.0', '10.96.0.1.2', '١٠.96.0.1', '10.96.0.1/32', '0x0a.0.0.1', ' 10.96.0.1', '10.96.0.1 ',
  '127.0.0.1', '0.0.0.0', '224.0.0.1', '255.255.255.255', '169.254.0.1', `10.96.0.1 ${MARKER}`, `10.96.0.1\n${MARKER}`,
];
/** A value for an IP field that must be refused (never "", which some IP fields read as "none"). */
export const badIP: fc.Arbitrary<string> = fc.oneof(hostile, fc.constantFrom(...BAD_IPS));

/** What drover must do with an object because of one poisoned field. */
export type Effect =
  /** The object is skipped with a ManifestError naming this field. */
  | 'reject'
  /** The object is served without the entry (an endpoint or Shepherd endpoint string), with a warning. */
  | 'drop'
  /** The field is not read: the object is served as if it were not there. */
  | 'strip'
  /** The object is not something drover reads (apiVersion, kind, addressType). */
  | 'ignore';

/** One poisoned field: where, what and its effect. */
export interface Poison {
  readonly path: readonly (string | number)[];
  readonly value: string;
  readonly effect: Effect;
}

/** A place an object can be poisoned at, and the arbitrary of the value put there. */
interface Site {
  readonly path: readonly (string | number)[];
  readonly effect: Effect;
  readonly value?: fc.Arbitrary<string>;
  /** The path's last key is a hostile string itself (a label or annotation key). */
  readonly hostileKey?: boolean;
}

const rejects = (...paths: Array<readonly (string | number)[]>): Site[] => paths.map((path) => ({ path, effect: 'reject' }));
const strips = (...paths: Array<readonly (string | number)[]>): Site[] => paths.map((path) => ({ path, effect: 'strip' }));
/** Labels and annotations: every key and value but the few drover reads is stripped. */
const META_STRIPS: Site[] = [
  { path: ['metadata', 'labels', 'app'], effect: 'strip' },
  { path: ['metadata', 'labels'], effect: 'strip', hostileKey: true },
  { path: ['metadata', 'annotations', 'note'], effect: 'strip' },
  { path: ['metadata', 'annotations'], effect: 'strip', hostileKey: true },
  { path: ['metadata', 'uid'], effect: 'strip' },
];
const IGNORES: Site[] = [{ path: ['kind'], effect: 'ignore' }];

const SITES = {
  service: [
    ...rejects(['metadata', 'name'], ['metadata', 'namespace'], ['spec', 'ports', 0, 'name'], ['spec', 'ports', 0, 'protocol'], ['spec', 'ports', 0, 'targetPort'],
      ['spec', 'type'], ['spec', 'sessionAffinity'], ['spec', 'internalTrafficPolicy'], ['spec', 'ipFamilies', 0],
      // Numbers and booleans given as strings.
      ['spec', 'ports', 0, 'port'], ['spec', 'ports', 0, 'nodePort'], ['spec', 'healthCheckNodePort'], ['spec', 'sessionAffinityConfig', 'clientIP', 'timeoutSeconds']),
    ...[['spec', 'clusterIP'], ['spec', 'clusterIPs', 0], ['spec', 'externalIPs', 0], ['status', 'loadBalancer', 'ingress', 0, 'ip']]
      .map((path): Site => ({ path, effect: 'reject', value: badIP })),
    // "10.96.0.1/32" is a valid source range: only hostile strings here.
    // A bad source range is named in a warning and skipped; the Service is served without it (kube-proxy reads the valid ones).
    { path: ['spec', 'loadBalancerSourceRanges', 0], effect: 'strip' },
    // A selector is validated as the API server validates label selectors (pods.ts): a bad value skips the Service.
    ...rejects(['spec', 'selector', 'app']),
    ...strips(['spec', 'ports', 0, 'appProtocol'], ['status', 'loadBalancer', 'ingress', 0, 'hostname'], ['spec', 'externalName']),
    ...META_STRIPS,
    ...IGNORES,
    { path: ['apiVersion'], effect: 'ignore' },
  ],
  slice: [
    ...rejects(['metadata', 'name'], ['metadata', 'namespace'], ['metadata', 'labels', 'kubernetes.io/service-name'], ['endpoints', 0, 'nodeName'], ['endpoints', 0, 'zone'],
      ['endpoints', 0, 'hints', 'forZones', 0, 'name'], ['endpoints', 0, 'hints', 'forNodes', 0, 'name'], ['ports', 0, 'name'], ['ports', 0, 'protocol'],
      ['ports', 0, 'port'], ['endpoints', 0, 'conditions', 'ready']),
    { path: ['endpoints', 0, 'addresses', 0], effect: 'drop', value: badIP },
    ...strips(['endpoints', 0, 'hostname'], ['endpoints', 0, 'targetRef', 'name'], ['endpoints', 0, 'targetRef', 'namespace'], ['ports', 0, 'appProtocol']),
    { path: ['endpoints', 0, 'deprecatedTopology'], effect: 'strip', hostileKey: true },
    ...META_STRIPS,
    ...IGNORES,
    { path: ['apiVersion'], effect: 'ignore' },
    { path: ['addressType'], effect: 'ignore' },
  ],
  endpoints: [
    ...rejects(['metadata', 'name'], ['metadata', 'namespace'], ['subsets', 0, 'addresses', 0, 'nodeName'], ['subsets', 0, 'ports', 0, 'name'], ['subsets', 0, 'ports', 0, 'protocol'],
      ['subsets', 0, 'ports', 0, 'port']),
    { path: ['subsets', 0, 'addresses', 0, 'ip'], effect: 'drop', value: badIP },
    ...strips(['subsets', 0, 'addresses', 0, 'hostname'], ['subsets', 0, 'addresses', 0, 'targetRef', 'name'], ['subsets', 0, 'ports', 0, 'appProtocol']),
    ...META_STRIPS,
    ...IGNORES,
    { path: ['apiVersion'], effect: 'ignore' },
  ],
  shepherd: [
    ...rejects(['metadata', 'name'], ['metadata', 'namespace'], ['spec', 'ports', 0, 'name'], ['spec', 'ports', 0, 'protocol'], ['spec', 'type'],
      ['spec', 'ports', 0, 'port'], ['spec', 'ports', 0, 'target_port'], ['spec', 'ports', 0, 'node_port']),
    { path: ['status', 'cluster_ip'], effect: 'reject', value: badIP },
    { path: ['status', 'endpoints', 0], effect: 'drop', value: badIP },
    ...rejects(['spec', 'selector', 'app']),
    ...META_STRIPS,
    ...IGNORES,
    { path: ['apiVersion'], effect: 'ignore' },
  ],
  node: [
    ...rejects(['metadata', 'name'], ['metadata', 'labels', 'topology.kubernetes.io/zone'], ['status', 'addresses', 0, 'type']),
    { path: ['status', 'addresses', 0, 'address'], effect: 'reject', value: badIP },
    ...strips(['status', 'addresses', 1, 'address'], ['metadata', 'labels', 'kubernetes.io/hostname']),
    ...META_STRIPS,
    ...IGNORES,
    { path: ['apiVersion'], effect: 'ignore' },
  ],
} satisfies Record<string, Site[]>;

/** Up to two poisons from `sites`. */
function poisons(sites: readonly Site[]): fc.Arbitrary<Poison[]> {
  const one = fc.constantFrom(...sites).chain((s) =>
    fc.tuple(s.value ?? hostile, hostile).map(([value, key]): Poison => ({ path: s.hostileKey ? [...s.path, key] : s.path, value, effect: s.effect })),
  );
  return fc.oneof({ weight: 2, arbitrary: fc.constant<Poison[]>([]) }, { weight: 3, arbitrary: fc.array(one, { minLength: 1, maxLength: 2 }) });
}

/** Set `value` at `path` in `obj`, creating objects and lists on the way. */
export function setPath(obj: Record<string | number, unknown>, path: readonly (string | number)[], value: unknown): void {
  let at: Record<string | number, unknown> = obj;
  path.forEach((key, i) => {
    if (i === path.length - 1) {
      at[key] = value;
      return;
    }
    if (typeof at[key] !== 'object' || at[key] === null) at[key] = typeof path[i + 1] === 'number' ? [] : {};
    at = at[key] as Record<string | number, unknown>;
  });
}

/** What drover does with an object: the strongest effect of its poisons ('ignore' over 'reject'), 'ok' otherwise. */
export function fate(ps: readonly Poison[]): 'ok' | 'reject' | 'ignore' {
  if (ps.some((p) => p.effect === 'ignore')) return 'ignore';
  return ps.some((p) => p.effect === 'reject') ? 'reject' : 'ok';
}

/** One generated manifest object. */
export interface GenObject {
  readonly kind: string;
  /** The object before poisoning (what the expectations are computed from). */
  readonly clean: Record<string, unknown>;
  readonly raw: Record<string, unknown>;
  readonly poisons: readonly Poison[];
}

/** An endpoint address as written, and as drover must read it. */
export interface GenAddress {
  readonly text: string;
  readonly ip: string;
}

/** One service port as generated. */
export interface GenPort {
  readonly name: string;
  readonly port: number;
  readonly targetPort: number;
  /** As the Kubernetes API spells it. */
  readonly protocol: 'TCP' | 'UDP' | 'SCTP';
}

/** One generated Service and where its endpoints come from. */
export interface GenService {
  readonly namespace: string;
  readonly name: string;
  /** The ClusterIP written in the manifest; undefined for a Shepherd Service (drover allocates one). */
  readonly clusterIP: string | undefined;
  readonly ports: readonly GenPort[];
  readonly service: GenObject;
  /** The EndpointSlice or Endpoints object; undefined for a Shepherd Service. */
  readonly endpoints: GenObject | undefined;
  /** The endpoint addresses, as written and as read. */
  readonly addresses: readonly GenAddress[];
  /**
   * A 'drop' poison replaced the first endpoint entry: the first address of
   * the EndpointSlice or Endpoints object (every port), or the first
   * `status.endpoints` entry of a Shepherd Service (its first port only).
   */
  readonly dropFirst: boolean;
}

/** A generated manifest set: services with their endpoints, maybe a Node, spread over files. */
export interface GenWorld {
  readonly services: readonly GenService[];
  readonly node: GenObject | undefined;
  /** Every object with the file it is in. */
  readonly files: ReadonlyArray<{ readonly file: string; readonly objects: readonly GenObject[] }>;
}

const NAMES = ['web', 'dns', 'a--b', 'x1', 'n'.repeat(55)];
const NAMESPACES = ['default', 'kube-system', 'ns--1', 'z'.repeat(63)];
/** File names; drover names them in errors, never in what it writes. */
const FILES = ['a.yaml', `dir/we ird\n${MARKER}.json`, 'b/"q".yaml'];

function poisoned(kind: string, clean: Record<string, unknown>, ps: readonly Poison[]): GenObject {
  const raw = structuredClone(clean);
  for (const p of ps) setPath(raw, p.path, p.value);
  return { kind, clean, raw, poisons: ps };
}

/** An endpoint address: canonical, or with leading zeros (read as decimal, as kube-proxy does). */
function address(i: number, j: number, sloppy: boolean): GenAddress {
  const ip = `10.244.${i}.${j + 1}`;
  return { text: sloppy ? `10.244.${String(i).padStart(3, '0')}.${String(j + 1).padStart(2, '0')}` : ip, ip };
}

/** The service ports of service `i`: one unnamed, or two named. */
const portsArb = (i: number): fc.Arbitrary<GenPort[]> =>
  fc.tuple(fc.boolean(), fc.constantFrom('TCP', 'UDP', 'SCTP'), fc.constantFrom('TCP', 'UDP', 'SCTP')).map(([two, p0, p1]) =>
    two
      ? [
          { name: 'http', port: 80, targetPort: 8080 + i, protocol: p0 },
          { name: 'metrics', port: 9100, targetPort: 9100, protocol: p1 },
        ]
      : [{ name: '', port: 53, targetPort: 5353, protocol: p0 }],
  );

/** Service `i` in one of the three shapes, with its endpoints. */
function serviceArb(i: number): fc.Arbitrary<GenService> {
  return fc
    .record({
      shape: fc.constantFrom('slice', 'endpoints', 'shepherd'),
      name: fc.constantFrom(...NAMES),
      namespace: fc.constantFrom(...NAMESPACES),
      ports: portsArb(i),
      // At least one address: a poison of an endpoint's field then lands in a real endpoint.
      sloppy: fc.array(fc.boolean(), { minLength: 1, maxLength: 3 }),
    })
    .chain((g) => {
      const name = `${g.name}-${i}`;
      const addresses = g.sloppy.map((s, j) => address(i, j, s));
      const sites = g.shape === 'shepherd' ? SITES.shepherd : SITES.service;
      const epSites = g.shape === 'slice' ? SITES.slice : SITES.endpoints;
      return fc.tuple(poisons(sites), poisons(epSites)).map(([svcPoisons, epPoisons]): GenService => {
        if (g.shape === 'shepherd') {
          const clean = shepherdService(g.namespace, name, g.ports, addresses);
          return { namespace: g.namespace, name, clusterIP: undefined, ports: g.ports, service: poisoned('Service', clean, svcPoisons), endpoints: undefined, addresses, dropFirst: drops(svcPoisons) };
        }
        const clusterIP = `10.100.${i}.1`;
        const clean = k8sService(g.namespace, name, clusterIP, g.ports);
        const eps = g.shape === 'slice' ? endpointSlice(g.namespace, name, g.ports, addresses) : legacyEndpoints(g.namespace, name, g.ports, addresses);
        const endpoints = poisoned(g.shape === 'slice' ? 'EndpointSlice' : 'Endpoints', eps, epPoisons);
        return { namespace: g.namespace, name, clusterIP, ports: g.ports, service: poisoned('Service', clean, svcPoisons), endpoints, addresses, dropFirst: drops(epPoisons) };
      });
    });
}

/** True when a poison replaced the first endpoint entry. */
function drops(ps: readonly Poison[]): boolean {
  return ps.some((p) => p.effect === 'drop');
}

function k8sService(namespace: string, name: string, clusterIP: string, ports: readonly GenPort[]): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace, labels: { app: name }, annotations: { note: 'generated' } },
    spec: {
      type: 'ClusterIP',
      clusterIP,
      clusterIPs: [clusterIP],
      ipFamilies: ['IPv4'],
      selector: { app: name },
      sessionAffinity: 'None',
      ports: ports.map((p) => ({ ...(p.name ? { name: p.name } : {}), port: p.port, targetPort: p.targetPort, protocol: p.protocol, appProtocol: 'http' })),
    },
    status: { loadBalancer: {} },
  };
}

function endpointSlice(namespace: string, service: string, ports: readonly GenPort[], addresses: readonly GenAddress[]): Record<string, unknown> {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    addressType: 'IPv4',
    metadata: { name: `${service}-abcde`, namespace, labels: { 'kubernetes.io/service-name': service, app: service } },
    endpoints: addresses.map((a, j) => ({
      addresses: [a.text],
      conditions: { ready: true },
      hostname: `pod-${j}`,
      nodeName: 'node-1',
      zone: 'zone-a',
      targetRef: { kind: 'Pod', name: `pod-${j}`, namespace },
    })),
    ports: ports.map((p) => ({ name: p.name, port: p.targetPort, protocol: p.protocol })),
  };
}

function legacyEndpoints(namespace: string, service: string, ports: readonly GenPort[], addresses: readonly GenAddress[]): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Endpoints',
    metadata: { name: service, namespace },
    subsets: [
      {
        addresses: addresses.map((a, j) => ({ ip: a.text, nodeName: 'node-1', hostname: `pod-${j}`, targetRef: { kind: 'Pod', name: `pod-${j}` } })),
        ports: ports.map((p) => ({ name: p.name, port: p.targetPort, protocol: p.protocol })),
      },
    ],
  };
}

function shepherdService(namespace: string, name: string, ports: readonly GenPort[], addresses: readonly GenAddress[]): Record<string, unknown> {
  return {
    kind: 'Service',
    metadata: { name, namespace },
    spec: {
      selector: { app: name },
      type: 'ClusterIP',
      ports: ports.map((p) => ({ name: p.name, port: p.port, target_port: p.targetPort, protocol: p.protocol.toLowerCase() })),
    },
    // One entry per address and port, as Shepherd lists them.
    status: { cluster_ip: '', endpoints: ports.flatMap((p) => addresses.map((a) => `${a.text}:${p.targetPort}`)) },
  };
}

function node(): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'node-1', labels: { 'topology.kubernetes.io/zone': 'zone-a', 'kubernetes.io/hostname': 'node-1' } },
    status: { addresses: [{ type: 'InternalIP', address: '192.168.1.10' }, { type: 'Hostname', address: 'node-1' }] },
  };
}

/** A manifest set of 1-6 services (and maybe a Node), spread over {@link FILES}. */
export const worldArb: fc.Arbitrary<GenWorld> = fc
  .integer({ min: 1, max: 6 })
  .chain((n) =>
    fc.tuple(
      fc.tuple(...Array.from({ length: n }, (_, i) => serviceArb(i))),
      fc.option(poisons(SITES.node), { nil: undefined }),
      fc.array(fc.nat(FILES.length - 1), { minLength: 2 * n + 1, maxLength: 2 * n + 1 }),
    ),
  )
  .map(([services, nodePoisons, placement]) => {
    const n = nodePoisons === undefined ? undefined : poisoned('Node', node(), nodePoisons);
    const objects = [...services.flatMap((s) => [s.service, ...(s.endpoints ? [s.endpoints] : [])]), ...(n ? [n] : [])];
    const files = FILES.map((file, f) => ({ file, objects: objects.filter((_, k) => placement[k] === f) }));
    // A counterexample prints as the manifests themselves.
    const manifests = () => JSON.stringify(files.map((f) => ({ file: f.file, objects: f.objects.map((o) => o.raw) })));
    return { services, node: n, files, [fc.toStringMethod]: manifests };
  });
