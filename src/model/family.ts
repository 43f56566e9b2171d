/**
 * The per-family views of a Snapshot, as kube-proxy's metaproxier splits
 * one cluster into an IPv4 and an IPv6 proxier (pkg/proxy/metaproxier):
 * each family's proxier sees only the service ports that have a ClusterIP
 * of its family, each with that ClusterIP and the endpoints of its family.
 *
 * The Snapshot holds both views ready (normalise.ts builds them): its
 * `services` are the IPv4 view, `ipv6Services` the IPv6 one. A mode that
 * programs one family takes {@link familyView} of it; the frontends of the
 * family are frontend-index.ts's, expanded with the same family.
 */
import type { IPFamily, ServicePort, Snapshot } from './types.ts';

/** Both families, IPv4 first (the order a mode syncs and reports them in). */
export const IP_FAMILIES: readonly IPFamily[] = Object.freeze(['IPv4', 'IPv6'] as const);

/** No service ports: the IPv6 view of a snapshot that has none. */
const NO_PORTS: ReadonlyMap<string, ServicePort> = new Map();

/** The IPv6 views made so far, one per snapshot, so that every caller gets the same object. */
const ipv6Views = new WeakMap<Snapshot, Snapshot>();

/**
 * The snapshot as the proxier of `family` sees it: the service ports with
 * a ClusterIP of that family (`clusterIP` is that address, `endpoints` are
 * of that family only; `frontends` still list both families, to be read
 * with frontends.ts and the same family), and the node. The IPv4 view of
 * a snapshot without IPv6 service ports is the snapshot itself. Costs
 * nothing: both views are built with the snapshot.
 */
export function familyView(snapshot: Snapshot, family: IPFamily): Snapshot {
  if (family === 'IPv4') {
    if (snapshot.ipv6Services === undefined) return snapshot;
    return { services: snapshot.services, ...(snapshot.node !== undefined ? { node: snapshot.node } : {}) };
  }
  let view = ipv6Views.get(snapshot);
  if (view === undefined) {
    view = Object.freeze({ services: snapshot.ipv6Services ?? NO_PORTS, ...(snapshot.node !== undefined ? { node: snapshot.node } : {}) });
    ipv6Views.set(snapshot, view);
  }
  return view;
}

/**
 * The service port `key` of each family in `snapshot`, IPv4 first; a
 * family without it gives undefined. What change tracking compares.
 */
export function portsOfKey(snapshot: Snapshot, key: string): [ServicePort | undefined, ServicePort | undefined] {
  return [snapshot.services.get(key), snapshot.ipv6Services?.get(key)];
}

/** Every service port key of `snapshot`, of either family, each once, IPv4 ones first. */
export function allPortKeys(snapshot: Snapshot): Set<string> {
  const keys = new Set(snapshot.services.keys());
  if (snapshot.ipv6Services !== undefined) for (const key of snapshot.ipv6Services.keys()) keys.add(key);
  return keys;
}
