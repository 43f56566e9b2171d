/**
 * Matching endpoints to service ports (kube-proxy's EndpointSliceCache,
 * pkg/proxy/endpointslicecache.go, reduced to a pure function), and the
 * warnings for endpoint objects and ports that match nothing:
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
import { objectError, type ManifestError } from './errors.ts';
import { compareEndpoints, compareStrings } from './order.ts';
import type { EndpointAddress, EndpointGroup, ParsedEndpoints, ParsedEndpointSlice, ParsedService, ParsedServicePort } from './parsed.ts';
import type { Endpoint } from './types.ts';

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

/** Index `groups` by port name and protocol, for {@link endpointsFor}. */
export function indexEndpoints(groups: readonly EndpointGroup[]): EndpointIndex {
  const out = new Map<string, Array<{ port: number; addresses: readonly EndpointAddress[] }>>();
  for (const g of groups) {
    for (const gp of g.ports) {
      const entry = { port: gp.port, addresses: g.addresses };
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

/**
 * The endpoints of service port `p`: every address of every endpoint port
 * with the same name and protocol, de-duplicated by ip:port, sorted, frozen.
 */
export function endpointsFor(p: ParsedServicePort, index: EndpointIndex): readonly Endpoint[] {
  const byAddr = new Map<string, Endpoint>();
  for (const { port, addresses } of index.get(portId(p)) ?? []) {
    for (const a of addresses) {
      const id = `${a.ip}:${port}`;
      const seen = byAddr.get(id);
      if (seen === undefined || rank(a) > rank(seen)) byAddr.set(id, Object.freeze({ ...a, port }));
    }
  }
  return Object.freeze([...byAddr.values()].sort(compareEndpoints));
}

/**
 * Warnings for endpoint objects whose Service is missing (or is a Shepherd
 * Service, which lists its endpoints itself): their endpoints are not used.
 * `services` are all Services read, proxied or not; `objects` all endpoint
 * objects, reported in the order given.
 */
export function orphanWarnings(services: readonly ParsedService[], objects: readonly EndpointObject[]): ManifestError[] {
  const byKey = new Map(services.map((s) => [`${s.namespace}/${s.name}`, s]));
  const out: ManifestError[] = [];
  for (const o of objects) {
    const key = `${o.namespace}/${o.serviceName}`;
    const svc = byKey.get(key);
    if (svc === undefined) out.push(objectError(o, '', `Service ${key} does not exist; endpoints ignored`));
    else if (svc.source === 'shepherd') out.push(objectError(o, '', `Service ${key} is a Shepherd Service, which lists its own endpoints; endpoints ignored`));
  }
  return out;
}

/**
 * Warnings for endpoint ports that carry the name of one of `svc`'s ports
 * but another protocol: they serve no port (kube-proxy matches name and
 * protocol). One warning per object, port name and protocol.
 */
export function protocolWarnings(svc: ParsedService, objects: readonly EndpointObject[]): ManifestError[] {
  const protocols = new Map(svc.ports.map((p) => [p.name, p.protocol])); // port names are unique
  const out: ManifestError[] = [];
  for (const o of objects) {
    const seen = new Set<string>();
    for (const gp of o.groups.flatMap((g) => g.ports)) {
      const want = protocols.get(gp.name);
      if (want === undefined || want === gp.protocol || seen.has(portId(gp))) continue;
      seen.add(portId(gp));
      const port = gp.name === '' ? 'unnamed port' : `port "${gp.name}"`;
      out.push(objectError(o, '', `endpoint ${port} is ${gp.protocol} but ${port} of Service ${svc.namespace}/${svc.name} is ${want}; endpoint port ignored`));
    }
  }
  return out;
}
