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

/** Serving endpoints over every service port of a snapshot (for sync results and logs). */
export function countServingEndpoints(snapshot: Snapshot): number {
  let n = 0;
  for (const sp of snapshot.services.values()) n += servingEndpoints(sp).length;
  return n;
}
