/**
 * Change tracking between two whole snapshots: which service ports need
 * their rules rewritten (kube-proxy: pkg/proxy/servicechangetracker.go and
 * endpointschangetracker.go, reduced to comparing whole snapshots).
 *
 * Sources report what changed themselves (sources/source.ts SourceRead.changed,
 * sources/decoder.ts), at the cost of what changed; this comparison, at the
 * cost of every service port, is the proxier's fallback for a read that
 * cannot tell, and the reference the sources' reports are tested against.
 */
import { isDeepStrictEqual } from 'node:util';
import type { ServicePort, Snapshot } from '../model/types.ts';
import { familyView, IP_FAMILIES, portsOfKey } from '../model/family.ts';

/**
 * ServicePortNames ("namespace/name:port") that were added, removed, or
 * whose ServicePort (service or endpoints) differs between `before` and
 * `after`, in either family's view (family.ts). Costs O(service ports of both).
 */
export function changedServicePorts(before: Snapshot, after: Snapshot): Set<string> {
  const changed = new Set<string>();
  for (const family of IP_FAMILIES) {
    const b = familyView(before, family).services;
    const a = familyView(after, family).services;
    for (const [key, sp] of a) {
      const old = b.get(key);
      if (!old || !isDeepStrictEqual(old, sp)) changed.add(key);
    }
    for (const key of b.keys()) if (!a.has(key)) changed.add(key);
  }
  return changed;
}

/** How many service ports a read changed, by what changed (kube-proxy's service and endpoint change counters). */
export interface ChangeCounts {
  /** Service ports added, removed, or whose service part (frontends, policies, affinity) differs. */
  readonly services: number;
  /** Service ports whose endpoints differ (an added or removed service port with endpoints counts here too). */
  readonly endpoints: number;
}

/**
 * Count the service ports in `keys` by what changed between `before`
 * (undefined: nothing was read before, so every key is new) and `after`.
 * A key can count in both. kube-proxy counts Service and EndpointSlice
 * events (pkg/proxy/servicechangetracker.go, endpointschangetracker.go);
 * drover counts the service ports those events changed. Costs O(keys).
 */
export function countChanges(before: Snapshot | undefined, after: Snapshot, keys: Iterable<string>): ChangeCounts {
  let services = 0;
  let endpoints = 0;
  for (const key of keys) {
    // Both families' service ports of the key (family.ts): a single-stack IPv6 one is only in the IPv6 view.
    const olds = before === undefined ? [undefined, undefined] : portsOfKey(before, key);
    const nows = portsOfKey(after, key);
    const had = olds.some((sp) => sp !== undefined);
    const has = nows.some((sp) => sp !== undefined);
    if (!had || !has) {
      const ones = had ? olds : nows;
      if (!had && !has) continue; // a superset key that neither read has
      services++;
      if (ones.some((sp) => sp !== undefined && sp.endpoints.length > 0)) endpoints++;
      continue;
    }
    const [oldService, oldEndpoints] = serviceAndEndpoints(olds);
    const [newService, newEndpoints] = serviceAndEndpoints(nows);
    if (!isDeepStrictEqual(oldService, newService)) services++;
    if (!isDeepStrictEqual(oldEndpoints, newEndpoints)) endpoints++;
  }
  return { services, endpoints };
}

/** The service parts (all but the endpoints) and the endpoints of a key's service ports of each family, apart. */
function serviceAndEndpoints(ports: ReadonlyArray<ServicePort | undefined>): [unknown[], unknown[]] {
  const services: unknown[] = [];
  const endpoints: unknown[] = [];
  for (const sp of ports) {
    if (sp === undefined) {
      services.push(undefined);
      endpoints.push(undefined);
      continue;
    }
    const { endpoints: eps, ...service } = sp;
    services.push(service);
    endpoints.push(eps);
  }
  return [services, endpoints];
}
