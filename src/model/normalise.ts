/**
 * Cross-object normalisation: validated objects (parse.ts) in, one immutable
 * Snapshot out. This is where kube-proxy's ServiceChangeTracker and
 * EndpointSliceCache logic lives in drover (pkg/proxy/service.go,
 * pkg/proxy/endpointslicecache.go), reduced to a pure function:
 *
 *   - one ServicePort per Service port, keyed by the ServicePortName string
 *     "namespace/name:portName" ("namespace/name" for an unnamed port);
 *   - Kubernetes services take their endpoints from their EndpointSlices
 *     (all of them merged), or from the legacy Endpoints object only when
 *     there is no slice; Shepherd services from their inline endpoints;
 *     a service with none of these and a selector from the Pods it selects
 *     (pods.ts, as the EndpointSlice controller would); endpoints are
 *     matched to service ports by name and protocol (endpoints.ts);
 *   - services without a ClusterIP get one from allocate.ts;
 *   - each family gets its own service ports (family.ts): `services` those
 *     with an IPv4 ClusterIP, `ipv6Services` those with an IPv6 one, each
 *     with the endpoints of its family;
 *   - this node is the Node object named `nodeName` (BuildOptions), or
 *     without a name the only Node object read; with a name that no Node
 *     object has, a node known by that name alone; none otherwise.
 *
 * Cross-object errors (the object is skipped, everything else is served):
 *   - the same identity ("Kind/namespace/name") twice: the first in input
 *     order wins;
 *   - no free address left in the service CIDR.
 *
 * Refusals (claims.ts, in order of creation, never of history): a Service
 * whose ClusterIP:port/protocol an earlier-created one has is skipped; a
 * NodePort out of `nodePortRange` or taken by an earlier Service, and an
 * external or LoadBalancer IP taken, are left out of a Service still served.
 *
 * Warnings (the object is served, but some of its content is unused):
 *   - an EndpointSlice or Endpoints object whose Service does not exist;
 *   - an endpoint port whose name matches no service port, or matches a
 *     service port of another protocol (endpoints.ts portWarnings);
 *   - several Node objects and no `nodeName` to choose one: none is used;
 *   - a `nodeName` that no Node object has, among others (then the node is known by name alone).
 *
 * Notes (informational, for a log line): a service whose EndpointSlices,
 * Endpoints or inline endpoints are used while Pods also match its selector.
 */
import { allocateClusterIPs, parseServiceCIDR } from './allocate.ts';
import { settleFrontends, trimServicePorts, type Claimant, type NodePortRange } from './claims.ts';
import { frozenCopy } from './copy.ts';
import { endpointsFor, groupByService, indexEndpoints, orphanWarnings, portWarnings, type EndpointIndex } from './endpoints.ts';
import { displayFile, ManifestError, objectError } from './errors.ts';
import { compareStrings } from './order.ts';
import type { EndpointGroup, ParsedEndpoints, ParsedEndpointSlice, ParsedNode, ParsedObject, ParsedPod, ParsedService, ParsedServicePort } from './parsed.ts';
import { indexPods, nodeZones, podEndpointGroups, selectedPods, type PodIndex } from './pods.ts';
import type { DnsOnlyService, NodeInfo, ServicePort, ServiceType, Snapshot } from './types.ts';
import { ipFamilyOf } from './validate.ts';

/** Options of {@link buildSnapshot}. */
export interface BuildOptions {
  /** Service CIDR for allocation, e.g. "10.96.0.0/12". */
  readonly serviceCIDR: string;
  /** The snapshot built last time: allocation stickiness (which Service keeps a frontend never depends on it, claims.ts). */
  readonly previous?: Snapshot;
  /** NodePorts allowed (`--service-node-port-range`); default claims.ts DEFAULT_NODE_PORT_RANGE, 30000-32767. */
  readonly nodePortRange?: NodePortRange;
  /**
   * This node's name, to pick its Node object among several; without it,
   * only a lone Node object is used. With it and no Node object of that
   * name, the node is known by name alone (NodeInfo.nameOnly).
   */
  readonly nodeName?: string;
  /**
   * "namespace/name" → ClusterIP allocated by an earlier drover process (the
   * allocation state file, sources/allocation-state.ts). A service absent
   * from `previous` keeps its remembered address as it would keep one of
   * `previous` (allocate.ts step 1), unless a service of `previous` holds it;
   * the remembered address of a service absent from the objects is given
   * to no other service (unless one of `previous` holds it).
   */
  readonly remembered?: ReadonlyMap<string, string>;
  /** The service ports of earlier builds, reused when their inputs are the same objects (see {@link BuildMemo}). */
  readonly memo?: BuildMemo;
}

/**
 * The service ports an earlier {@link buildSnapshot} made of each Service,
 * so that a build costs what changed rather than every endpoint again: a
 * Service (the same ParsedService object) with the same ClusterIP and the
 * same endpoint groups (the same EndpointGroup objects, in the same order:
 * its EndpointSlices, Endpoints or inline endpoints unchanged) gets the
 * very ServicePort objects it got before. Endpoints derived from Pods are
 * new groups at every build, so such a Service is always built again. Held
 * weakly: a Service no longer read is forgotten. Owned by one caller
 * (sources/decoder.ts).
 */
export class BuildMemo {
  private readonly byService = new WeakMap<ParsedService, Built>();
  /** The same for the IPv6 view of each Service (family.ts). */
  private readonly byService6 = new WeakMap<ParsedService, Built>();
  /** The DNS-only Service made of each headless or ExternalName Service, with the groups it was made from ({@link memoDnsOnly}). */
  readonly dnsOnly = new WeakMap<ParsedService, { readonly groups: readonly EndpointGroup[]; readonly value: DnsOnlyService }>();

  /** The service ports built for `svc` at `ip` (of either family: one memo each) from `groups`, reused or made by `make`. */
  portsOf(svc: ParsedService, ip: string, groups: readonly EndpointGroup[], make: () => ServicePort[]): readonly ServicePort[] {
    const store = ip.includes(':') ? this.byService6 : this.byService;
    const seen = store.get(svc);
    if (seen !== undefined && seen.ip === ip && seen.groups.length === groups.length && seen.groups.every((g, i) => g === groups[i])) return seen.ports;
    const ports = make();
    store.set(svc, { ip, groups, ports });
    return ports;
  }
}

/**
 * The DNS-only Service (types.ts DnsOnlyService) an earlier build made of
 * `svc` with the same endpoint `groups` (the same objects, in order), or
 * the one `make` makes now: an unchanged headless or ExternalName Service
 * keeps its object, so src/dns compares by identity.
 */
function memoDnsOnly(memo: BuildMemo, svc: ParsedService, groups: readonly EndpointGroup[], make: () => DnsOnlyService): DnsOnlyService {
  const seen = memo.dnsOnly.get(svc);
  if (seen !== undefined && seen.groups.length === groups.length && seen.groups.every((g, i) => g === groups[i])) return seen.value;
  const value = make();
  memo.dnsOnly.set(svc, { groups, value });
  return value;
}

/** What {@link BuildMemo} keeps of one Service in one family. */
interface Built {
  readonly ip: string;
  readonly groups: readonly EndpointGroup[];
  readonly ports: readonly ServicePort[];
}

/** A ClusterIP drover allocated: `key` is "namespace/name". */
export interface Allocation {
  readonly key: string;
  readonly clusterIP: string;
}

/**
 * Outcome of {@link buildSnapshot}: errors name each skipped object,
 * warnings each object whose content is partly unused; allocations are
 * sorted by key.
 */
export interface BuildResult {
  readonly snapshot: Snapshot;
  readonly errors: ManifestError[];
  readonly warnings: ManifestError[];
  /**
   * Frontends refused (claims.ts settleFrontends): a Service skipped because
   * an earlier one has its ClusterIP:port/protocol, a NodePort out of range
   * or taken, an external address taken. The source was read whole all the
   * same: these never make it incomplete.
   */
  readonly refusals: ManifestError[];
  readonly allocations: Allocation[];
  /** Informational lines (see the module comment), sorted. */
  readonly notes: string[];
}

/** The ServicePortName string (kube-proxy ServicePortName.String()): "namespace/name:portName" or "namespace/name". */
export function servicePortKey(namespace: string, name: string, portName: string): string {
  return portName === '' ? `${namespace}/${name}` : `${namespace}/${name}:${portName}`;
}

/**
 * Build the Snapshot from parsed objects (any order; input order only
 * decides between duplicate identities). Throws Error only when
 * `opts.serviceCIDR` is invalid (a configuration error); every problem with
 * the objects is returned in `errors`.
 */
export function buildSnapshot(objects: readonly ParsedObject[], opts: BuildOptions): BuildResult {
  const cidr = parseServiceCIDR(opts.serviceCIDR);
  const previous = opts.previous?.services ?? new Map<string, ServicePort>();
  const errors: ManifestError[] = [];

  const { services: serviceList, slices: sliceList, legacy: legacyList, nodes, pods: podList } = byKind(dropDuplicates(objects, errors));
  const keyed = sortByServiceKey(serviceList);
  const byKey = new Map<string, ParsedService>();
  for (const { svc, key } of keyed) byKey.set(key, svc);
  const slices = groupByService(sliceList);
  const legacy = groupByService(legacyList);
  const warnings = orphanWarnings(byKey, [...sliceList, ...legacyList]);
  const node = pickNode(nodes, opts.nodeName, warnings);
  const pods = indexPods(podList);
  const zones = nodeZones(nodes);
  const notes: string[] = [];

  // Addresses from the previous snapshot, by "namespace/name".
  const previousIP = new Map<string, string>();
  for (const sp of previous.values()) previousIP.set(serviceKey(sp), sp.clusterIP);
  const held = new Set(previousIP.values());
  for (const [key, ip] of opts.remembered ?? []) {
    if (!previousIP.has(key) && !held.has(ip)) previousIP.set(key, ip);
  }

  // Allocation for proxied services without a ClusterIP (Shepherd's: a
  // Kubernetes Service without one is not proxied, see parse.ts).
  const toAllocate: string[] = [];
  const taken: string[] = [];
  for (const { svc, key } of keyed) {
    if (svc.clusterIP !== undefined) taken.push(svc.clusterIP);
    else if (svc.ports.length > 0 && svc.clusterIPs.length === 0) toAllocate.push(key);
  }
  // A remembered address of a service not in this build stays that service's:
  // the part of the source that holds it may be unreadable now (the source
  // forgets such records once a whole read lacks them, decoder.ts forgetAbsent).
  for (const [key, ip] of opts.remembered ?? []) if (!byKey.has(key) && !held.has(ip)) taken.push(ip);
  const { allocated, exhausted } = allocateClusterIPs({ cidr, keys: toAllocate, taken, previous: previousIP });
  const unallocated = new Set(exhausted);
  if (unallocated.size > 0) {
    for (const { svc, key } of keyed) {
      if (unallocated.has(key)) errors.push(objectError(svc, 'spec', `no free address left in service CIDR ${opts.serviceCIDR}; service skipped`));
    }
  }

  // Who keeps each frontend several Services claim, and which NodePorts are out of range (claims.ts).
  // `ip` is the IPv4 ClusterIP (given or allocated), `ip6` the IPv6 one; a Service has at least one.
  const resolved: Resolved[] = [];
  for (const { svc, key } of keyed) {
    if (svc.ports.length === 0 || unallocated.has(key)) continue;
    const ip6 = svc.clusterIPs.find((c) => c.family === 'IPv6')?.ip;
    const ip = svc.clusterIP ?? (ip6 === undefined ? allocated.get(key) : undefined);
    resolved.push({ svc, key, ip, ip6 });
  }
  const { accepted, trims, refusals } = settleFrontends(resolved, opts.nodePortRange);

  const ports: ServicePort[] = [];
  const ports6: ServicePort[] = [];
  const memo = opts.memo ?? new BuildMemo();
  // In key order (settleFrontends keeps it), so that the endpoint-port warnings come in an order that does not depend on precedence.
  for (const { svc, key, ip, ip6 } of accepted) {
    const groups = endpointGroups(svc, key, slices, legacy, pods, zones, warnings, notes);
    const trim = trims.get(key);
    if (ip !== undefined) for (const sp of trimServicePorts(servicePorts(svc, ip, groups, memo), svc, trim)) ports.push(sp);
    if (ip6 !== undefined) for (const sp of trimServicePorts(servicePorts(svc, ip6, groups, memo), svc, trim)) ports6.push(sp);
  }
  ports.sort((a, b) => compareStrings(a.key, b.key));
  ports6.sort((a, b) => compareStrings(a.key, b.key));

  const allocations = accepted
    .filter((r) => r.svc.clusterIPs.length === 0)
    .map((r) => Object.freeze({ key: r.key, clusterIP: r.ip! }))
    .sort((a, b) => compareStrings(a.key, b.key));
  const dnsOnly = dnsOnlyServices(keyed, slices, legacy, pods, zones, memo);
  const snapshot: Snapshot = Object.freeze({
    services: byPortKey(ports),
    ...(ports6.length > 0 ? { ipv6Services: byPortKey(ports6) } : {}),
    ...(node !== undefined ? { node } : {}),
    ...(dnsOnly.size > 0 ? { dnsOnly } : {}),
  });
  return { snapshot, errors, warnings, refusals, allocations, notes: notes.sort(compareStrings) };
}

/**
 * The Services only DNS serves (Snapshot.dnsOnly), by "namespace/name" in
 * the order of `keyed`: each ExternalName Service with a valid name, and
 * each headless Service with the endpoint groups {@link endpointGroups}
 * gives it for its own ports (parse.ts keeps them in `dnsOnly`). Their
 * endpoint-port warnings and notes are not reported: the proxy never uses
 * these endpoints. Reused from `memo` when unchanged.
 */
function dnsOnlyServices(
  keyed: ReadonlyArray<{ readonly svc: ParsedService; readonly key: string }>,
  slices: ReadonlyMap<string, readonly ParsedEndpointSlice[]>,
  legacy: ReadonlyMap<string, readonly ParsedEndpoints[]>,
  pods: PodIndex,
  zones: ReadonlyMap<string, string>,
  memo: BuildMemo,
): Map<string, DnsOnlyService> {
  const out = new Map<string, DnsOnlyService>();
  for (const { svc, key } of keyed) {
    const dns = svc.dnsOnly;
    if (dns === undefined) continue;
    if (dns.kind === 'externalName') {
      out.set(key, memoDnsOnly(memo, svc, NONE, () => Object.freeze({ kind: 'externalName', namespace: svc.namespace, name: svc.name, externalName: dns.externalName })));
      continue;
    }
    const groups = endpointGroups({ ...svc, ports: dns.ports }, key, slices, legacy, pods, zones, [], []);
    out.set(key, memoDnsOnly(memo, svc, groups, () => Object.freeze({ kind: 'headless', namespace: svc.namespace, name: svc.name, groups })));
  }
  return out;
}

/** A Service that passed allocation, with its IPv4 (`ip`) and IPv6 (`ip6`) ClusterIPs: at least one of them. */
type Resolved = Claimant;

/**
 * The service ports of `svc` at ClusterIP `ip` with endpoint `groups` (of
 * {@link endpointGroups}), one per port of the Service, reused from `memo`
 * when the same Service had the same address and groups before. They are
 * of the family of `ip` (family.ts): only the endpoints of that family.
 */
export function servicePorts(svc: ParsedService, ip: string, groups: readonly EndpointGroup[], memo: BuildMemo): readonly ServicePort[] {
  return memo.portsOf(svc, ip, groups, () => {
    const index = indexEndpoints(groups, ipFamilyOf(ip));
    return svc.ports.map((p) => makeServicePort(svc, p, ip, svc.clusterIPs.length === 0, index));
  });
}

/**
 * The endpoint groups `svc` (whose "namespace/name" is `key`) takes: its
 * EndpointSlices, else its legacy Endpoints (Kubernetes) or its inline
 * endpoints (Shepherd); when it has none of these, those of the Pods its
 * selector picks (pods.ts). `slices` and `legacy` are the endpoint objects
 * of each service ("namespace/name"), each list sorted by name
 * (endpoints.ts groupByService). Pushes endpoint-port warnings onto
 * `warnings`, and a note onto `notes` when Pods match but the other
 * endpoints win.
 */
export function endpointGroups(
  svc: ParsedService,
  key: string,
  slices: ReadonlyMap<string, readonly ParsedEndpointSlice[]>,
  legacy: ReadonlyMap<string, readonly ParsedEndpoints[]>,
  pods: PodIndex,
  zones: ReadonlyMap<string, string>,
  warnings: ManifestError[],
  notes: string[],
): readonly EndpointGroup[] {
  let given: { groups: readonly EndpointGroup[]; what: string } | undefined;
  if (svc.source === 'shepherd') {
    const inline = svc.inlineEndpoints ?? [];
    if (inline.some((g) => g.addresses.length > 0)) given = { groups: inline, what: 'status.endpoints' };
  } else {
    const used = slices.get(key) ?? legacy.get(key);
    if (used !== undefined) {
      for (const w of portWarnings(svc, used)) warnings.push(w);
      // One object (the common case) lends its own list of groups.
      given = { groups: used.length === 1 ? used[0]!.groups : used.flatMap((o) => o.groups), what: used[0]!.kind === 'Endpoints' ? 'Endpoints' : 'EndpointSlices' };
    }
  }
  const selected = selectedPods(svc, pods);
  if (given === undefined) return podEndpointGroups(svc, selected, zones);
  if (selected.length > 0) {
    const n = selected.length;
    notes.push(`Service ${key} uses its ${given.what}; the ${n} Pod${n === 1 ? '' : 's'} its selector matches ${n === 1 ? 'is' : 'are'} not used`);
  }
  return given.groups;
}

/** "namespace/name" of a service (or of a ServicePort's service). */
function serviceKey(o: { namespace: string; name: string }): string {
  return `${o.namespace}/${o.name}`;
}

/** Service ports by key, in the order of `ports`. */
function byPortKey(ports: readonly ServicePort[]): Map<string, ServicePort> {
  const out = new Map<string, ServicePort>();
  for (const p of ports) out.set(p.key, p);
  return out;
}

/** `services` with their "namespace/name", sorted by it (each key built once). */
function sortByServiceKey(services: readonly ParsedService[]): Array<{ readonly svc: ParsedService; readonly key: string }> {
  return services.map((svc) => ({ svc, key: serviceKey(svc) })).sort((a, b) => compareStrings(a.key, b.key));
}

/** `objects` by kind, each list in the order of `objects`. */
function byKind(objects: readonly ParsedObject[]): {
  services: ParsedService[];
  slices: ParsedEndpointSlice[];
  legacy: ParsedEndpoints[];
  nodes: ParsedNode[];
  pods: ParsedPod[];
} {
  const out = { services: [] as ParsedService[], slices: [] as ParsedEndpointSlice[], legacy: [] as ParsedEndpoints[], nodes: [] as ParsedNode[], pods: [] as ParsedPod[] };
  for (const o of objects) {
    switch (o.kind) {
      case 'Service':
        out.services.push(o);
        break;
      case 'EndpointSlice':
        out.slices.push(o);
        break;
      case 'Endpoints':
        out.legacy.push(o);
        break;
      case 'Node':
        out.nodes.push(o);
        break;
      case 'Pod':
        out.pods.push(o);
        break;
    }
  }
  return out;
}

/** Keep the first object of each identity; report the others. */
function dropDuplicates(objects: readonly ParsedObject[], errors: ManifestError[]): ParsedObject[] {
  const first = new Map<string, ParsedObject>();
  for (const o of objects) {
    const seen = first.get(o.identity);
    if (seen === undefined) first.set(o.identity, o);
    else errors.push(errorOn(o, `duplicate ${o.kind} ${objectName(o)}, already defined in ${displayFile(seen.file)}; this copy is skipped`));
  }
  return [...first.values()];
}

/** "namespace/name", or the name alone for a cluster-scoped object (a Node). */
function objectName(o: ParsedObject): string {
  return o.kind === 'Node' ? o.name : `${o.namespace}/${o.name}`;
}

/** An error or warning on object `o` as a whole, naming it as {@link objectName} does. */
function errorOn(o: ParsedObject, detail: string): ManifestError {
  if (o.kind !== 'Node') return objectError(o, '', detail);
  return new ManifestError({ file: o.file, kind: o.kind, object: o.name, index: o.index, field: '', detail });
}

/**
 * This node among the Node objects read: the one named `nodeName`, or
 * without a name the only one. When `nodeName` is given and no Node object
 * has it, the node known by that name alone (NodeInfo.nameOnly). Pushes a
 * warning onto `warnings` for each Node object left unused because
 * `nodeName` matches none of them or several exist and no name chooses;
 * returns undefined when there is no node name and no single Node object.
 */
function pickNode(nodes: readonly ParsedNode[], nodeName: string | undefined, warnings: ManifestError[]): NodeInfo | undefined {
  const chosen = nodeName !== undefined ? nodes.find((n) => n.name === nodeName) : nodes.length === 1 ? nodes[0] : undefined;
  if (chosen === undefined) {
    const why = nodeName !== undefined ? `no Node is named ${nodeName}` : `${nodes.length} Node objects and no node name to choose one`;
    for (const n of nodes) warnings.push(errorOn(n, `${why}; Node ignored`));
    return nodeName !== undefined ? NAME_ONLY.get(nodeName) : undefined;
  }
  return Object.freeze({
    name: chosen.name,
    ...(chosen.zone !== undefined ? { zone: chosen.zone } : {}),
    addresses: Object.freeze(chosen.addresses.map((a) => frozenCopy(a))),
    ...(chosen.podCIDRs.length > 0 ? { podCIDRs: Object.freeze([...chosen.podCIDRs]) } : {}),
    ...(chosen.leaving !== undefined ? { leaving: chosen.leaving } : {}),
  });
}

/** One frozen name-only NodeInfo per name, so that builds compare equal and keep their identity. */
const NAME_ONLY = {
  cache: new Map<string, NodeInfo>(),
  get(name: string): NodeInfo {
    let node = this.cache.get(name);
    if (!node) this.cache.set(name, (node = Object.freeze({ name, addresses: Object.freeze([]), nameOnly: true as const })));
    return node;
  },
};

function makeServicePort(svc: ParsedService, p: ParsedServicePort, ip: string, allocatedIP: boolean, index: EndpointIndex): ServicePort {
  return Object.freeze({
    key: servicePortKey(svc.namespace, svc.name, p.name),
    namespace: svc.namespace,
    name: svc.name,
    portName: p.name,
    // ExternalName services have no ports, so never get here.
    type: svc.type as ServiceType,
    clusterIP: ip,
    clusterIPAllocated: allocatedIP,
    port: p.port,
    protocol: p.protocol,
    frontends: Object.freeze({
      clusterIPs: allocatedIP ? Object.freeze([Object.freeze({ family: 'IPv4' as const, ip })]) : frozenCopies(svc.clusterIPs),
      ...(p.nodePort !== undefined ? { nodePort: p.nodePort } : {}),
      externalIPs: frozenCopies(svc.externalIPs),
      loadBalancerIngress: frozenCopies(svc.loadBalancerIngress),
      loadBalancerSourceRanges: svc.loadBalancerSourceRanges.length === 0 ? NONE : Object.freeze([...svc.loadBalancerSourceRanges]),
      ...(svc.healthCheckNodePort !== undefined ? { healthCheckNodePort: svc.healthCheckNodePort } : {}),
    }),
    sessionAffinity: svc.sessionAffinity === null ? null : frozenCopy(svc.sessionAffinity),
    internalTrafficPolicy: svc.internalTrafficPolicy,
    externalTrafficPolicy: svc.externalTrafficPolicy,
    endpoints: endpointsFor(p, index),
  });
}

/** The one empty list of the Snapshot's frontends, shared by every service port that has none (most have no external IPs, for one). */
const NONE: readonly never[] = Object.freeze([]);

/** A frozen list of frozen copies of `list`'s objects; {@link NONE} for an empty one. */
function frozenCopies<T extends object>(list: readonly T[]): readonly Readonly<T>[] {
  return list.length === 0 ? NONE : Object.freeze(list.map((e) => frozenCopy(e)));
}
