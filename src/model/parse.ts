/**
 * Per-object parsing: one raw manifest object in, one validated
 * intermediate object (parsed.ts) out, or an error naming file, object and
 * field, or "ignored" with a reason. All per-object validation happens here
 * (through the schemas of kubernetes.ts and shepherd.ts, and for Services
 * and EndpointSlices of the common shape through fast-service.ts and
 * fast-slice.ts, which give what the schemas give); cross-object rules
 * (duplicates, ClusterIP conflicts, allocation) are normalise.ts's job.
 *
 * Endpoint addresses are read one by one after the schema (validate.ts
 * `parseEndpointIP`, kube-proxy's ParseIPSloppy reading): a bad one, or
 * one of the wrong family (an IPv6 address in an IPv4 EndpointSlice, and
 * the reverse), skips its endpoint (or its Shepherd entry) with a warning
 * naming the field, the rest of the object is kept; leading zeros are read
 * as decimal with a warning. A structural problem (e.g. `endpoints` not a list) still makes
 * the whole object invalid.
 *
 * Dispatch on apiVersion/kind:
 *   - Service + apiVersion v1           → Kubernetes Service
 *   - Service without apiVersion        → Shepherd Service
 *   - EndpointSlice + discovery.k8s.io/v1 → EndpointSlice (addressType IPv4 or IPv6)
 *   - Endpoints + v1                    → legacy Endpoints
 *   - Node + v1                         → Node (cluster-scoped, named by its name alone)
 *   - Pod + v1                          → Kubernetes Pod
 *   - Pod without apiVersion            → Shepherd Pod
 *   - anything else (ConfigMap, Deployment, other API versions) → ignored
 *
 * A Pod's IPs are read like endpoint addresses (ParseIPSloppy), one per
 * family, but a bad one makes the whole Pod invalid: the Pod is its only
 * endpoint.
 */
import { displayName, ManifestError } from './errors.ts';
import {
  k8sEndpointSliceSchema,
  k8sEndpointsSchema,
  k8sNodeSchema,
  TO_BE_DELETED_TAINT,
  k8sPodSchema,
  k8sServiceSchema,
  SERVICE_NAME_LABEL,
  TOPOLOGY_ZONE_LABEL,
  notOursReason,
} from './kubernetes.ts';
import type {
  EndpointAddress,
  EndpointGroup,
  EndpointGroupPort,
  ManifestObject,
  ParsedEndpoints,
  ParsedEndpointSlice,
  ContainerPort,
  ParsedNode,
  ParsedObject,
  ParsedPod,
  ParsedDnsOnly,
  ParsedService,
  ParsedServicePort,
} from './parsed.ts';
import { readExternalName, readHostname } from './dns-names.ts';
import { readCommonService } from './fast-service.ts';
import { readCommonSlice } from './fast-slice.ts';
import { formatPath, isRecord, parseWith } from './schema.ts';
import { shepherdPodSchema, shepherdServiceSchema } from './shepherd.ts';
import { checkSourceRange, ipFamilyOf, parseEndpointIP, parseIPv4HostPort } from './validate.ts';
import type { FamilyIP, IPFamily, LoadBalancerIngress } from './types.ts';
import { compareStrings } from './order.ts';
import { isIPv6 } from './addr.ts';
import { readCreationTime } from './created.ts';

/**
 * Outcome of {@link parseObject}:
 *   - ok: the parsed object, plus non-fatal warnings (entries dropped from it,
 *     endpoint addresses read from a non-canonical form);
 *   - error: the object is invalid and must be skipped; `identity` is its
 *     "Kind/namespace/name" when readable, so a caller can fall back to a
 *     last valid version;
 *   - ignored: not something drover reads; `reason` is for a debug log.
 */
export type ParseResult =
  | { readonly status: 'ok'; readonly object: ParsedObject; readonly warnings: readonly ManifestError[] }
  | { readonly status: 'error'; readonly error: ManifestError; readonly identity: string | undefined }
  | { readonly status: 'ignored'; readonly reason: string };

/** What is known of an object before its schema runs: enough to name it in errors. */
interface Head {
  readonly file: string;
  readonly index: number;
  readonly kind: string;
  /** "namespace/name" for messages ("" when the name is unreadable). */
  readonly object: string;
  readonly identity: string | undefined;
}

/** "Kind/namespace/name": the key under which a source keeps an object's last valid version. */
export function objectIdentity(kind: string, namespace: string, name: string): string {
  return `${kind}/${namespace}/${name}`;
}

/** Options of {@link parseObject}. */
export interface ParseOptions {
  /**
   * Validate every object with its zod schema, never with a fast path
   * (fast-service.ts, fast-slice.ts). The result is the same either way;
   * this is for the tests that show it.
   */
  readonly schemasOnly?: boolean;
}

/**
 * Parse and validate one manifest object. Never throws: every problem is
 * returned as a ManifestError (file, kind, "namespace/name", field path).
 * Services and EndpointSlices of the common shape are read by
 * fast-service.ts and fast-slice.ts rather than by their schemas, with the
 * same result.
 */
export function parseObject(o: ManifestObject, opts: ParseOptions = {}): ParseResult {
  if (typeof o.raw !== 'object' || o.raw === null || Array.isArray(o.raw)) {
    const got = o.raw === null ? 'null' : Array.isArray(o.raw) ? 'a list' : typeof o.raw;
    return error({ file: o.file, index: o.index, kind: '', object: '', identity: undefined }, '', `expected an object, got ${got}`);
  }
  // What every object has (when it is there), read before any schema: never fails.
  const raw = o.raw as Record<string, unknown>;
  const metadata = isRecord(raw.metadata) ? raw.metadata : undefined;
  const kind = typeof raw.kind === 'string' ? raw.kind : '';
  const name = metadata?.name;
  const nsRaw = metadata?.namespace;
  const namespace = typeof nsRaw === 'string' && nsRaw !== '' ? nsRaw : 'default';
  const head: Head = {
    file: o.file,
    index: o.index,
    kind,
    object: typeof name === 'string' ? `${displayName(namespace)}/${displayName(name)}` : '',
    identity: typeof name === 'string' && kind !== '' ? objectIdentity(kind, namespace, name) : undefined,
  };
  if (kind === '') {
    return error(head, 'kind', raw.kind === undefined || raw.kind === null ? 'required' : 'expected a string');
  }
  const apiVersion = raw.apiVersion;
  switch (kind) {
    case 'Service':
      if (apiVersion === 'v1') return parseK8sService(head, o.raw as Record<string, unknown>, opts.schemasOnly === true);
      if (apiVersion === undefined || apiVersion === null) return parseShepherdService(head, o.raw);
      return ignored(`Service of apiVersion ${displayName(apiVersion)} is neither a core v1 nor a Shepherd Service`);
    case 'EndpointSlice':
      if (apiVersion === 'discovery.k8s.io/v1') return parseEndpointSlice(head, o.raw as Record<string, unknown>, opts.schemasOnly === true);
      return ignored(`EndpointSlice of apiVersion ${displayName(apiVersion)} is not supported (only discovery.k8s.io/v1)`);
    case 'Endpoints':
      if (apiVersion === 'v1') return parseEndpoints(head, o.raw);
      return ignored(`Endpoints of apiVersion ${displayName(apiVersion)} is not supported (only v1)`);
    case 'Node':
      if (apiVersion === 'v1') return parseNode(clusterScoped(head, name), o.raw);
      return ignored(`Node of apiVersion ${displayName(apiVersion)} is not supported (only v1)`);
    case 'Pod':
      if (apiVersion === 'v1') return parseK8sPod(head, o.raw);
      if (apiVersion === undefined || apiVersion === null) return parseShepherdPod(head, o.raw);
      return ignored(`Pod of apiVersion ${displayName(apiVersion)} is neither a core v1 nor a Shepherd Pod`);
    default:
      return ignored(`kind ${displayName(kind)} is not read by drover`);
  }
}

/** `head` for a cluster-scoped object: named by its name alone, identity "Kind//name". */
function clusterScoped(head: Head, name: unknown): Head {
  return {
    ...head,
    object: typeof name === 'string' ? displayName(name) : '',
    identity: typeof name === 'string' ? objectIdentity(head.kind, '', name) : undefined,
  };
}

function ignored(reason: string): ParseResult {
  return { status: 'ignored', reason };
}

function error(head: Head, field: string, detail: string): ParseResult {
  return { status: 'error', error: manifestError(head, field, detail), identity: head.identity };
}

function manifestError(head: Head, field: string, detail: string): ManifestError {
  return new ManifestError({ file: head.file, kind: head.kind, object: head.object, index: head.index, field, detail });
}

/** The warnings of the objects that have none (most), shared. */
const NO_WARNINGS: readonly ManifestError[] = Object.freeze([]);

function ok(object: ParsedObject, warnings: readonly ManifestError[] = NO_WARNINGS): ParseResult {
  return { status: 'ok', object, warnings: warnings.length === 0 ? NO_WARNINGS : warnings };
}

/**
 * The fields shared by every parsed object of `head`, followed by those of
 * `rest`, in that order. Built by adding `rest` to the shared fields rather
 * than with a leading object spread (`{ ...shared, ...rest }`), for which V8
 * makes every object a hidden class of its own (a few hundred bytes each),
 * whereas objects built this way share one per set of fields.
 */
function withBase<T extends object>(head: Head, source: 'kubernetes' | 'shepherd', namespace: string, name: string, rest: T) {
  const shared = {
    identity: objectIdentity(head.kind, namespace, name),
    source,
    file: head.file,
    index: head.index,
    namespace,
    name,
  } as const;
  return Object.assign(shared, rest);
}

/** Hint names sorted and de-duplicated, or undefined for none (an absent hint list). */
function hintNames(list: ReadonlyArray<{ name: string }> | undefined): readonly string[] | undefined {
  if (list === undefined || list.length === 0) return undefined;
  return [...new Set(list.map((h) => h.name))].sort(compareStrings);
}

/**
 * An endpoint address with its conditions; nodeName, zone and hints only
 * when given. Fields are added one by one, so that addresses with the same
 * fields share one V8 hidden class (see copy.ts).
 */
function address(
  ip: string,
  c: { ready: boolean; serving: boolean; terminating: boolean },
  nodeName?: string,
  zone?: string,
  hints?: { forZones: ReadonlyArray<{ name: string }>; forNodes: ReadonlyArray<{ name: string }> },
): EndpointAddress {
  const a: { -readonly [K in keyof EndpointAddress]: EndpointAddress[K] } = { ip, ready: c.ready, serving: c.serving, terminating: c.terminating };
  if (nodeName !== undefined) a.nodeName = nodeName;
  if (zone !== undefined) a.zone = zone;
  if (hints !== undefined) {
    const zoneHints = hintNames(hints.forZones);
    const nodeHints = hintNames(hints.forNodes);
    if (zoneHints !== undefined) a.zoneHints = zoneHints;
    if (nodeHints !== undefined) a.nodeHints = nodeHints;
  }
  return a;
}

/** The one empty list of parsed objects, shared by every field that lists nothing (most Services have no external IPs, for one). */
const NONE: readonly never[] = Object.freeze([]);

/** Validated addresses as {@link FamilyIP}s, in order, the first of each duplicate kept. */
function familyIPs(ips: readonly string[]): readonly FamilyIP[] {
  if (ips.length === 0) return NONE;
  if (ips.length === 1) return [{ family: ipFamilyOf(ips[0]!), ip: ips[0]! }];
  return [...new Set(ips)].map((ip) => ({ family: ipFamilyOf(ip), ip }));
}

/**
 * Read the endpoint address `value` of `family` found at the field `path`
 * names (validate.ts `parseEndpointIP`). Returns the canonical address, after
 * pushing a warning onto `warnings` when it was written with leading zeros;
 * or undefined after pushing a warning that ends with `; ${dropped}`. The
 * path is only formatted for a warning.
 */
function readEndpointIP(
  head: Head,
  path: ReadonlyArray<string | number>,
  value: string,
  family: IPFamily,
  dropped: string,
  warnings: ManifestError[],
): string | undefined {
  const r = parseEndpointIP(value, family);
  if ('problem' in r) {
    warnings.push(manifestError(head, formatPath(path), `${r.problem}; ${dropped}`));
    return undefined;
  }
  if (r.note !== undefined) warnings.push(manifestError(head, formatPath(path), r.note));
  return r.ip;
}

const READY = { ready: true, serving: true, terminating: false } as const;
const NOT_READY = { ready: false, serving: false, terminating: false } as const;

/**
 * core/v1 Service. Headless (clusterIP None) and ExternalName services, and
 * those labelled as another proxy's or as headless (kubernetes.ts
 * `notOursReason`), are valid but get no proxied ports. Single-stack and
 * dual-stack Services of either primary family are read: `clusterIP` is the
 * IPv4 one (of `spec.clusterIPs`, or `spec.clusterIP`), `clusterIPs` all
 * of them, primary first. The other frontends (externalIPs, LoadBalancer
 * ingress IPs with their source ranges, the health-check NodePort) are
 * read and kept; an external or LoadBalancer IP of a family the Service
 * has no ClusterIP of is warned about (no proxier of that family serves
 * the Service, as in kube-proxy).
 */
function parseK8sService(head: Head, raw: Record<string, unknown>, schemasOnly: boolean): ParseResult {
  let data = schemasOnly ? undefined : readCommonService(raw);
  if (data === undefined) {
    const r = parseWith(k8sServiceSchema, raw);
    if (!r.ok) return error(head, r.field, r.detail);
    data = r.data;
  }
  const { metadata, spec } = data;
  const warnings: ManifestError[] = [];
  const unproxiedReason =
    notOursReason(metadata.labels) ??
    (spec.type === 'ExternalName' ? 'type ExternalName (DNS only, not proxied)'
    : spec.clusterIP === 'None' ? 'headless (clusterIP: None, not proxied)'
    : spec.clusterIP === '' ? 'without a ClusterIP (not yet allocated by the API server; kube-proxy skips it too)'
    : undefined);
  const dnsOnly = dnsOnlyOf(head, raw, spec, warnings);
  const ports: ParsedServicePort[] = unproxiedReason
    ? []
    : spec.ports.map((p, index) => ({
        index,
        name: p.name,
        port: p.port,
        protocol: p.protocol,
        // The API server sets a nodePort only on NodePort and LoadBalancer Services; one elsewhere is ignored.
        ...(p.nodePort !== undefined && (spec.type === 'NodePort' || spec.type === 'LoadBalancer') ? { nodePort: p.nodePort } : {}),
        targetPort: p.targetPort ?? p.port,
      }));
  const clusterIPs = unproxiedReason ? NONE : familyIPs(spec.clusterIPs.length > 0 ? spec.clusterIPs : [spec.clusterIP]);
  const externalIPs = familyIPs(spec.externalIPs);
  const ingress = loadBalancerIngress(data.status?.loadBalancer?.ingress ?? []);
  if (clusterIPs.length > 0) wrongFamilyFrontends(head, clusterIPs, spec.externalIPs, ingress, warnings);
  const svc: ParsedService = withBase(head, 'kubernetes', metadata.namespace, metadata.name, {
    kind: 'Service',
    type: spec.type,
    clusterIP: clusterIPs.find((c) => c.family === 'IPv4')?.ip,
    clusterIPs,
    ports,
    ...(unproxiedReason && spec.ports.length > 0 ? { unproxiedReason } : {}),
    ...(dnsOnly !== undefined ? { dnsOnly } : {}),
    externalIPs,
    loadBalancerIngress: ingress,
    loadBalancerSourceRanges: sourceRanges(head, spec.loadBalancerSourceRanges, warnings),
    ...(spec.healthCheckNodePort !== undefined ? { healthCheckNodePort: spec.healthCheckNodePort } : {}),
    sessionAffinity:
      spec.sessionAffinity === 'ClientIP'
        ? { timeoutSeconds: spec.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? 10800 }
        : null,
    internalTrafficPolicy: spec.internalTrafficPolicy,
    externalTrafficPolicy: spec.externalTrafficPolicy,
    selector: spec.selector,
    publishNotReadyAddresses: spec.publishNotReadyAddresses,
    ...createdAt(head, raw, 'creationTimestamp', warnings),
  });
  return ok(svc, warnings);
}

/**
 * What DNS alone serves of a Service (parsed.ts ParsedDnsOnly): for type
 * ExternalName its `spec.externalName` (read from `raw`, dns-names.ts
 * readExternalName; a bad one is a warning naming the field, and the
 * Service gets no DNS name), for a headless Service (`clusterIP: None`)
 * its ports; undefined for any other Service. Kubernetes DNS specification
 * schema 1.1.0 §2.4, §2.5.
 */
function dnsOnlyOf(
  head: Head,
  raw: Record<string, unknown>,
  spec: { type: string; clusterIP: string; ports: ReadonlyArray<{ name: string; port: number; protocol: ParsedServicePort['protocol']; targetPort?: number | string | undefined }> },
  warnings: ManifestError[],
): ParsedDnsOnly | undefined {
  if (spec.type === 'ExternalName') {
    const r = readExternalName(isRecord(raw.spec) ? raw.spec.externalName : undefined);
    if ('name' in r) return { kind: 'externalName', externalName: r.name };
    warnings.push(manifestError(head, 'spec.externalName', `${r.problem}; the Service gets no DNS name`));
    return undefined;
  }
  if (spec.clusterIP !== 'None') return undefined;
  return { kind: 'headless', ports: spec.ports.map((p, index) => ({ index, name: p.name, port: p.port, protocol: p.protocol, targetPort: p.targetPort ?? p.port })) };
}

/**
 * `{ createdAt }` from `metadata[field]` of `raw` (created.ts
 * readCreationTime), `{}` when there is none; a value that is not a time
 * is warned about, naming the field, and counts as none: the Service is
 * served, and yields a frontend it shares to every Service with a time.
 */
function createdAt(head: Head, raw: unknown, field: 'creationTimestamp' | 'created_at', warnings: ManifestError[]): { createdAt?: number } {
  const metadata = isRecord(raw) && isRecord(raw.metadata) ? raw.metadata : undefined;
  if (metadata === undefined || !(field in metadata)) return {};
  const t = readCreationTime(metadata[field]);
  if ('problem' in t) {
    warnings.push(manifestError(head, `metadata.${field}`, `${t.problem}; the Service counts as created after every Service with a creation time`));
    return {};
  }
  return t.ms === undefined ? {} : { createdAt: t.ms };
}

/**
 * Warn about each external IP and LoadBalancer ingress IP of a family that
 * none of `clusterIPs` has: no proxier of that family serves the Service,
 * so the address is not programmed (kube-proxy's service change tracker
 * logs "the following external IPs ... don't match IP Family",
 * pkg/proxy/service.go).
 */
function wrongFamilyFrontends(
  head: Head,
  clusterIPs: readonly FamilyIP[],
  externalIPs: readonly string[],
  ingress: readonly LoadBalancerIngress[],
  warnings: ManifestError[],
): void {
  const has = (family: IPFamily) => clusterIPs.some((c) => c.family === family);
  externalIPs.forEach((ip, i) => {
    const family = ipFamilyOf(ip);
    if (!has(family)) warnings.push(manifestError(head, `spec.externalIPs[${i}]`, `"${ip}" is ${family} and the Service has no ${family} ClusterIP; address ignored`));
  });
  for (const e of ingress) {
    if (!has(e.family)) warnings.push(manifestError(head, 'status.loadBalancer.ingress', `"${e.ip}" is ${e.family} and the Service has no ${e.family} ClusterIP; address ignored`));
  }
}

/**
 * `spec.loadBalancerSourceRanges` as kube-proxy reads them
 * (pkg/proxy/service.go newBaseServiceInfo): each trimmed of whitespace
 * (the API's validation lets padding through), a malformed one named in a
 * warning and skipped, duplicates dropped.
 */
function sourceRanges(head: Head, ranges: readonly string[], warnings: ManifestError[]): readonly string[] {
  if (ranges.length === 0) return NONE;
  const out = new Set<string>();
  ranges.forEach((raw, i) => {
    const range = raw.trim();
    const problem = checkSourceRange(range);
    if (problem === undefined) out.add(range);
    else warnings.push(manifestError(head, `spec.loadBalancerSourceRanges[${i}]`, `${problem}; range ignored`));
  });
  return [...out];
}

/** The ingress entries that have an IP, the first of each IP kept; hostname-only entries are not proxied. */
function loadBalancerIngress(entries: ReadonlyArray<{ ip?: string | undefined; ipMode: 'VIP' | 'Proxy' }>): readonly LoadBalancerIngress[] {
  if (entries.length === 0) return NONE;
  const seen = new Set<string>();
  const out: LoadBalancerIngress[] = [];
  for (const e of entries) {
    if (e.ip === undefined || seen.has(e.ip)) continue;
    seen.add(e.ip);
    out.push({ family: ipFamilyOf(e.ip), ip: e.ip, ipMode: e.ipMode });
  }
  return out;
}

/**
 * Shepherd Service. Each `status.endpoints` entry is matched to the service
 * ports whose target_port equals its port (one group per service port); an
 * entry that is not a valid "ip:port" or matches none is dropped with a
 * warning, and an address with leading zeros is read as decimal with one.
 */
function parseShepherdService(head: Head, raw: unknown): ParseResult {
  const r = parseWith(shepherdServiceSchema, raw);
  if (!r.ok) return error(head, r.field, r.detail);
  const { metadata, spec, status } = r.data;
  const ports = spec.ports.map((p, index) => ({
    index,
    name: p.name,
    port: p.port,
    protocol: p.protocol,
    targetPort: p.target_port ?? p.port,
    nodePort: p.node_port ?? undefined,
  }));
  // Endpoint addresses by port, so that matching stays linear.
  const targetPorts = new Set(ports.map((p) => p.targetPort));
  const byPort = new Map<number, EndpointAddress[]>();
  const warnings: ManifestError[] = [];
  status.endpoints.forEach((entry, i) => {
    const field = formatPath(['status', 'endpoints', i]);
    const e = parseIPv4HostPort(entry, { endpoint: true });
    if ('problem' in e) {
      warnings.push(manifestError(head, field, `${e.problem}; entry ignored`));
      return;
    }
    if (e.note !== undefined) warnings.push(manifestError(head, field, e.note));
    if (!targetPorts.has(e.port)) {
      warnings.push(manifestError(head, field, `"${e.ip}:${e.port}" matches no target_port of the service; entry ignored`));
      return;
    }
    const list = byPort.get(e.port);
    if (list) list.push(address(e.ip, READY));
    else byPort.set(e.port, [address(e.ip, READY)]);
  });
  const inlineEndpoints: EndpointGroup[] = ports.map((p) => ({
    ports: [{ name: p.name, port: p.targetPort, protocol: p.protocol }],
    addresses: byPort.get(p.targetPort) ?? [],
  }));
  const svc: ParsedService = withBase(head, 'shepherd', metadata.namespace, metadata.name, {
    kind: 'Service',
    type: spec.type,
    clusterIP: status.cluster_ip === '' ? undefined : status.cluster_ip,
    clusterIPs: status.cluster_ip === '' ? [] : familyIPs([status.cluster_ip]),
    externalIPs: [],
    loadBalancerIngress: [],
    loadBalancerSourceRanges: [],
    ports: ports.map((p) => ({
      index: p.index,
      name: p.name,
      port: p.port,
      protocol: p.protocol,
      ...(p.nodePort !== undefined ? { nodePort: p.nodePort } : {}),
      targetPort: p.targetPort,
    })),
    sessionAffinity: null,
    internalTrafficPolicy: 'Cluster',
    externalTrafficPolicy: 'Cluster',
    inlineEndpoints,
    selector: spec.selector,
    publishNotReadyAddresses: false,
    ...createdAt(head, raw, 'created_at', warnings),
  });
  return ok(svc, warnings);
}

/**
 * discovery.k8s.io/v1 EndpointSlice of addressType IPv4 or IPv6 (the
 * metaproxier hands each to the proxier of its family,
 * pkg/proxy/metaproxier). Slices of addressType FQDN and slices without
 * the kubernetes.io/service-name label are ignored, as kube-proxy does
 * (pkg/proxy/endpointslicecache.go). A port without a number is dropped
 * with a warning (kube-proxy: "Ignoring invalid endpoint port"). Each
 * endpoint contributes its first address, as in kube-proxy; an endpoint
 * whose first address is not a usable address of the slice's family is
 * dropped with a warning, and a bad later address is warned about (see
 * {@link readEndpointIP}).
 */
function parseEndpointSlice(head: Head, raw: Record<string, unknown>, schemasOnly: boolean): ParseResult {
  // Whether drover reads it at all: its addressType (IPv4 or IPv6) and service-name label, whatever the shape of the rest.
  const addressType = raw.addressType;
  if (typeof addressType !== 'string') {
    return error(head, 'addressType', addressType === undefined || addressType === null ? 'required' : 'expected a string');
  }
  if (addressType !== 'IPv4' && addressType !== 'IPv6') {
    return ignored(`addressType ${displayName(addressType)}: only IPv4 and IPv6 EndpointSlices are supported`);
  }
  const labels = isRecord(raw.metadata) && isRecord(raw.metadata.labels) ? raw.metadata.labels : undefined;
  const label = labels?.[SERVICE_NAME_LABEL];
  if (label === undefined || label === null || label === '') {
    return ignored(`no ${SERVICE_NAME_LABEL} label: not tied to a Service (kube-proxy ignores it too)`);
  }
  let data = schemasOnly ? undefined : readCommonSlice(raw);
  if (data === undefined) {
    const r = parseWith(k8sEndpointSliceSchema, raw);
    if (!r.ok) return error(head, r.field, r.detail);
    data = r.data;
  }
  const { metadata, endpoints, ports } = data;
  const warnings: ManifestError[] = [];
  const groupPorts: EndpointGroupPort[] = [];
  ports.forEach((p, i) => {
    if (p.port === undefined) {
      warnings.push(manifestError(head, formatPath(['ports', i, 'port']), 'absent ("all ports" is not supported by kube-proxy); port ignored'));
    } else {
      groupPorts.push({ name: p.name, port: p.port, protocol: p.protocol });
    }
  });
  const addresses: EndpointAddress[] = [];
  const rawEndpoints = Array.isArray(raw.endpoints) ? (raw.endpoints as unknown[]) : [];
  let hostnames: Map<string, string> | undefined;
  const path: Array<string | number> = ['endpoints', 0, 'addresses', 0]; // reused: one list for every address
  for (let i = 0; i < endpoints.length; i++) {
    const e = endpoints[i]!;
    path[1] = i;
    let first: string | undefined;
    for (let j = 0; j < e.addresses.length; j++) {
      path[3] = j;
      const ip = readEndpointIP(head, path, e.addresses[j]!, addressType, j === 0 ? 'endpoint ignored' : 'address ignored', warnings);
      if (j === 0) first = ip;
    }
    if (first === undefined) continue;
    addresses.push(address(first, e.conditions, e.nodeName, e.zone, e.hints));
    const hostname = endpointHostname(head, rawEndpoints[i], ['endpoints', i, 'hostname'], warnings);
    if (hostname !== undefined) (hostnames ??= new Map()).set(first, hostname);
  }
  const slice: ParsedEndpointSlice = withBase(head, 'kubernetes', metadata.namespace, metadata.name, {
    kind: 'EndpointSlice',
    serviceName: metadata.labels[SERVICE_NAME_LABEL],
    groups: [hostnames !== undefined ? { ports: groupPorts, addresses, hostnames } : { ports: groupPorts, addresses }],
  });
  return ok(slice, warnings);
}

/**
 * The `hostname` of the raw endpoint, endpoint address or Pod spec `raw`
 * (only DNS names endpoints by it, dns-names.ts readHostname), or undefined
 * when it has none; a bad one is a warning naming the field at `path`, and
 * the endpoint is then named by its address.
 */
function endpointHostname(head: Head, raw: unknown, path: ReadonlyArray<string | number>, warnings: ManifestError[]): string | undefined {
  if (!isRecord(raw) || !('hostname' in raw)) return undefined;
  const r = readHostname(raw.hostname);
  if ('problem' in r) {
    warnings.push(manifestError(head, formatPath(path), `${r.problem}; hostname ignored (DNS names the endpoint by its address)`));
    return undefined;
  }
  return r.hostname;
}

/**
 * Legacy core/v1 Endpoints: `addresses` are ready and serving,
 * `notReadyAddresses` neither. An `ip` may be of either family (a
 * dual-stack Service's Endpoints list both); one that is not a usable
 * address is dropped with a warning (see {@link readEndpointIP}).
 */
function parseEndpoints(head: Head, raw: unknown): ParseResult {
  const r = parseWith(k8sEndpointsSchema, raw);
  if (!r.ok) return error(head, r.field, r.detail);
  const { metadata, subsets } = r.data;
  const warnings: ManifestError[] = [];
  const rawSubsets = isRecord(raw) && Array.isArray(raw.subsets) ? (raw.subsets as unknown[]) : [];
  const read = (i: number, key: 'addresses' | 'notReadyAddresses', c: typeof READY | typeof NOT_READY, hostnames: Map<string, string>) =>
    subsets[i]![key].flatMap((a, j) => {
      const ip = readEndpointIP(head, ['subsets', i, key, j, 'ip'], a.ip, a.ip.includes(':') ? 'IPv6' : 'IPv4', 'endpoint ignored', warnings);
      if (ip === undefined) return [];
      const list = isRecord(rawSubsets[i]) ? rawSubsets[i][key] : undefined;
      const hostname = endpointHostname(head, Array.isArray(list) ? list[j] : undefined, ['subsets', i, key, j, 'hostname'], warnings);
      if (hostname !== undefined) hostnames.set(ip, hostname);
      return [address(ip, c, a.nodeName)];
    });
  const eps: ParsedEndpoints = withBase(head, 'kubernetes', metadata.namespace, metadata.name, {
    kind: 'Endpoints',
    serviceName: metadata.name,
    groups: subsets.map((s, i) => {
      const hostnames = new Map<string, string>();
      const ports = s.ports.map((p) => ({ name: p.name, port: p.port, protocol: p.protocol }));
      const addresses = [...read(i, 'addresses', READY, hostnames), ...read(i, 'notReadyAddresses', NOT_READY, hostnames)];
      return hostnames.size > 0 ? { ports, addresses, hostnames } : { ports, addresses };
    }),
  });
  return ok(eps, warnings);
}

/**
 * v1 Node: its name, the `topology.kubernetes.io/zone` label,
 * `status.addresses`, `spec.podCIDRs`, and whether it is leaving (`metadata.deletionTimestamp`
 * set, or the ToBeDeletedByClusterAutoscaler taint in `spec.taints`). A Node is cluster-scoped: errors name it by its name
 * alone and its identity is "Node//name". Which Node is this node is
 * normalise.ts's decision.
 */
function parseNode(head: Head, raw: unknown): ParseResult {
  const r = parseWith(k8sNodeSchema, raw);
  if (!r.ok) return error(head, r.field, r.detail);
  const { metadata, spec, status } = r.data;
  const zone = metadata.labels?.[TOPOLOGY_ZONE_LABEL];
  const leaving =
    metadata.deletionTimestamp !== undefined
      ? 'it is being deleted (metadata.deletionTimestamp is set)'
      : spec?.taints.some((t) => t.key === TO_BE_DELETED_TAINT)
        ? `it has the ${TO_BE_DELETED_TAINT} taint`
        : undefined;
  const node: ParsedNode = withBase(head, 'kubernetes', '', metadata.name, {
    kind: 'Node',
    ...(zone !== undefined && zone !== '' ? { zone } : {}),
    ...(leaving !== undefined ? { leaving } : {}),
    addresses: (status?.addresses ?? []).map((a) => ({ type: a.type, address: a.address })),
    podCIDRs: spec?.podCIDRs ?? [],
  });
  return ok(node);
}

/**
 * The IPv4 and IPv6 addresses of a Pod from its IP strings, each with its
 * field: the first of each family, read as an endpoint address
 * (validate.ts `parseEndpointIP`, ParseIPSloppy as the EndpointSlice
 * controller's getEndpointAddresses). A family without one gives
 * undefined. A bad first IPv4 address is returned as the problem (the Pod
 * is then invalid, as before IPv6 was read); a bad first IPv6 address is
 * warned about and left out, so that it never costs the Pod its IPv4
 * endpoint. A non-canonical address is read with a warning pushed onto
 * `warnings`.
 */
function podIPs(
  head: Head,
  ips: ReadonlyArray<readonly [string, string]>,
  warnings: ManifestError[],
): { ip: string | undefined; ipv6: string | undefined } | { field: string; problem: string } {
  let ip: string | undefined;
  let ipv6: string | undefined;
  let seen4 = false;
  let seen6 = false;
  for (const [field, value] of ips) {
    const v6 = isIPv6(value);
    if (v6 ? seen6 : seen4) continue;
    if (v6) seen6 = true;
    else seen4 = true;
    const r = parseEndpointIP(value, v6 ? 'IPv6' : 'IPv4');
    if ('problem' in r) {
      if (!v6) return { field, problem: `${r.problem}; Pod skipped` };
      warnings.push(manifestError(head, field, `${r.problem}; address ignored`));
      continue;
    }
    if (r.note !== undefined) warnings.push(manifestError(head, field, r.note));
    if (v6) ipv6 = r.ip;
    else ip = r.ip;
  }
  return { ip, ipv6 };
}

/** Phases after which a Pod is never an endpoint (podutil IsPodTerminal). */
const TERMINAL_PHASES: ReadonlySet<string> = new Set(['Succeeded', 'Failed']);

/** A Pod object from its parts; `ips` as for {@link podIPs}. */
function pod(
  head: Head,
  source: 'kubernetes' | 'shepherd',
  meta: { namespace: string; name: string; labels: ReadonlyMap<string, string> },
  facts: { ips: ReadonlyArray<readonly [string, string]>; phase: string | undefined; ready: boolean; terminating: boolean; nodeName: string | undefined; ports: ContainerPort[] },
  dnsName: { hostname?: string; subdomain?: string } = {},
  warnings: ManifestError[] = [],
): ParseResult {
  const ip = podIPs(head, facts.ips, warnings);
  if ('problem' in ip) return error(head, ip.field, ip.problem);
  const parsed: ParsedPod = withBase(head, source, meta.namespace, meta.name, {
    kind: 'Pod',
    labels: meta.labels,
    ip: ip.ip,
    ...(ip.ipv6 !== undefined ? { ipv6: ip.ipv6 } : {}),
    terminal: facts.phase !== undefined && TERMINAL_PHASES.has(facts.phase),
    ready: facts.ready,
    terminating: facts.terminating,
    ...(facts.nodeName !== undefined ? { nodeName: facts.nodeName } : {}),
    ports: facts.ports,
    ...dnsName,
  });
  return ok(parsed, warnings);
}

/**
 * core/v1 Pod: ready when its `Ready` condition's status is "True"
 * (podutil IsPodReady), terminating when `deletionTimestamp` is set; its
 * IPs are `status.podIPs[].ip`, or `status.podIP` when that list is empty.
 * `spec.hostname` and `spec.subdomain`, which only DNS reads, are read from
 * `raw` as DNS-1123 labels (a bad one is a warning, and left out).
 */
function parseK8sPod(head: Head, raw: unknown): ParseResult {
  const r = parseWith(k8sPodSchema, raw);
  if (!r.ok) return error(head, r.field, r.detail);
  const { metadata, spec, status } = r.data;
  const podIPs = status?.podIPs ?? [];
  const ips: Array<readonly [string, string]> =
    podIPs.length > 0
      ? podIPs.map((p, i) => [formatPath(['status', 'podIPs', i, 'ip']), p.ip] as const)
      : status?.podIP !== undefined && status.podIP !== ''
        ? [['status.podIP', status.podIP] as const]
        : [];
  const containers = [...(spec?.containers ?? []), ...(spec?.initContainers ?? []).filter((c) => c.restartPolicy === 'Always')];
  const warnings: ManifestError[] = [];
  const rawSpec = isRecord(raw) && isRecord(raw.spec) ? raw.spec : undefined;
  const hostname = endpointHostname(head, rawSpec, ['spec', 'hostname'], warnings);
  const subdomain = rawSpec !== undefined && 'subdomain' in rawSpec ? endpointHostname(head, { hostname: rawSpec.subdomain }, ['spec', 'subdomain'], warnings) : undefined;
  return pod(
    head,
    'kubernetes',
    metadata,
    {
      ips,
      phase: status?.phase,
      ready: (status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True'),
      terminating: metadata.deletionTimestamp !== undefined,
      nodeName: spec?.nodeName,
      ports: containers.flatMap((c) => c.ports.map((p) => ({ name: p.name, port: p.containerPort, protocol: p.protocol }))),
    },
    { ...(hostname !== undefined ? { hostname } : {}), ...(subdomain !== undefined ? { subdomain } : {}) },
    warnings,
  );
}

/**
 * Shepherd Pod: ready when its phase is Running, as Shepherd's
 * ServiceController decides; never terminating (Shepherd has no graceful
 * deletion); its IP is `status.pod_ip`.
 */
function parseShepherdPod(head: Head, raw: unknown): ParseResult {
  const r = parseWith(shepherdPodSchema, raw);
  if (!r.ok) return error(head, r.field, r.detail);
  const { metadata, spec, status } = r.data;
  const ip = status?.pod_ip;
  return pod(head, 'shepherd', metadata, {
    ips: ip !== undefined && ip !== '' ? [['status.pod_ip', ip] as const] : [],
    phase: status?.phase,
    ready: status?.phase === 'Running',
    terminating: false,
    nodeName: spec?.node_name,
    ports: (spec?.containers ?? []).flatMap((c) => c.ports.map((p) => ({ name: p.name, port: p.container_port, protocol: p.protocol }))),
  });
}
