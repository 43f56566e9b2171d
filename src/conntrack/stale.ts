/**
 * Which UDP conntrack entries a sync leaves stale, after kube-proxy's
 * pkg/proxy/conntrack/cleanup.go. UDP has no connection end, so a flow that
 * keeps its source port (DNS, statsd, syslog) would keep following its
 * conntrack entry to a removed endpoint forever; TCP and SCTP entries end
 * with their connections and are left alone.
 *
 * - An endpoint that no longer serves a UDP service port: delete the entries
 *   whose original destination is the ClusterIP:port and whose NAT target is
 *   that endpoint.
 * - A UDP service port that had no serving endpoint and now has one: delete
 *   the entries to its ClusterIP:port, which were created while nothing
 *   answered.
 */
import type { ServicePort, Snapshot } from '../model/types.ts';
import { internalEndpoints } from '../model/policy.ts';

/** One `conntrack -D` filter: UDP entries to `clusterIP:port`, only those NATed to `endpointIP` when given. */
export interface StaleFlow {
  readonly clusterIP: string;
  readonly port: number;
  readonly endpointIP?: string;
}

/**
 * Stale UDP flows between the snapshot that was applied and the one just
 * applied. Sorted, deduplicated. With `keys` (ServicePortNames), only those
 * service ports are compared: the caller knows every other one is the same
 * in both snapshots, and the cost is that of `keys`.
 */
export function staleUDPFlows(before: Snapshot, after: Snapshot, keys?: ReadonlySet<string>): StaleFlow[] {
  const out = new Map<string, StaleFlow>();
  const add = (f: StaleFlow) => out.set(`${f.clusterIP}:${f.port} ${f.endpointIP ?? '*'}`, f);
  const pick = (s: Snapshot): Iterable<readonly [string, ServicePort]> =>
    keys === undefined ? s.services : [...keys].flatMap((key) => { const sp = s.services.get(key); return sp ? [[key, sp] as const] : []; });
  for (const [key, old] of pick(before)) {
    if (old.protocol !== 'UDP') continue;
    const now = after.services.get(key);
    const still = new Set(
      now && now.clusterIP === old.clusterIP && now.port === old.port ? internalEndpoints(now, after.node).endpoints.map((e) => `${e.ip}:${e.port}`) : [],
    );
    for (const ep of internalEndpoints(old, before.node).endpoints) {
      if (!still.has(`${ep.ip}:${ep.port}`)) add({ clusterIP: old.clusterIP, port: old.port, endpointIP: ep.ip });
    }
  }
  for (const [key, now] of pick(after)) {
    if (now.protocol !== 'UDP' || internalEndpoints(now, after.node).endpoints.length === 0) continue;
    const old = before.services.get(key);
    if (!old || internalEndpoints(old, before.node).endpoints.length === 0 || old.clusterIP !== now.clusterIP || old.port !== now.port) {
      add({ clusterIP: now.clusterIP, port: now.port });
    }
  }
  return [...out.values()].sort((a, b) => (`${a.clusterIP}:${a.port} ${a.endpointIP ?? ''}` < `${b.clusterIP}:${b.port} ${b.endpointIP ?? ''}` ? -1 : 1));
}
