/**
 * Matching endpoints to service ports (kube-proxy's EndpointSliceCache,
 * pkg/proxy/endpointslicecache.go, reduced to a pure function), and the
 * warnings for endpoint objects and ports that match nothing
 * ({@link orphanWarnings}, {@link portWarnings}):
 *
 *   - an endpoint port serves the service port with the same **name** and
 *     protocol (endpoint ports carry the Service port name and the
 *     already-resolved target port);
 *   - endpoints are de-duplicated by ip:port (the "best" one is kept: ready,
 *     then serving, then not terminating) and sorted by ip then port, all
 *     conditions kept (backends decide which ones serve).
 *
 * Everything here is linear in the number of ports and addresses.
 */
import { dottedQuadValue } from './addr.ts';
import { frozenCopyWith } from './copy.ts';
import { objectError, type ManifestError } from './errors.ts';
import { compareEndpoints, compareStrings } from './order.ts';
import type { EndpointAddress, EndpointGroup, ParsedEndpoints, ParsedEndpointSlice, ParsedService, ParsedServicePort } from './parsed.ts';
import type { Endpoint, IPFamily } from './types.ts';

/** An EndpointSlice or a legacy Endpoints object. */
export type EndpointObject = ParsedEndpointSlice | ParsedEndpoints;

/** Endpoint objects by the "namespace/serviceName" they belong to, each list sorted by object name. */
export function groupByService<T extends EndpointObject>(objects: readonly T[]): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const o of [...objects].sort((a, b) => compareStrings(a.name, b.name))) {
    const key = `${o.namespace}/${o.serviceName}`;
    const list = out.get(key);
    if (list) list.push(o);
    else out.set(key, [o]);
  }
  return out;
}

/** The endpoint groups of one service, indexed by port "name/PROTOCOL". */
export type EndpointIndex = ReadonlyMap<string, ReadonlyArray<{ readonly port: number; readonly addresses: readonly EndpointAddress[] }>>;

const portId = (p: { name: string; protocol: string }) => `${p.name}/${p.protocol}`;

/**
 * The addresses of `addresses` of `family` (validated text: IPv6 holds a
 * ':'), the list itself when they all are (the common case: an
 * EndpointSlice is of one family).
 */
function ofFamily(addresses: readonly EndpointAddress[], family: IPFamily): readonly EndpointAddress[] {
  const v6 = family === 'IPv6';
  if (addresses.every((a) => a.ip.includes(':') === v6)) return addresses;
  return addresses.filter((a) => a.ip.includes(':') === v6);
}

/**
 * Index the addresses of `family` in `groups` by port name and protocol,
 * for {@link endpointsFor}: each family's view of a Service takes the
 * endpoints of its family only (kube-proxy's per-family proxiers,
 * pkg/proxy/metaproxier). Default IPv4.
 */
export function indexEndpoints(groups: readonly EndpointGroup[], family: IPFamily = 'IPv4'): EndpointIndex {
  const out = new Map<string, Array<{ port: number; addresses: readonly EndpointAddress[] }>>();
  for (const g of groups) {
    const addresses = ofFamily(g.addresses, family);
    for (const gp of g.ports) {
      const entry = { port: gp.port, addresses };
      const list = out.get(portId(gp));
      if (list) list.push(entry);
      else out.set(portId(gp), [entry]);
    }
  }
  return out;
}

/** Preference between two endpoints with the same ip:port: ready, then serving, then not terminating. */
function rank(e: EndpointAddress): number {
  return (e.ready ? 4 : 0) + (e.serving ? 2 : 0) + (e.terminating ? 0 : 1);
}

/** An address of an endpoint port: `value` is its address as a number (addr.ts `dottedQuadValue`), when it has one. */
interface Candidate {
  readonly ip: string;
  readonly port: number;
  readonly a: EndpointAddress;
  readonly value: number | undefined;
}

/** order.ts `compareEndpoints`, by the numbers read once when both addresses have one. */
function compareCandidates(x: Candidate, y: Candidate): number {
  if (x.value !== undefined && y.value !== undefined) return x.value - y.value || x.port - y.port;
  return compareEndpoints(x, y);
}

/** True when every address has a number (addr.ts `dottedQuadValue`) above the one before: sorted, no two the same. */
function inOrder(addresses: readonly EndpointAddress[]): boolean {
  let last = -1;
  for (const a of addresses) {
    const value = dottedQuadValue(a.ip);
    if (value === undefined || value <= last) return false;
    last = value;
  }
  return true;
}

/** No endpoints: shared by every service port that has none. */
const NO_ENDPOINTS: readonly Endpoint[] = Object.freeze([]);

/**
 * The endpoints of service port `p`: every address of every endpoint port
 * with the same name and protocol, de-duplicated by ip:port (the first of
 * the best rank kept), sorted, frozen.
 *
 * The candidates are sorted first (stably, so equal ones stay in input
 * order), which puts the copies of one ip:port next to each other: no map
 * of every address, and only the endpoints kept are copied. One endpoint
 * port whose addresses are in order already, each above the one before (as
 * a slice written in order has them), is copied as it is.
 */
export function endpointsFor(p: ParsedServicePort, index: EndpointIndex): readonly Endpoint[] {
  const entries = index.get(portId(p));
  if (entries === undefined) return NO_ENDPOINTS;
  if (entries.length === 1 && inOrder(entries[0]!.addresses)) {
    const { port, addresses } = entries[0]!;
    return addresses.length === 0 ? NO_ENDPOINTS : Object.freeze(addresses.map((a) => frozenCopyWith(a, 'port', port)));
  }
  const found: Candidate[] = [];
  for (const { port, addresses } of entries) for (const a of addresses) found.push({ ip: a.ip, port, a, value: dottedQuadValue(a.ip) });
  if (found.length === 0) return NO_ENDPOINTS;
  found.sort(compareCandidates);
  const out: Endpoint[] = [];
  for (let i = 0; i < found.length; ) {
    let end = i + 1;
    while (end < found.length && compareCandidates(found[i]!, found[end]!) === 0) end++;
    if (end === i + 1) {
      out.push(frozenCopyWith(found[i]!.a, 'port', found[i]!.port));
    } else {
      // Equal in order: the same port, and addresses of the same value (by text, the same ip:port).
      const best = new Map<string, (typeof found)[number]>();
      for (let k = i; k < end; k++) {
        const f = found[k]!;
        const seen = best.get(f.ip);
        if (seen === undefined || rank(f.a) > rank(seen.a)) best.set(f.ip, f);
      }
      for (const f of best.values()) out.push(frozenCopyWith(f.a, 'port', f.port));
    }
    i = end;
  }
  return Object.freeze(out);
}

/**
 * Warnings for endpoint objects whose Service is missing (or is a Shepherd
 * Service, which lists its endpoints itself): their endpoints are not used.
 * `byKey` holds all Services read, proxied or not, by "namespace/name";
 * `objects` all endpoint objects, reported in the order given.
 */
export function orphanWarnings(byKey: ReadonlyMap<string, ParsedService>, objects: readonly EndpointObject[]): ManifestError[] {
  const out: ManifestError[] = [];
  for (const o of objects) {
    const key = `${o.namespace}/${o.serviceName}`;
    const svc = byKey.get(key);
    if (svc === undefined) out.push(objectError(o, '', `Service ${key} does not exist; endpoints ignored`));
    else if (svc.source === 'shepherd') out.push(objectError(o, '', `Service ${key} is a Shepherd Service, which lists its own endpoints; endpoints ignored`));
  }
  return out;
}

/** How many port names a "matches no port" warning lists before "and N more". */
const LISTED_PORT_NAMES = 10;

/** A port name as warnings show it: `port "http"`, or `unnamed port`. */
const portLabel = (name: string) => (name === '' ? 'unnamed port' : `port "${name}"`);

/** `svc`'s port names for a warning: 'its ports: "http", "metrics"', 'its port: "http"', 'its port is unnamed', cut after {@link LISTED_PORT_NAMES}. */
function describePortNames(ports: readonly ParsedServicePort[]): string {
  if (ports.length === 1) return ports[0]!.name === '' ? 'its port is unnamed' : `its port: "${ports[0]!.name}"`;
  const listed = ports.slice(0, LISTED_PORT_NAMES).map((p) => `"${p.name}"`).join(', ');
  return ports.length > LISTED_PORT_NAMES ? `its ports: ${listed} and ${ports.length - LISTED_PORT_NAMES} more` : `its ports: ${listed}`;
}

/**
 * Warnings for the endpoint ports of `objects` (the endpoint objects `svc`
 * uses) that serve none of `svc`'s ports. kube-proxy keys endpoints by
 * ServicePortName, i.e. by the endpoint port's name and protocol
 * (pkg/proxy/endpointslicecache.go), and silently never uses a port no
 * service port matches (kubernetes/kubernetes#123954). Two causes, one
 * message each:
 *
 *   - no service port of that name:
 *     `endpoint port "htp" matches no port of Service nsd/good (its ports: "http", "metrics"); endpoint port ignored`;
 *   - a service port of that name but another protocol:
 *     `endpoint port "dns" is UDP but port "dns" of Service shop/store is TCP; endpoint port ignored`.
 *
 * One warning per object, port name and protocol, on the object as a
 * whole. A Service without proxied ports (headless, ExternalName) gets
 * none. Linear in the number of ports.
 */
export function portWarnings(svc: ParsedService, objects: readonly EndpointObject[]): ManifestError[] {
  const out: ManifestError[] = [];
  if (svc.ports.length === 0) return out;
  const protocolOf = protocolsByName(svc.ports);
  let names: string | undefined; // described once, when first needed
  for (const o of objects) {
    let seen: Set<string> | undefined; // made at the first port that matches nothing
    for (const g of o.groups) {
      for (const gp of g.ports) {
        const want = protocolOf(gp.name);
        if (want === gp.protocol) continue;
        seen ??= new Set<string>();
        if (seen.has(portId(gp))) continue;
        seen.add(portId(gp));
        const port = portLabel(gp.name);
        if (want === undefined) {
          names ??= describePortNames(svc.ports);
          out.push(objectError(o, '', `endpoint ${port} matches no port of ${serviceLabel(svc)} (${names}); endpoint port ignored`));
        } else {
          out.push(objectError(o, '', `endpoint ${port} is ${gp.protocol} but ${port} of ${serviceLabel(svc)} is ${want}; endpoint port ignored`));
        }
      }
    }
  }
  return out;
}

/** "Service namespace/name", for a warning. */
function serviceLabel(svc: ParsedService): string {
  return `Service ${svc.namespace}/${svc.name}`;
}

/** Above this many ports, {@link protocolsByName} indexes them rather than scanning them. */
const SCANNED_PORTS = 8;

/**
 * The protocol of the service port of each name (port names are unique), as
 * a lookup: a scan of the few ports most Services have, a Map for more.
 */
function protocolsByName(ports: readonly ParsedServicePort[]): (name: string) => string | undefined {
  if (ports.length > SCANNED_PORTS) {
    const byName = new Map(ports.map((p) => [p.name, p.protocol]));
    return (name) => byName.get(name);
  }
  return (name) => {
    for (const p of ports) if (p.name === name) return p.protocol;
    return undefined;
  };
}
