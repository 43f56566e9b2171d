/**
 * The common shape of a core/v1 Service, read without zod: what
 * fast-slice.ts is for EndpointSlices. Running kubernetes.ts
 * `k8sServiceSchema` costs tens of microseconds per Service, most of it in
 * zod itself.
 *
 * {@link readCommonService} gives exactly what `k8sServiceSchema` would
 * give (the same values, the same keys present), or undefined when the
 * Service is not of the common shape or not valid; the caller then runs
 * the schema, so every error message is the schema's own. It never accepts
 * a Service the schema refuses: every value it lets through passes the very
 * checks (validate.ts, and the schema's refinements kubernetes.ts
 * `refineClusterIPs` and schema.ts `refineServicePorts`) the schema runs.
 *
 * The common shape is every field the schema reads, each absent, null, or
 * of the type the API gives it: strings, numbers that are integers,
 * booleans, lists, objects; `spec.selector` an ordinary object of strings.
 * A value of another type, out of range or refused by a check (a port
 * 70000, a `protocol: tcp`, a selector value with a space...) leaves the
 * Service to the schema.
 */
import type { K8sService } from './kubernetes.ts';
import {
  checkClusterIP,
  checkClusterIPsEntry,
  HEADLESS_LABEL,
  IP_FAMILIES,
  IP_MODES,
  refineClusterIPs,
  SERVICE_PROXY_NAME_LABEL,
  SERVICE_TYPES,
  SESSION_AFFINITIES,
  TRAFFIC_POLICIES,
} from './kubernetes.ts';
import { isRecord, passesRefinement, refineServicePorts } from './schema.ts';
import type { Protocol } from './types.ts';
import { checkDNSLabel, checkIntRange, checkLabelKey, checkLabelValue, checkPort, checkPortName, checkServiceIP, PROTOCOLS } from './validate.ts';

type Spec = K8sService['spec'];
type ServicePort = Spec['ports'][number];

/** Marks a value the common shape does not cover (the schema decides then). */
const UNUSUAL = Symbol('unusual');
type Unusual = typeof UNUSUAL;

/** Absent (undefined) or null. */
function isNone(v: unknown): v is null | undefined {
  return v === undefined || v === null;
}

/**
 * `raw` read as `k8sServiceSchema` reads it, when it is a Service of the
 * common shape (see the module comment) that the schema accepts; undefined
 * otherwise. Never throws.
 */
export function readCommonService(raw: Record<string, unknown>): K8sService | undefined {
  const metadata = readMetadata(raw.metadata);
  if (metadata === UNUSUAL) return undefined;
  const spec = readSpec(raw.spec);
  if (spec === UNUSUAL) return undefined;
  const out: { metadata: K8sService['metadata']; spec: Spec; status?: K8sService['status'] } = { metadata, spec };
  if ('status' in raw) {
    const status = readStatus(raw.status);
    if (status === UNUSUAL) return undefined;
    out.status = status;
  }
  return out as K8sService; // zod's output type marks optional keys as required
}

// ---------------------------------------------------------------- metadata

function readMetadata(m: unknown): K8sService['metadata'] | Unusual {
  if (!isRecord(m)) return UNUSUAL;
  const { name, namespace } = m;
  if (typeof name !== 'string' || checkDNSLabel(name) !== undefined) return UNUSUAL;
  let ns: string;
  if (isNone(namespace) || namespace === '') ns = 'default';
  else if (typeof namespace === 'string' && checkDNSLabel(namespace) === undefined) ns = namespace;
  else return UNUSUAL;
  const out: { name: string; namespace: string; labels?: K8sService['metadata']['labels'] } = { name, namespace: ns };
  if ('labels' in m) out.labels = readLabels(m.labels);
  return out as K8sService['metadata'];
}

/** `metadata.labels`, of which only the two of kubernetes.ts `notOursReason` are kept: any value is read (the schema's `.catch`). */
function readLabels(labels: unknown): K8sService['metadata']['labels'] {
  if (labels === null) return null;
  if (!isRecord(labels)) return undefined;
  const out: Record<string, unknown> = {};
  if (SERVICE_PROXY_NAME_LABEL in labels) out[SERVICE_PROXY_NAME_LABEL] = labels[SERVICE_PROXY_NAME_LABEL];
  if (HEADLESS_LABEL in labels) out[HEADLESS_LABEL] = labels[HEADLESS_LABEL];
  return out as K8sService['metadata']['labels'];
}

// ---------------------------------------------------------------- spec

function readSpec(s: unknown): Spec | Unusual {
  if (!isRecord(s)) return UNUSUAL;
  const type = oneOf(s.type, SERVICE_TYPES, 'ClusterIP');
  const clusterIP = checkedString(s.clusterIP, checkClusterIP, '');
  const clusterIPs = stringList(s.clusterIPs, (ip) => checkClusterIPsEntry(ip) === undefined, 2);
  const ipFamilies = stringList(s.ipFamilies, (f) => (IP_FAMILIES as readonly string[]).includes(f), 2);
  const externalIPs = stringList(s.externalIPs, (ip) => checkServiceIP(ip) === undefined, Infinity);
  const loadBalancerSourceRanges = stringList(s.loadBalancerSourceRanges, () => true, Infinity);
  const ports = readPorts(s.ports);
  const sessionAffinity = oneOf(s.sessionAffinity, SESSION_AFFINITIES, 'None');
  const internalTrafficPolicy = oneOf(s.internalTrafficPolicy, TRAFFIC_POLICIES, 'Cluster');
  const externalTrafficPolicy = oneOf(s.externalTrafficPolicy, TRAFFIC_POLICIES, 'Cluster');
  const selector = readLabelMap(s.selector);
  const publishNotReadyAddresses = isNone(s.publishNotReadyAddresses) ? false : typeof s.publishNotReadyAddresses === 'boolean' ? s.publishNotReadyAddresses : UNUSUAL;
  if (
    type === UNUSUAL ||
    clusterIP === UNUSUAL ||
    clusterIPs === UNUSUAL ||
    ipFamilies === UNUSUAL ||
    externalIPs === UNUSUAL ||
    loadBalancerSourceRanges === UNUSUAL ||
    ports === UNUSUAL ||
    sessionAffinity === UNUSUAL ||
    internalTrafficPolicy === UNUSUAL ||
    externalTrafficPolicy === UNUSUAL ||
    selector === UNUSUAL ||
    publishNotReadyAddresses === UNUSUAL
  ) {
    return UNUSUAL;
  }
  const spec: Record<string, unknown> = { type, clusterIP, clusterIPs, ipFamilies, externalIPs, loadBalancerSourceRanges };
  if ('healthCheckNodePort' in s) {
    const port = optionalInt(s.healthCheckNodePort, checkPort);
    if (port === UNUSUAL) return UNUSUAL;
    spec.healthCheckNodePort = port;
  }
  spec.ports = ports;
  spec.sessionAffinity = sessionAffinity;
  if ('sessionAffinityConfig' in s) {
    const config = readAffinityConfig(s.sessionAffinityConfig);
    if (config === UNUSUAL) return UNUSUAL;
    spec.sessionAffinityConfig = config;
  }
  spec.internalTrafficPolicy = internalTrafficPolicy;
  spec.externalTrafficPolicy = externalTrafficPolicy;
  spec.selector = selector;
  spec.publishNotReadyAddresses = publishNotReadyAddresses;
  const out = spec as Spec;
  return passesRefinement(refineClusterIPs, out) ? out : UNUSUAL;
}

/** `spec.ports`, each valid, and obeying the port-set rules; UNUSUAL otherwise. */
function readPorts(list: unknown): ServicePort[] | Unusual {
  if (isNone(list)) return [];
  if (!Array.isArray(list)) return UNUSUAL;
  const out: ServicePort[] = new Array(list.length);
  for (let i = 0; i < list.length; i++) {
    const p: unknown = list[i];
    if (!isRecord(p)) return UNUSUAL;
    const name = isNone(p.name) || p.name === '' ? '' : checkedString(p.name, checkDNSLabel, '');
    const protocol = oneOf(p.protocol, PROTOCOLS, 'TCP');
    const port = p.port;
    if (name === UNUSUAL || protocol === UNUSUAL || typeof port !== 'number' || !Number.isInteger(port) || checkPort(port) !== undefined) return UNUSUAL;
    const sp: { name: string; protocol: Protocol; port: number; targetPort?: number | string | undefined; nodePort?: number | undefined } = { name, protocol, port };
    if ('targetPort' in p) {
      const t = p.targetPort;
      if (isNone(t)) sp.targetPort = undefined;
      else if (typeof t === 'number' && Number.isInteger(t) && checkPort(t) === undefined) sp.targetPort = t;
      else if (typeof t === 'string' && checkPortName(t) === undefined) sp.targetPort = t;
      else return UNUSUAL;
    }
    if ('nodePort' in p) {
      const n = optionalInt(p.nodePort, checkPort);
      if (n === UNUSUAL) return UNUSUAL;
      sp.nodePort = n;
    }
    out[i] = sp as ServicePort;
  }
  return passesRefinement(refineServicePorts, out) ? out : UNUSUAL;
}

/** `spec.sessionAffinityConfig`: `clientIP.timeoutSeconds` 1-86400, 10800 when absent. */
function readAffinityConfig(c: unknown): Spec['sessionAffinityConfig'] | Unusual {
  if (isNone(c)) return undefined;
  if (!isRecord(c)) return UNUSUAL;
  const out: { clientIP?: { timeoutSeconds: number } | undefined } = {};
  if ('clientIP' in c) {
    const clientIP = c.clientIP;
    if (isNone(clientIP)) out.clientIP = undefined;
    else if (!isRecord(clientIP)) return UNUSUAL;
    else {
      const t = clientIP.timeoutSeconds;
      if (isNone(t)) out.clientIP = { timeoutSeconds: 10800 };
      else if (typeof t === 'number' && Number.isInteger(t) && checkIntRange(t, 1, 86400) === undefined) out.clientIP = { timeoutSeconds: t };
      else return UNUSUAL;
    }
  }
  return out as Spec['sessionAffinityConfig'];
}

/**
 * A label map (schema.ts `labelMapSchema`) of an ordinary object whose
 * keys and values pass `checkLabelKey` and `checkLabelValue`, as a Map in
 * the object's order; an empty Map for none. UNUSUAL for anything else,
 * including a key "__proto__" (which the schema skips) and an object with
 * a prototype of its own or a `constructor` (which the schema judges by).
 */
function readLabelMap(m: unknown): ReadonlyMap<string, string> | Unusual {
  if (isNone(m)) return new Map();
  if (!isRecord(m)) return UNUSUAL;
  const proto: unknown = Object.getPrototypeOf(m);
  if ((proto !== Object.prototype && proto !== null) || Object.prototype.hasOwnProperty.call(m, 'constructor')) return UNUSUAL;
  if (Object.getOwnPropertySymbols(m).length > 0) return UNUSUAL;
  const entries = Object.entries(m);
  for (const [key, value] of entries) {
    if (key === '__proto__' || checkLabelKey(key) !== undefined) return UNUSUAL;
    if (typeof value !== 'string' || checkLabelValue(value) !== undefined) return UNUSUAL;
  }
  return new Map(entries as Array<[string, string]>);
}

// ---------------------------------------------------------------- status

function readStatus(s: unknown): K8sService['status'] | Unusual {
  if (isNone(s)) return undefined;
  if (!isRecord(s)) return UNUSUAL;
  const out: { loadBalancer?: { ingress: unknown[] } | undefined } = {};
  if ('loadBalancer' in s) {
    const lb = s.loadBalancer;
    if (isNone(lb)) out.loadBalancer = undefined;
    else if (!isRecord(lb)) return UNUSUAL;
    else {
      const ingress = readIngress(lb.ingress);
      if (ingress === UNUSUAL) return UNUSUAL;
      out.loadBalancer = { ingress };
    }
  }
  return out as K8sService['status'];
}

/** `status.loadBalancer.ingress`: entries with an IP (either family) and/or a hostname, and an ipMode (VIP when absent). */
function readIngress(list: unknown): unknown[] | Unusual {
  if (isNone(list)) return [];
  if (!Array.isArray(list)) return UNUSUAL;
  const out: unknown[] = new Array(list.length);
  for (let i = 0; i < list.length; i++) {
    const e: unknown = list[i];
    if (!isRecord(e)) return UNUSUAL;
    // Keys in the schema's order: ip, hostname, ipMode (set last, below).
    const entry: { ip?: string | undefined; hostname?: string | undefined; ipMode?: string } = {};
    if ('ip' in e) {
      const ip = checkedString(e.ip, checkServiceIP, undefined);
      if (ip === UNUSUAL) return UNUSUAL;
      entry.ip = ip;
    }
    if ('hostname' in e) {
      const h = e.hostname;
      if (isNone(h)) entry.hostname = undefined;
      else if (typeof h === 'string') entry.hostname = h;
      else return UNUSUAL;
    }
    const ipMode = oneOf(e.ipMode, IP_MODES, 'VIP');
    if (ipMode === UNUSUAL) return UNUSUAL;
    entry.ipMode = ipMode;
    out[i] = entry;
  }
  return out;
}

// ---------------------------------------------------------------- values

/** `v` when it is one of `values`, `fallback` when absent or null. */
function oneOf<T extends string>(v: unknown, values: readonly T[], fallback: T): T | Unusual {
  if (isNone(v)) return fallback;
  return typeof v === 'string' && (values as readonly string[]).includes(v) ? (v as T) : UNUSUAL;
}

/** `v` when it is a string that passes `check`, `fallback` when absent or null. */
function checkedString<F>(v: unknown, check: (s: string) => string | undefined, fallback: F): string | F | Unusual {
  if (isNone(v)) return fallback;
  return typeof v === 'string' && check(v) === undefined ? v : UNUSUAL;
}

/** `v` when it is an integer that passes `check`, undefined when absent or null. */
function optionalInt(v: unknown, check: (n: number) => string | undefined): number | undefined | Unusual {
  if (isNone(v)) return undefined;
  return typeof v === 'number' && Number.isInteger(v) && check(v) === undefined ? v : UNUSUAL;
}

/** A list of at most `max` strings, each `valid`; empty when absent or null. */
function stringList(v: unknown, valid: (s: string) => boolean, max: number): string[] | Unusual {
  if (isNone(v)) return [];
  if (!Array.isArray(v) || v.length > max) return UNUSUAL;
  for (let i = 0; i < v.length; i++) {
    const s: unknown = v[i];
    if (typeof s !== 'string' || !valid(s)) return UNUSUAL;
  }
  return v.slice() as string[];
}
