/**
 * Which UDP conntrack entries a sync leaves stale, after kube-proxy's
 * pkg/proxy/conntrack/cleanup.go. UDP has no connection end, so a flow that
 * keeps its source port (DNS, statsd, syslog) would keep following its
 * conntrack entry to a removed endpoint forever; TCP and SCTP entries end
 * with their connections and are left alone.
 *
 * Per UDP frontend of a service port in each IP family's view (family.ts;
 * its ClusterIP:port of that family, each external IP:port and VIP-mode
 * LoadBalancer IP:port of that family, and its NodePort on any address of
 * that family), as kube-proxy's proxier of each family cleans its own
 * family's entries (`conntrack -f ipv6` for IPv6, exec.ts):
 *
 * - an endpoint that frontend's traffic can no longer reach: delete the
 *   entries whose original destination is the frontend and whose NAT
 *   target is that endpoint;
 * - a frontend that had no endpoint and now has one: delete the entries
 *   to it, which were created while nothing answered.
 *
 * ClusterIP traffic reaches the endpoints of the internal policy
 * (policy.ts internalEndpoints); external traffic every endpoint this node
 * may send to (policy.ts categorizeEndpoints `allReachable`: under
 * externalTrafficPolicy Local, pods and the node itself still reach the
 * cluster set).
 */
import type { Endpoint, IPFamily, NodeInfo, ServicePort, Snapshot } from '../model/types.ts';
import { categorizeEndpoints, internalEndpoints } from '../model/policy.ts';
import { frontendEntries } from '../model/frontend-index.ts';
import { familyView, IP_FAMILIES } from '../model/family.ts';

/**
 * One `conntrack -D` filter: UDP entries to `ip:port` (to `port` on any
 * address when `ip` is absent: a NodePort), only those NATed to
 * `endpointIP` when given, only those that were not DNATed at all when
 * `notNATed` (exec.ts conntrackDeleteArgs); IPv6 entries when `family` is
 * 'IPv6', IPv4 ones when it is absent.
 */
export interface StaleFlow {
  readonly family?: 'IPv6';
  readonly ip?: string;
  readonly port: number;
  readonly endpointIP?: string;
  readonly notNATed?: true;
}

/** Each UDP frontend of `sp` on `node` ("ip:port", or "*:nodePort") with the endpoints its traffic reaches, as "ip:port". */
function udpFrontends(sp: ServicePort, node: NodeInfo | undefined, family: IPFamily): Map<string, { ip?: string; port: number; endpoints: readonly Endpoint[] }> {
  const out = new Map<string, { ip?: string; port: number; endpoints: readonly Endpoint[] }>();
  if (sp.protocol !== 'UDP') return out;
  out.set(`${sp.clusterIP}:${sp.port}`, { ip: sp.clusterIP, port: sp.port, endpoints: internalEndpoints(sp, node).endpoints });
  // The frontends are the model's (model/frontend-index.ts): external IPs, LoadBalancer IPs, then the NodePort.
  const external = frontendEntries(sp, family, node).slice(1);
  if (external.length === 0) return out;
  const reachable = categorizeEndpoints(sp, node).allReachable;
  for (const e of external) {
    if (e.kind === 'NodePort') out.set(`*:${e.port}`, { port: e.port, endpoints: reachable });
    else out.set(`${e.address}:${e.port}`, { ip: e.address, port: e.port, endpoints: reachable });
  }
  return out;
}

/**
 * Stale UDP flows between the snapshot that was applied and the one just
 * applied, of both families (IPv4 first). Sorted, deduplicated. With
 * `keys` (ServicePortNames), only those service ports are compared: the
 * caller knows every other one is the same in both snapshots, and the
 * cost is that of `keys`.
 */
export function staleUDPFlows(before: Snapshot, after: Snapshot, keys?: ReadonlySet<string>): StaleFlow[] {
  return IP_FAMILIES.flatMap((family) => staleOfFamily(familyView(before, family), familyView(after, family), family, keys));
}

/** {@link staleUDPFlows} of one family's views. */
function staleOfFamily(before: Snapshot, after: Snapshot, family: IPFamily, keys?: ReadonlySet<string>): StaleFlow[] {
  const out = new Map<string, StaleFlow>();
  const tag = family === 'IPv6' ? { family } : {};
  const add = (where: string, f: StaleFlow) => out.set(`${where} ${f.endpointIP ?? '*'}`, { ...tag, ...f });
  const pick = (s: Snapshot): Iterable<readonly [string, ServicePort]> =>
    keys === undefined ? s.services : [...keys].flatMap((key) => { const sp = s.services.get(key); return sp ? [[key, sp] as const] : []; });
  const frontendsOf = (s: Snapshot, key: string) => {
    const sp = s.services.get(key);
    return sp ? udpFrontends(sp, s.node, family) : new Map<string, never>();
  };
  for (const [key, old] of pick(before)) {
    const now = frontendsOf(after, key);
    for (const [where, fe] of udpFrontends(old, before.node, family)) {
      const still = new Set((now.get(where)?.endpoints ?? []).map((e) => `${e.ip}:${e.port}`));
      for (const ep of fe.endpoints) {
        if (!still.has(`${ep.ip}:${ep.port}`)) add(where, { ...(fe.ip ? { ip: fe.ip } : {}), port: fe.port, endpointIP: ep.ip });
      }
    }
  }
  for (const [key, now] of pick(after)) {
    const was = frontendsOf(before, key);
    for (const [where, fe] of udpFrontends(now, after.node, family)) {
      if (fe.endpoints.length > 0 && (was.get(where)?.endpoints.length ?? 0) === 0) add(where, { ...(fe.ip ? { ip: fe.ip } : {}), port: fe.port });
    }
  }
  const order = (f: StaleFlow) => `${f.ip ?? '*'}:${f.port} ${f.endpointIP ?? ''}`;
  return [...out.values()].sort((a, b) => (order(a) < order(b) ? -1 : 1));
}

/**
 * The UDP entries a sync may have left without NAT, for each family of
 * `families` (IPv4 first): per UDP frontend of the snapshot that has an
 * endpoint to send to, the entries to it that were not DNATed. A backend
 * says when its write let new UDP flows through its nat rules untranslated
 * for a moment (SyncResult.udpNotNATed); the kernel still committed a
 * conntrack entry for each (a packet that no nat rule translates is
 * confirmed with no NAT), and later datagrams of such a flow (same
 * 5-tuple) follow that entry and never pass the nat rules again, as long
 * as they come before it times out (nf_conntrack_udp_timeout, 30 s).
 * Deleting those entries lets the flow's next datagram be translated, as
 * kube-proxy's pkg/proxy/conntrack deletes the entries of a UDP frontend
 * that had no endpoint once it gets one.
 *
 * A ClusterIP, external or LoadBalancer frontend's filter is its address
 * and port, with the reply from that same address (conntrack(8)
 * `--reply-src`); a NodePort's is its port on any address with the reply
 * from that same port (`--reply-port-src`): the addresses NodePorts are
 * served on are a mode's (and may be every local one), while the port is
 * the Service's. A DNATed entry of a NodePort whose endpoints listen on
 * the NodePort itself (targetPort == nodePort) matches too and is deleted:
 * its flow picks an endpoint again. Sorted, deduplicated.
 */
export function notNATedUDPFlows(snapshot: Snapshot, families: readonly IPFamily[] = IP_FAMILIES): StaleFlow[] {
  const out = new Map<string, StaleFlow>();
  for (const family of IP_FAMILIES) {
    if (!families.includes(family)) continue;
    const view = familyView(snapshot, family);
    const tag = family === 'IPv6' ? { family } : {};
    for (const sp of view.services.values()) {
      for (const [where, fe] of udpFrontends(sp, view.node, family)) {
        if (fe.endpoints.length > 0) out.set(`${family} ${where}`, { ...tag, ...(fe.ip ? { ip: fe.ip } : {}), port: fe.port, notNATed: true });
      }
    }
  }
  const order = (f: StaleFlow) => `${f.family ?? 'IPv4'} ${f.ip ?? '*'}:${f.port}`;
  return [...out.values()].sort((a, b) => (order(a) < order(b) ? -1 : 1));
}
