/**
 * The endpoint policy: which endpoints of a service port receive traffic on
 * this node. One policy for every proxy mode; a mode programs the sets it
 * is given and never filters endpoints itself.
 *
 * This is kube-proxy's `CategorizeEndpoints` (pkg/proxy/topology.go), with
 * the PreferSameTrafficDistribution feature (PreferSameNode) enabled, as it
 * is by default since Kubernetes 1.34:
 *
 *   - usable endpoints are the ready ones; when none is, the serving and
 *     terminating ones (KEP-1669), chosen independently for the cluster and
 *     the local set;
 *   - the cluster set (traffic policy Cluster) follows topology hints:
 *     PreferSameNode when every ready endpoint has a node hint and one is
 *     for this node; otherwise PreferSameZone (trafficDistribution
 *     PreferClose/PreferSameZone, or topology-aware routing) when every ready
 *     endpoint has a zone hint and one is for this node's zone; otherwise
 *     every endpoint. Hints never apply to the serving-terminating fallback;
 *   - the local set (traffic policy Local) is this node's endpoints,
 *     without topology;
 *   - an endpoint is local when its nodeName is this node's name
 *     (pkg/proxy/endpointslicecache.go); with no node, none is.
 */
import { isDeepStrictEqual } from 'node:util';
import type { Endpoint, NodeInfo, ServicePort, Snapshot } from './types.ts';
import { externalIPsOf, loadBalancerIPsOf } from './frontends.ts';

/** What {@link categorizeEndpoints} reads of a service port. */
export type PolicyInput = Pick<ServicePort, 'endpoints' | 'internalTrafficPolicy' | 'externalTrafficPolicy' | 'frontends' | 'clusterIP'>;

/**
 * The outcome of {@link categorizeEndpoints}. Every list is a sub-list of
 * the service port's endpoints, in their order (ip, then port).
 */
export interface EndpointSets {
  /**
   * Endpoints for traffic under policy Cluster, topology applied; null when
   * the service port never uses policy Cluster (internalTrafficPolicy Local
   * and no external frontend).
   */
  readonly cluster: readonly Endpoint[] | null;
  /**
   * This node's usable endpoints, for traffic under policy Local; null when
   * the service port never uses policy Local.
   */
  readonly local: readonly Endpoint[] | null;
  /** Every endpoint this node may send traffic to: the union of `cluster` and `local`. */
  readonly allReachable: readonly Endpoint[];
  /**
   * True when some endpoint anywhere in the cluster is usable, even if none
   * is reachable from this node (e.g. Local policy, only remote endpoints):
   * kube-proxy then drops traffic instead of rejecting it.
   */
  readonly hasAnyEndpoints: boolean;
}

/** The topology mode of the cluster set (topology.go topologyModeFromHints): '' is none. */
export type TopologyMode = '' | 'PreferSameNode' | 'PreferSameZone';

/**
 * True when the service port has a frontend reachable from outside the
 * cluster, which follows externalTrafficPolicy: a NodePort, an external
 * IP, or a LoadBalancer ingress IP in VIP mode, of the family of the
 * view the service port is in (its `clusterIP`'s: IPv6 in the IPv6 view)
 * (pkg/proxy/serviceport.go ExternallyAccessible, as the proxier of that
 * family sees a Service: kube-proxy gives each family's proxier only the
 * external and ingress IPs of its family; Proxy-mode ingress IPs are not
 * captured by the node).
 */
export function externallyAccessible(sp: Pick<ServicePort, 'frontends' | 'clusterIP'>): boolean {
  const f = sp.frontends;
  const family = sp.clusterIP.includes(':') ? 'IPv6' : 'IPv4';
  return f.nodePort !== undefined || externalIPsOf(f, family).length > 0 || loadBalancerIPsOf(f, family).length > 0;
}

/**
 * True when some traffic to the service port uses policy Cluster
 * (pkg/proxy/serviceport.go UsesClusterEndpoints): internalTrafficPolicy
 * Cluster, or any external frontend, even under externalTrafficPolicy
 * Local (traffic from pods of this node to an external IP is
 * short-circuited to the cluster set).
 */
export function usesClusterEndpoints(sp: Omit<PolicyInput, 'endpoints'>): boolean {
  return sp.internalTrafficPolicy === 'Cluster' || externallyAccessible(sp);
}

/** True when some traffic to the service port uses policy Local (pkg/proxy/serviceport.go UsesLocalEndpoints). */
export function usesLocalEndpoints(sp: Omit<PolicyInput, 'endpoints'>): boolean {
  return sp.internalTrafficPolicy === 'Local' || (externallyAccessible(sp) && sp.externalTrafficPolicy === 'Local');
}

/** True when `ep` runs on `node`. */
function isLocal(ep: Endpoint, node: NodeInfo | undefined): boolean {
  return node !== undefined && ep.nodeName === node.name;
}

/** Serving but terminating: the fallback when no endpoint is ready. */
function servingTerminating(ep: Endpoint): boolean {
  return ep.serving && ep.terminating;
}

/**
 * The topology mode for `endpoints` on `node` (topology.go
 * topologyModeFromHints): PreferSameNode when every ready endpoint has a
 * node hint and some hint names this node; else PreferSameZone when every
 * ready endpoint has a zone hint and some hint names this node's zone;
 * else ''. '' also when no endpoint is ready.
 */
export function topologyMode(endpoints: readonly Endpoint[], node: NodeInfo | undefined): TopologyMode {
  const ready = endpoints.filter((ep) => ep.ready);
  if (ready.length === 0) return '';
  const name = node?.name;
  const zone = node?.zone;
  if (ready.every((ep) => (ep.nodeHints?.length ?? 0) > 0) && name !== undefined && ready.some((ep) => ep.nodeHints!.includes(name))) {
    return 'PreferSameNode';
  }
  if (ready.every((ep) => (ep.zoneHints?.length ?? 0) > 0) && zone !== undefined && ready.some((ep) => ep.zoneHints!.includes(zone))) {
    return 'PreferSameZone';
  }
  return '';
}

/** True when `ep` may serve this node under `mode` (topology.go availableForTopology). */
function availableForTopology(ep: Endpoint, mode: TopologyMode, node: NodeInfo | undefined): boolean {
  if (mode === 'PreferSameNode') return node !== undefined && (ep.nodeHints?.includes(node.name) ?? false);
  if (mode === 'PreferSameZone') return node?.zone !== undefined && (ep.zoneHints?.includes(node.zone) ?? false);
  return true;
}

/**
 * The cluster set of `endpoints` on `node`, and the topology mode it was
 * chosen with: the ready endpoints available for the topology mode, or,
 * when that is empty, every serving and terminating endpoint.
 */
function clusterSet(endpoints: readonly Endpoint[], node: NodeInfo | undefined): { set: Endpoint[]; mode: TopologyMode } {
  const mode = topologyMode(endpoints, node);
  const set = endpoints.filter((ep) => ep.ready && availableForTopology(ep, mode, node));
  // No ready endpoint for the mode means no ready endpoint at all (the mode
  // is '' when this node's topology has none), so fall back to terminating ones.
  return { set: set.length > 0 ? set : endpoints.filter(servingTerminating), mode };
}

/**
 * Categorize the endpoints of service port `sp` for `node` (undefined: no
 * endpoint is local and zone/node hints never match). Pure and linear in
 * the number of endpoints (times the number of hints, at most 8 each).
 * Port of kube-proxy's CategorizeEndpoints (pkg/proxy/topology.go).
 */
export function categorizeEndpoints(sp: PolicyInput, node: NodeInfo | undefined): EndpointSets {
  const endpoints = sp.endpoints;
  const usesCluster = usesClusterEndpoints(sp);
  const usesLocal = usesLocalEndpoints(sp);
  let cluster: Endpoint[] | null = null;
  let mode: TopologyMode = '';
  if (usesCluster) ({ set: cluster, mode } = clusterSet(endpoints, node));
  if (!usesLocal) {
    return { cluster, local: null, allReachable: cluster ?? [], hasAnyEndpoints: (cluster?.length ?? 0) > 0 };
  }

  const hasAnyEndpoints = endpoints.some((ep) => ep.ready || servingTerminating(ep));
  const localReady = localReadyEndpoints(sp, node);
  const fellBack = localReady.length === 0;
  const local = fellBack ? endpoints.filter((ep) => isLocal(ep, node) && servingTerminating(ep)) : localReady;
  if (cluster === null) return { cluster, local, allReachable: local, hasAnyEndpoints };
  // Without topology and without the fallback, `cluster` holds every ready
  // endpoint, so it already contains `local`.
  if (mode === '' && !fellBack) return { cluster, local, allReachable: cluster, hasAnyEndpoints };
  const reachable = new Set<Endpoint>([...cluster, ...local]);
  return { cluster, local, allReachable: endpoints.filter((ep) => reachable.has(ep)), hasAnyEndpoints };
}

/**
 * This node's ready endpoints of `sp`, in their order, whatever its
 * traffic policies: what kube-proxy's Service health check counts
 * (pkg/proxy/endpointsmap.go LocalReadyEndpoints). Serving-terminating
 * endpoints are left out, so that a node whose only endpoints are
 * terminating fails the load balancer's check; none is local without a node.
 */
export function localReadyEndpoints(sp: Pick<ServicePort, 'endpoints'>, node: NodeInfo | undefined): Endpoint[] {
  return sp.endpoints.filter((ep) => isLocal(ep, node) && ep.ready);
}

/**
 * The cluster set of {@link categorizeEndpoints} for `sp` on `node`, the
 * endpoints of policy Cluster (topology applied), whatever the service
 * port's traffic policies. Empty when no endpoint is usable.
 */
export function clusterEndpoints(sp: Pick<ServicePort, 'endpoints'>, node: NodeInfo | undefined): readonly Endpoint[] {
  return clusterSet(sp.endpoints, node).set;
}

/**
 * What ClusterIP traffic of `sp` gets on `node` (kube-proxy's iptables
 * proxier: internalPolicyChain, hasInternalEndpoints and
 * internalTrafficFilterTarget, pkg/proxy/iptables/proxier.go).
 */
export interface InternalEndpoints {
  /** Whose endpoints: `local` for internalTrafficPolicy Local (the KUBE-SVL chain), else `cluster` (KUBE-SVC). */
  readonly policy: 'cluster' | 'local';
  /** The endpoints ClusterIP traffic goes to: the cluster set, or this node's usable endpoints under policy Local. */
  readonly endpoints: readonly Endpoint[];
  /**
   * What happens to ClusterIP traffic when `endpoints` is empty: REJECT
   * when no endpoint is usable anywhere ("has no endpoints"), DROP when
   * some is but none on this node under policy Local ("has no local
   * endpoints"); null when `endpoints` is not empty.
   */
  readonly none: 'REJECT' | 'DROP' | null;
}

/** The endpoints and the fallback of ClusterIP traffic of `sp` on `node`; see {@link InternalEndpoints}. */
export function internalEndpoints(sp: Pick<ServicePort, 'endpoints' | 'internalTrafficPolicy'>, node: NodeInfo | undefined): InternalEndpoints {
  if (sp.internalTrafficPolicy !== 'Local') {
    const endpoints = clusterSet(sp.endpoints, node).set;
    return { policy: 'cluster', endpoints, none: endpoints.length > 0 ? null : 'REJECT' };
  }
  const { local, hasAnyEndpoints } = categorizeEndpoints(
    // No frontend of either family: the ClusterIP's family does not matter.
    { endpoints: sp.endpoints, internalTrafficPolicy: 'Local', externalTrafficPolicy: 'Cluster', frontends: NO_EXTERNAL_FRONTENDS, clusterIP: '' },
    node,
  );
  const endpoints = local ?? [];
  return { policy: 'local', endpoints, none: endpoints.length > 0 ? null : hasAnyEndpoints ? 'DROP' : 'REJECT' };
}

/** Frontends with nothing external: {@link internalEndpoints} asks for the local set of ClusterIP traffic alone. */
const NO_EXTERNAL_FRONTENDS: ServicePort['frontends'] = Object.freeze({ clusterIPs: [], externalIPs: [], loadBalancerIngress: [], loadBalancerSourceRanges: [] });

/** The endpoints programmed for ClusterIP traffic ({@link internalEndpoints}) over every service port of a snapshot: the count in sync results and logs. */
export function countServingEndpoints(snapshot: Snapshot): number {
  return new ServingEndpointCount().reset(snapshot);
}

/**
 * {@link countServingEndpoints} kept per service port, so that a partial
 * sync counts at the cost of its change rather than of every service port
 * (nftables mode's backend). A count taken for another node (any field
 * differs) is taken again whole, since the policy depends on the node.
 */
export class ServingEndpointCount {
  /** Service port key → its endpoints of ClusterIP traffic. */
  private readonly perPort = new Map<string, number>();
  private node: NodeInfo | undefined;
  private sum = 0;

  /** The count over every service port counted: what countServingEndpoints gives for the last snapshot. */
  get total(): number {
    return this.sum;
  }

  /** Count every service port of `snapshot`, forgetting the rest. Costs O(endpoints of the snapshot). @returns the total. */
  reset(snapshot: Snapshot): number {
    this.perPort.clear();
    this.sum = 0;
    this.node = snapshot.node;
    for (const [key, sp] of snapshot.services) this.put(key, internalEndpoints(sp, snapshot.node).endpoints.length);
    return this.sum;
  }

  /**
   * Count again the service ports `keys` of `snapshot` (one it lacks counts 0
   * and is forgotten); all of them when the node is not the last count's.
   * Costs O(endpoints of `keys`). @returns the total.
   */
  update(snapshot: Snapshot, keys: Iterable<string>): number {
    if (snapshot.node !== this.node && !isDeepStrictEqual(snapshot.node, this.node)) return this.reset(snapshot);
    for (const key of keys) {
      const sp = snapshot.services.get(key);
      this.put(key, sp ? internalEndpoints(sp, snapshot.node).endpoints.length : 0);
    }
    return this.sum;
  }

  private put(key: string, n: number): void {
    this.sum += n - (this.perPort.get(key) ?? 0);
    if (n > 0) this.perPort.set(key, n);
    else this.perPort.delete(key);
  }
}
