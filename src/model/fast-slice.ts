/**
 * The common shape of a discovery.k8s.io/v1 EndpointSlice, read without
 * zod. A large cluster's slices are almost all alike (each endpoint a list
 * of addresses, plain boolean conditions, a node name and maybe a zone), and
 * running kubernetes.ts `k8sEndpointSliceSchema` over each of their
 * endpoints costs far more than the values it checks.
 *
 * {@link readCommonSlice} gives exactly what `k8sEndpointSliceSchema`
 * would give (the same values, the same keys present), or undefined when
 * the slice is not of the common shape or not valid; the caller then runs
 * the schema, so every error message is the schema's own. It never accepts
 * a slice the schema refuses: every value it lets through passes the very
 * checks (validate.ts) the schema runs. What it reads:
 *
 *   - `metadata`: `name` (a DNS-1123 subdomain), `namespace` (a DNS-1123
 *     label; absent, null or "" is "default"), `labels` holding the
 *     service-name label (a DNS-1123 label);
 *   - `endpoints` (absent or null: none), each with `addresses` (1-100
 *     strings, read later by parse.ts), `conditions` (absent, null, or an
 *     object whose `ready`, `serving` and `terminating` are booleans, null
 *     or absent), `nodeName` and `zone` (absent, null, or strings that pass
 *     validate.ts `checkNodeName` / `checkZone`), and no `hints` (absent or
 *     null);
 *   - `ports` (absent or null: none), each with `name` (absent, null, "" or
 *     a DNS-1123 label), `protocol` (absent, null, or exactly TCP, UDP or
 *     SCTP) and `port` (absent, null, or an integer 1-65535).
 *
 * Anything else (hints, a condition of another type, a port that is not an
 * integer, a field of the wrong type...) leaves the slice to the schema.
 */
import type { K8sEndpointSlice } from './kubernetes.ts';
import { SERVICE_NAME_LABEL } from './kubernetes.ts';
import { isRecord } from './schema.ts';
import type { Protocol } from './types.ts';
import { checkDNSLabel, checkDNSSubdomain, checkNodeName, checkZone, PROTOCOLS } from './validate.ts';

type SliceEndpoint = K8sEndpointSlice['endpoints'][number];
type SlicePort = K8sEndpointSlice['ports'][number];

/**
 * `raw` read as `k8sEndpointSliceSchema` reads it, when it is an
 * EndpointSlice of the common shape (see the module comment) that the
 * schema accepts; undefined otherwise. Never throws.
 */
export function readCommonSlice(raw: Record<string, unknown>): K8sEndpointSlice | undefined {
  const metadata = readMetadata(raw.metadata);
  if (metadata === undefined) return undefined;
  const endpoints = readEndpoints(raw.endpoints);
  if (endpoints === undefined) return undefined;
  const ports = readPorts(raw.ports);
  if (ports === undefined) return undefined;
  return { metadata, endpoints, ports };
}

/** `metadata`: name, namespace ("default" for none) and the service-name label, all valid; undefined otherwise. */
function readMetadata(m: unknown): K8sEndpointSlice['metadata'] | undefined {
  if (!isRecord(m)) return undefined;
  const { name, namespace, labels } = m;
  if (typeof name !== 'string' || checkDNSSubdomain(name) !== undefined) return undefined;
  let ns: string;
  if (namespace === undefined || namespace === null || namespace === '') ns = 'default';
  else if (typeof namespace === 'string' && checkDNSLabel(namespace) === undefined) ns = namespace;
  else return undefined;
  if (!isRecord(labels)) return undefined;
  const service = labels[SERVICE_NAME_LABEL];
  if (typeof service !== 'string' || checkDNSLabel(service) !== undefined) return undefined;
  return { name, namespace: ns, labels: { [SERVICE_NAME_LABEL]: service } };
}

/**
 * `endpoints`, each of the common shape and valid; undefined otherwise. A
 * node name or zone equal to the previous endpoint's is not checked again.
 */
function readEndpoints(list: unknown): SliceEndpoint[] | undefined {
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list)) return undefined;
  const out: SliceEndpoint[] = new Array(list.length);
  let goodNode: string | undefined;
  let goodZone: string | undefined;
  for (let i = 0; i < list.length; i++) {
    const e: unknown = list[i];
    if (!isRecord(e)) return undefined;
    const addresses = e.addresses;
    if (!Array.isArray(addresses) || addresses.length < 1 || addresses.length > 100) return undefined;
    for (let j = 0; j < addresses.length; j++) if (typeof addresses[j] !== 'string') return undefined;
    const conditions = readConditions(e.conditions);
    if (conditions === undefined) return undefined;
    if (e.hints !== undefined && e.hints !== null) return undefined;
    const nodeName = e.nodeName;
    if (typeof nodeName === 'string') {
      if (nodeName !== goodNode) {
        if (checkNodeName(nodeName) !== undefined) return undefined;
        goodNode = nodeName;
      }
    } else if (nodeName !== undefined && nodeName !== null) return undefined;
    const zone = e.zone;
    if (typeof zone === 'string') {
      if (zone !== goodZone) {
        if (checkZone(zone) !== undefined) return undefined;
        goodZone = zone;
      }
    } else if (zone !== undefined && zone !== null) return undefined;
    // The schema's output: a key the input holds is kept (null read as undefined), an absent one stays absent.
    const endpoint: { addresses: string[]; conditions: SliceEndpoint['conditions']; nodeName?: string | undefined; zone?: string | undefined; hints?: undefined } = {
      addresses: addresses as string[],
      conditions,
    };
    if ('nodeName' in e) endpoint.nodeName = nodeName === null ? undefined : (nodeName as string | undefined);
    if ('zone' in e) endpoint.zone = zone === null ? undefined : (zone as string | undefined);
    if ('hints' in e) endpoint.hints = undefined;
    out[i] = endpoint as SliceEndpoint; // zod's output type marks optional keys as required
  }
  return out;
}

/** The eight sets of conditions, by ready × 4 + serving × 2 + terminating: shared, since slices of thousands of endpoints have one or two of them. */
const CONDITIONS: ReadonlyArray<SliceEndpoint['conditions']> = Array.from({ length: 8 }, (_, i) =>
  Object.freeze({ ready: (i & 4) !== 0, serving: (i & 2) !== 0, terminating: (i & 1) !== 0 }),
);

/** EndpointConditions with the API's nil semantics (kubernetes.ts `conditionsSchema`); undefined when not of booleans. */
function readConditions(c: unknown): SliceEndpoint['conditions'] | undefined {
  if (c === undefined || c === null) return CONDITIONS[0b110];
  if (!isRecord(c)) return undefined;
  const { ready, serving, terminating } = c;
  if (!isOptionalBoolean(ready) || !isOptionalBoolean(serving) || !isOptionalBoolean(terminating)) return undefined;
  const r = ready ?? true;
  return CONDITIONS[(r ? 4 : 0) + ((serving ?? r) ? 2 : 0) + (terminating === true ? 1 : 0)];
}

function isOptionalBoolean(v: unknown): v is boolean | null | undefined {
  return v === undefined || v === null || typeof v === 'boolean';
}

/** `ports`, each of the common shape and valid; undefined otherwise. */
function readPorts(list: unknown): SlicePort[] | undefined {
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list)) return undefined;
  const out: SlicePort[] = new Array(list.length);
  for (let i = 0; i < list.length; i++) {
    const p: unknown = list[i];
    if (!isRecord(p)) return undefined;
    const { name, protocol, port } = p;
    let n: string;
    if (name === undefined || name === null || name === '') n = '';
    else if (typeof name === 'string' && checkDNSLabel(name) === undefined) n = name;
    else return undefined;
    let proto: Protocol;
    if (protocol === undefined || protocol === null) proto = 'TCP';
    else if (typeof protocol === 'string' && (PROTOCOLS as readonly string[]).includes(protocol)) proto = protocol as Protocol;
    else return undefined;
    if (port !== undefined && port !== null && !(typeof port === 'number' && Number.isInteger(port) && port >= 1 && port <= 65535)) return undefined;
    const out1: { name: string; protocol: Protocol; port?: number | undefined } = { name: n, protocol: proto };
    if ('port' in p) out1.port = port === null ? undefined : (port as number | undefined);
    out[i] = out1 as SlicePort;
  }
  return out;
}
