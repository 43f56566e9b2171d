/** Which endpoints of a service port receive new connections; shared by every backend. */
import type { Endpoint, ServicePort, Snapshot } from './types.ts';

/**
 * The endpoints that receive new connections: the ready ones.
 * kube-proxy's fallback to serving-but-terminating endpoints when none is
 * ready (pkg/proxy/topology.go) is not built yet.
 */
export function servingEndpoints(sp: ServicePort): Endpoint[] {
  return sp.endpoints.filter((ep) => ep.ready);
}

/** Serving endpoint counts of service ports already counted; a snapshot keeps the objects of unchanged service ports. */
const counted = new WeakMap<ServicePort, number>();

/**
 * Serving endpoints over every service port of a snapshot (for sync results
 * and logs). Service ports are immutable, so each one's count is kept: a
 * sync after a small change counts only the changed ones.
 */
export function countServingEndpoints(snapshot: Snapshot): number {
  let n = 0;
  for (const sp of snapshot.services.values()) {
    let c = counted.get(sp);
    if (c === undefined) {
      c = servingEndpoints(sp).length;
      counted.set(sp, c);
    }
    n += c;
  }
  return n;
}
