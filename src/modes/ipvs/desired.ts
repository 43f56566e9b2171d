/**
 * Pure planning of IPVS mode's desired state from a Snapshot, the way
 * kube-proxy's IPVS proxier builds it (pkg/proxy/ipvs/proxier.go,
 * syncProxyRules and syncEndpoint):
 *
 * - one virtual server per service port with a ClusterIP:
 *   ClusterIP:port/protocol, scheduler `--ipvs-scheduler`, and for ClientIP
 *   session affinity the persistent flag with the affinity timeout (netmask
 *   /32, as kube-proxy);
 * - its real servers are the endpoints of ClusterIP traffic (model/policy.ts
 *   `internalEndpoints`: the cluster set, or this node's under
 *   internalTrafficPolicy Local), weight 1, masquerade (NAT) forwarding. A service
 *   port without serving endpoints keeps its virtual
 *   server with no real server, so that connections to it are refused;
 *   under internalTrafficPolicy Local with endpoints on other nodes only its
 *   "ClusterIP,proto:port" goes into KUBE-INTERNAL-NO-LOCAL and the
 *   ClusterIP gets no virtual server (the address stays bound): filter
 *   KUBE-PROXY-FIREWALL drops new connections from pods, and the node's own
 *   are marked in nat OUTPUT and dropped in filter KUBE-IPVS-OUT-FILTER, as
 *   kube-proxy's iptables mode drops both. An empty virtual server would
 *   have IPVS refuse the node's own connections at LOCAL_OUT, before any
 *   filter rule (kube-proxy's IPVS mode refuses everyone there). A virtual
 *   server that becomes withheld is kept while its TCP real servers drain
 *   (reconcile.ts, graceful.ts) and deleted with the last of them;
 * - KUBE-IPVS-IPS holds every address bound to kube-ipvs0, and
 *   KUBE-HEALTH-CHECK-NODE-PORT each health-check NodePort;
 * - every ClusterIP is bound as /32 to the dummy interface kube-ipvs0;
 * - the ipset KUBE-CLUSTER-IP holds "ClusterIP,proto:port" for each
 *   virtual server, and KUBE-LOOP-BACK "endpointIP,proto:port,endpointIP" for
 *   each real server (hairpin masquerade);
 * - the external frontends (NodePort, external IPs, LoadBalancer ingress
 *   IPs), each a virtual server of its own with its set entries and the
 *   endpoints of externalTrafficPolicy (frontends.ts).
 *
 * assemble.ts puts the service ports' shares together. No I/O here;
 * backend.ts compares the result with the kernel (reconcile.ts).
 */
import { categorizeEndpoints, externallyAccessible, internalEndpoints } from '../../model/policy.ts';
import type { Endpoint, NodeInfo, ServicePort } from '../../model/types.ts';
import {
  validateVirtualServer,
  type IpvsProtocol,
  type RealServer,
  type RealServerKey,
  type VirtualServer,
  type VirtualServerKey,
} from '../../kernel/ipvs/codec.ts';
import { externalFrontends, NO_NODE_ADDRESSES, type FrontendKind, type NodeAddresses, type SetEntry } from './frontends.ts';
import { needsHealthCheck } from '../../model/health-check.ts';
import { clusterIPEntry, HEALTH_CHECK_NODE_PORT_SET, INTERNAL_NO_LOCAL_SET, IPVS_IPS_SET, LOOP_BACK_SET, loopBackEntry, type OwnedSetName } from './ipset.ts';
import { ipEntry, portEntry } from '../../kernel/ipset/ipset.ts';
import { realServerKey, virtualServerKey } from '../../kernel/ipvs/keys.ts';

/** Weight of every real server drover adds (kube-proxy uses 1). */
export const REAL_SERVER_WEIGHT = 1;
/** Persistence netmask kube-proxy uses: one client address (/32). */
export const PERSISTENCE_NETMASK = 0xffffffff;
/** The same for an IPv6 virtual server, as the prefix length the kernel takes there (kube-proxy: 128). */
export const PERSISTENCE_PREFIX_6 = 128;

/** One virtual server drover wants, with its real servers. */
export interface DesiredVirtualServer {
  /** {@link virtualServerKey} of `vs`, e.g. "TCP/10.96.0.10:80". */
  readonly key: string;
  /** ServicePortName it serves, "ns/name:port". */
  readonly servicePort: string;
  readonly vs: VirtualServer;
  /** Real servers by {@link realServerKey} ("10.244.1.2:8080"), sorted. */
  readonly reals: ReadonlyMap<string, RealServer>;
  /** For a NodePort, external IP or LoadBalancer virtual server: which, and its entries in the frontend sets (frontends.ts); absent for a ClusterIP. */
  readonly frontend?: { readonly kind: FrontendKind; readonly entries: readonly SetEntry[] };
}

/** Everything IPVS mode programs besides the static iptables rules. */
export interface DesiredIpvsState {
  /** Virtual servers by key, sorted by key. */
  readonly virtualServers: ReadonlyMap<string, DesiredVirtualServer>;
  /**
   * ClusterIP virtual servers that are deliberately not programmed
   * (DesiredServicePort.withheld: internalTrafficPolicy Local with endpoints
   * on other nodes only), by key, sorted; their addresses and set entries
   * are in the other fields. For `drover chains`.
   */
  readonly withheld: ReadonlyMap<string, DesiredVirtualServer>;
  /** ClusterIPs to bind to kube-ipvs0 (as /32), sorted. */
  readonly addresses: readonly string[];
  /** Entries of KUBE-CLUSTER-IP ("10.96.0.10,tcp:80"), unordered (a set of 10,000 is not sorted on every sync). */
  readonly clusterIPSet: ReadonlySet<string>;
  /** Entries of KUBE-LOOP-BACK ("10.244.1.2,tcp:8080,10.244.1.2"), unordered. */
  readonly loopBackSet: ReadonlySet<string>;
  /** Entries of every one of drover's sets (ipset.ts IPVS_SETS), KUBE-CLUSTER-IP and KUBE-LOOP-BACK included, unordered. */
  readonly sets: Readonly<Record<OwnedSetName, ReadonlySet<string>>>;
  /**
   * Service ports left out of a virtual server because another service port
   * (first by ServicePortName) already has the same address:port/protocol:
   * a ClusterIP (the model refuses such input; a second line of defence), an
   * external IP, an ingress IP or a NodePort.
   */
  readonly conflicts: readonly string[];
}

/** Options that change the desired IPVS state. */
export interface IpvsPlanOptions {
  /** IPVS scheduler of every virtual server (`--ipvs-scheduler`), e.g. "rr". */
  readonly scheduler: string;
  /** The host's addresses for NodePorts and for binding external IPs (frontends.ts); default none: no NodePort virtual server. */
  readonly nodeAddresses?: NodeAddresses;
}

export { realServerKey, virtualServerKey } from '../../kernel/ipvs/keys.ts';

/** One service port's share of the desired state; a partial sync recomputes only the changed ones. */
export interface DesiredServicePort {
  readonly server: DesiredVirtualServer;
  /** Its KUBE-CLUSTER-IP entry. */
  readonly clusterIPEntry: string;
  /** Its KUBE-LOOP-BACK entries, one per real server, sorted. */
  readonly loopBackEntries: readonly string[];
  /**
   * Its other entries that go with the ClusterIP virtual server: the
   * ClusterIP in KUBE-IPVS-IPS, the health-check NodePort in
   * KUBE-HEALTH-CHECK-NODE-PORT (model/health-check.ts needsHealthCheck),
   * and "ClusterIP,proto:port" in KUBE-INTERNAL-NO-LOCAL when
   * internalTrafficPolicy Local finds endpoints on other nodes only.
   */
  readonly entries: readonly SetEntry[];
  /** The virtual servers of its external frontends, in kube-proxy's order (external IPs, ingress IPs, NodePort per node address). */
  readonly external: readonly DesiredExternalServer[];
  /**
   * True when `server` is not to be programmed: internalTrafficPolicy Local
   * finds endpoints on other nodes only, so new connections to the
   * ClusterIP are dropped by the rules (see the module comment). Its
   * address and set entries are still wanted.
   */
  readonly withheld: boolean;
}

/** One external frontend's virtual server and what goes with it (frontends.ts). */
export interface DesiredExternalServer {
  readonly kind: FrontendKind;
  readonly server: DesiredVirtualServer;
  /** True when its address is bound to kube-ipvs0. */
  readonly bind: boolean;
  /** Its entries in the frontend sets, then the KUBE-LOOP-BACK entries of its real servers, without duplicates. */
  readonly entries: readonly SetEntry[];
}

/**
 * The desired state of one service port on `node` (Snapshot.node; undefined
 * when the source describes none): its ClusterIP virtual server and, when it
 * is externally accessible, those of its NodePort, external IPs and
 * LoadBalancer ingress IPs (frontends.ts, on `opts.nodeAddresses`). Pure.
 * @throws IpvsValidationError for a virtual server IPVS would refuse;
 *   IpsetValidationError for a bad address, protocol or port (every real
 *   server's address and port go through its KUBE-LOOP-BACK entry). The model
 *   validates first; this is a second line of defence, and the codec checks
 *   every value again before it is encoded.
 */
export function desiredServicePort(sp: ServicePort, opts: IpvsPlanOptions, node?: NodeInfo): DesiredServicePort {
  const vs: VirtualServer = {
    protocol: sp.protocol as IpvsProtocol,
    address: sp.clusterIP,
    port: sp.port,
    scheduler: opts.scheduler,
    ...(sp.sessionAffinity ? { persistent: { timeoutSeconds: sp.sessionAffinity.timeoutSeconds } } : {}),
    netmask: sp.clusterIP.includes(':') ? PERSISTENCE_PREFIX_6 : PERSISTENCE_NETMASK,
  };
  validateVirtualServer(vs);
  const clusterEntry = clusterIPEntry(vs.address, vs.protocol, vs.port);
  const internal = internalEndpoints(sp, node);
  const cluster = realServers(sp.key, vs, internal.endpoints);
  const entries: SetEntry[] = [{ set: IPVS_IPS_SET, entry: ipEntry(vs.address) }];
  if (needsHealthCheck(sp)) entries.push({ set: HEALTH_CHECK_NODE_PORT_SET, entry: portEntry(sp.frontends.healthCheckNodePort!) });
  // Endpoints elsewhere but none here under internalTrafficPolicy Local: dropped, not refused.
  const withheld = internal.none === 'DROP';
  if (withheld) entries.push({ set: INTERNAL_NO_LOCAL_SET, entry: clusterEntry });
  const external: DesiredExternalServer[] = [];
  if (externallyAccessible(sp)) {
    const sets = categorizeEndpoints(sp, node);
    for (const fe of externalFrontends(sp, sets, vs, opts.nodeAddresses ?? NO_NODE_ADDRESSES, node)) {
      const { server, loopBack } = realServers(sp.key, fe.vs, fe.endpoints);
      const entries = [...fe.entries, ...loopBack.map((entry): SetEntry => ({ set: LOOP_BACK_SET, entry }))];
      external.push({ kind: fe.kind, server: { ...server, frontend: { kind: fe.kind, entries: fe.entries } }, bind: fe.bind, entries });
    }
  }
  return { server: cluster.server, clusterIPEntry: clusterEntry, loopBackEntries: cluster.loopBack, entries, external, withheld };
}

/**
 * The virtual server `vs` of service port `key` with one real server per
 * endpoint (weight 1, masquerade), sorted by key, and their KUBE-LOOP-BACK
 * entries, sorted and without duplicates.
 * @throws IpsetValidationError for an endpoint address or port that is not valid.
 */
function realServers(key: string, vs: VirtualServer, endpoints: readonly Endpoint[]): { server: DesiredVirtualServer; loopBack: string[] } {
  const reals: [string, RealServer, string][] = [];
  for (const ep of endpoints) {
    const entry = loopBackEntry(ep.ip, vs.protocol, ep.port);
    const rs: RealServer = { address: ep.ip, port: ep.port, weight: REAL_SERVER_WEIGHT, forwarding: 'masq' };
    reals.push([realServerKey(rs), rs, entry]);
  }
  reals.sort(([a], [b]) => compareText(a, b));
  return {
    server: { key: virtualServerKey(vs), servicePort: key, vs, reals: new Map(reals.map(([k, rs]) => [k, rs])) },
    loopBack: [...new Set(reals.map(([, , e]) => e))].sort(compareText),
  };
}

/** Plain code-unit order, for deterministic output. */
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

