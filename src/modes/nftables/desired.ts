/**
 * What nftables mode wants programmed for a Snapshot: one entry per
 * frontend (an address, protocol and port clients connect to), with the
 * endpoints the endpoint policy chose for it (model/policy.ts) and what
 * happens without any. Pure.
 *
 * The frontends of a service port, all IPv4 (IPv6 ones are left to an
 * IPv6 table, not built yet): its ClusterIP; its NodePort on each of this
 * node's NodePort addresses (`--nodeport-addresses`, read once when the
 * backend starts; loopback never); its external IPs; its LoadBalancer
 * ingress IPs in VIP mode, with the IPv4 `loadBalancerSourceRanges`.
 */
import { formatCIDR } from '../../model/addr.ts';
import { ipv4ExternalIPs, ipv4LoadBalancerIPs, ipv4SourceRanges, rangesHoldNode } from '../../model/frontends.ts';
import { categorizeEndpoints, externallyAccessible, internalEndpoints } from '../../model/policy.ts';
import type { Endpoint, NodeInfo, ServicePort, Snapshot } from '../../model/types.ts';
import { firewallText, frontendText, hairpinText, nftProtocol, safeIPv4, safePort, targetText, type NftProtocol } from './elements.ts';

/** One frontend of one service port. */
export interface DesiredFrontend {
  /** ServicePortName, "ns/name:port". */
  readonly servicePort: string;
  /** The frontend's element text (elements.ts frontendText). */
  readonly frontend: string;
  readonly protocol: NftProtocol;
  /** `cluster` for the ClusterIP; `external` for a NodePort, an external IP or a LoadBalancer IP. */
  readonly kind: 'cluster' | 'external';
  /** externalTrafficPolicy Local (external frontends only): other clients than pods and the node get {@link local}. */
  readonly externalLocal: boolean;
  /** The endpoints every client gets (pods and the node only, under externalTrafficPolicy Local), as element texts (`ip . port`), sorted, no duplicates. */
  readonly targets: readonly string[];
  /** This node's endpoints, for the other clients of an externalTrafficPolicy Local frontend; empty otherwise. */
  readonly local: readonly string[];
  /** The hairpin entries of every endpoint it may send to (elements.ts hairpinText), sorted. */
  readonly hairpin: readonly string[];
  /**
   * Without any endpoint to send to: `reject` when none is usable anywhere,
   * `drop` for a ClusterIP under internalTrafficPolicy Local whose endpoints
   * are all on other nodes; null otherwise.
   */
  readonly none: 'reject' | 'drop' | null;
  /** ClientIP affinity timeout, seconds; undefined without affinity. */
  readonly affinitySeconds?: number;
  /** For a LoadBalancer IP with source ranges: the `frontend . range` elements of set firewall-allow; undefined for every client. */
  readonly firewall?: readonly string[];
}

/** What the frontends of a snapshot depend on besides it. */
export interface DesiredOptions {
  /** This node's NodePort addresses (IPv4, no loopback), sorted. */
  readonly nodePortIPs: readonly string[];
}

const sortedTexts = (eps: readonly Endpoint[]): string[] => [...new Set(eps.map((ep) => targetText(ep)))].sort();

/**
 * The frontends of service port `sp` on `node`.
 * @throws UnsafeElementError for a value that cannot be an element (the model validates them first).
 */
export function desiredFrontends(sp: ServicePort, node: NodeInfo | undefined, opts: DesiredOptions): DesiredFrontend[] {
  const protocol = nftProtocol(sp.protocol);
  const port = safePort(sp.port);
  const affinity = sp.sessionAffinity ? { affinitySeconds: sp.sessionAffinity.timeoutSeconds } : {};
  const out: DesiredFrontend[] = [];

  const internal = internalEndpoints(sp, node);
  out.push({
    servicePort: sp.key,
    frontend: frontendText({ ip: sp.clusterIP, protocol, port }),
    protocol,
    kind: 'cluster',
    externalLocal: false,
    targets: sortedTexts(internal.endpoints),
    local: [],
    hairpin: [...new Set(internal.endpoints.map((ep) => hairpinText(protocol, ep)))].sort(),
    none: internal.none === null ? null : internal.none === 'DROP' ? 'drop' : 'reject',
    ...(internal.endpoints.length > 0 ? affinity : {}),
  });
  if (!externallyAccessible(sp)) return out;

  const sets = categorizeEndpoints(sp, node);
  const externalLocal = sp.externalTrafficPolicy === 'Local';
  const has = sets.hasAnyEndpoints;
  // Under policy Local, pods and the node go to the cluster set (kube-proxy's KUBE-EXT short-circuit).
  const targets = has ? sortedTexts(sets.cluster ?? sets.local ?? []) : [];
  const local = has && externalLocal ? sortedTexts(sets.local ?? []) : [];
  const hairpin = [...new Set(sets.allReachable.map((ep) => hairpinText(protocol, ep)))].sort();
  const external = (ip: string, p: number, firewall?: readonly string[]): DesiredFrontend => ({
    servicePort: sp.key,
    frontend: frontendText({ ip, protocol, port: p }),
    protocol,
    kind: 'external',
    externalLocal: has && externalLocal,
    targets,
    local,
    hairpin: has ? hairpin : [],
    none: has ? null : 'reject',
    ...(has ? affinity : {}),
    ...(firewall ? { firewall } : {}),
  });
  const f = sp.frontends;
  if (f.nodePort !== undefined) for (const ip of opts.nodePortIPs) out.push(external(safeIPv4(ip), safePort(f.nodePort)));
  for (const ip of ipv4ExternalIPs(f)) out.push(external(ip, port));
  const ranges = ipv4SourceRanges(f.loadBalancerSourceRanges);
  const lbIPs = ipv4LoadBalancerIPs(f);
  for (const ip of lbIPs) {
    if (ranges.length === 0) {
      out.push(external(ip, port));
      continue;
    }
    const frontend = frontendText({ ip, protocol, port });
    // A VIP that loops back from the node: the LoadBalancer IPs themselves are clients too (kube-proxy's allowFromNode).
    const clients = [...ranges.map(formatCIDR), ...(rangesHoldNode(ranges, node) ? lbIPs.map((lb) => `${lb}/32`) : [])];
    out.push(external(ip, port, [...new Set(clients.map((c) => firewallText(frontend, c)))].sort()));
  }
  return out;
}

/** Every frontend of a snapshot, by frontend text. */
export interface DesiredNft {
  readonly frontends: ReadonlyMap<string, DesiredFrontend>;
  /** Service ports left out because one of their frontends belongs to another service port (the first by key keeps it). */
  readonly conflicts: readonly string[];
}

/** The desired frontends of `snapshot` (service ports in key order; a frontend taken twice stays with the first). */
export function desiredNft(snapshot: Snapshot, opts: DesiredOptions): DesiredNft {
  const frontends = new Map<string, DesiredFrontend>();
  const conflicts: string[] = [];
  for (const sp of snapshot.services.values()) {
    // A frontend listed twice by one service port (an external IP that is also its LoadBalancer IP) is programmed once.
    const mine = [...new Map(desiredFrontends(sp, snapshot.node, opts).map((f) => [f.frontend, f] as const)).values()];
    if (mine.some((f) => frontends.has(f.frontend))) {
      conflicts.push(sp.key);
      continue;
    }
    for (const f of mine) frontends.set(f.frontend, f);
  }
  return { frontends, conflicts };
}
