/**
 * drover's normalised desired state: what every source is turned into, and
 * the only input a backend's renderer sees.
 *
 * The shapes follow kube-proxy's `ServicePort` / `Endpoint` interfaces
 * (pkg/proxy/service.go, pkg/proxy/endpoint.go) and the node it runs on
 * (pkg/proxy/node.go). Every frontend a Service has is represented (both
 * ClusterIP families, NodePort, external IPs, LoadBalancer ingress). The
 * snapshot holds one view per IP family, as kube-proxy runs one proxier per
 * family (pkg/proxy/metaproxier): family.ts `familyView`.
 */

/** Transport protocol of a service port, upper-case as in the Kubernetes API. */
export type Protocol = 'TCP' | 'UDP' | 'SCTP';

/** The Service types drover knows. Only the ClusterIP part of each is programmed so far. */
export type ServiceType = 'ClusterIP' | 'NodePort' | 'LoadBalancer';

/**
 * One endpoint of one service port: a backend address and its target port
 * (already resolved by whoever wrote the EndpointSlice, or by drover for a
 * Pod its selector picks), with the
 * EndpointSlice conditions (discovery.k8s.io/v1 EndpointConditions).
 */
export interface Endpoint {
  /**
   * The address, validated and canonical: an IPv4 dotted quad, or IPv6 text
   * in RFC 5952 form ("fd00:10::5"). A service port of a family view
   * (family.ts) has endpoints of its family only.
   */
  readonly ip: string;
  /** Target port, 1-65535. */
  readonly port: number;
  /** Ready condition: serves new connections. */
  readonly ready: boolean;
  /** Serving condition: able to serve, regardless of termination. */
  readonly serving: boolean;
  /** Terminating condition. */
  readonly terminating: boolean;
  /** Node that hosts the endpoint, when the source says. */
  readonly nodeName?: string;
  /** Topology zone of the endpoint, when the source says. */
  readonly zone?: string;
  /**
   * `hints.forZones[].name`: the zones whose nodes should use this endpoint
   * (topology-aware routing, trafficDistribution PreferClose/PreferSameZone),
   * sorted, de-duplicated; absent when the slice gives no zone hint.
   */
  readonly zoneHints?: readonly string[];
  /**
   * `hints.forNodes[].name`: the nodes that should use this endpoint
   * (trafficDistribution PreferSameNode), sorted, de-duplicated; absent when
   * the slice gives no node hint.
   */
  readonly nodeHints?: readonly string[];
  /**
   * "namespace/name" of the Pod this endpoint was derived from (a Service
   * selector matched it, model/pods.ts); absent for an endpoint read from
   * an EndpointSlice, an Endpoints object or a Shepherd Service.
   */
  readonly pod?: string;
}

/** An IP family, as `spec.ipFamilies` spells it. */
export type IPFamily = 'IPv4' | 'IPv6';

/** One ClusterIP of a Service: a validated unicast IPv4 dotted quad or an IPv6 address. */
export interface FamilyIP {
  readonly family: IPFamily;
  readonly ip: string;
}

/**
 * One `status.loadBalancer.ingress[]` entry that has an `ip` (entries with
 * only a hostname are not proxied by kube-proxy and are left out).
 * `ipMode` VIP (the default) means traffic to the IP arrives unchanged and
 * the node proxies it; Proxy means the load balancer rewrites the
 * destination, so the node must not capture the IP (KEP-1860).
 */
export interface LoadBalancerIngress {
  readonly family: IPFamily;
  readonly ip: string;
  readonly ipMode: 'VIP' | 'Proxy';
}

/**
 * Every address and port a service port is reachable at
 * (pkg/proxy/service.go BaseServicePortInfo). Lists keep the order of the
 * manifest, duplicates removed.
 */
export interface Frontends {
  /**
   * The ClusterIPs, primary first (`spec.clusterIPs`, or `spec.clusterIP`
   * alone; a drover-allocated IPv4 address for Shepherd services). At most
   * one per family; the one of the view's family is {@link ServicePort.clusterIP}.
   */
  readonly clusterIPs: readonly FamilyIP[];
  /** NodePort, 1-65535, when the source assigned one. */
  readonly nodePort?: number;
  /** `spec.externalIPs`, validated unicast IPv4 or IPv6 addresses. */
  readonly externalIPs: readonly FamilyIP[];
  /** `status.loadBalancer.ingress[]` entries with an IP, of both ipModes (kube-proxy only ever programs VIP ones). */
  readonly loadBalancerIngress: readonly LoadBalancerIngress[];
  /**
   * `spec.loadBalancerSourceRanges`: the client CIDRs ("10.0.0.0/8",
   * "2001:db8::/32") allowed to reach the LoadBalancer ingress IPs; empty
   * means every client.
   */
  readonly loadBalancerSourceRanges: readonly string[];
  /**
   * `spec.healthCheckNodePort`, 1-65535: where kube-proxy answers the load
   * balancer's health checks for an externalTrafficPolicy Local
   * LoadBalancer Service; absent otherwise.
   */
  readonly healthCheckNodePort?: number;
}

/** `spec.internalTrafficPolicy` / `spec.externalTrafficPolicy`. */
export type TrafficPolicy = 'Cluster' | 'Local';

/** One `status.addresses[]` entry of a Node. For InternalIP and ExternalIP, `address` is a validated IPv4 or IPv6 address. */
export interface NodeAddress {
  readonly type: 'InternalIP' | 'ExternalIP' | 'Hostname' | 'InternalDNS' | 'ExternalDNS';
  readonly address: string;
}

/**
 * The node drover runs on, from a `v1 Node` object: what topology-aware
 * routing and the Local traffic policies compare endpoints with
 * (pkg/proxy/topology.go uses the node name and its topology labels).
 */
export interface NodeInfo {
  /** Node name (a DNS-1123 subdomain): endpoints whose nodeName equals it are local. */
  readonly name: string;
  /** The `topology.kubernetes.io/zone` label, when set and not empty. */
  readonly zone?: string;
  /** `status.addresses`, in manifest order. */
  readonly addresses: readonly NodeAddress[];
  /**
   * `spec.podCIDRs`: the pod CIDRs assigned to this node, canonical, at
   * most one per family, in the Node's order; absent when it has none
   * (or only its name is known). kube-proxy's `--detect-local-mode NodeCIDR` reads them.
   */
  readonly podCIDRs?: readonly string[];
  /**
   * Why the node is about to go away, when it is: its deletion has begun
   * (`metadata.deletionTimestamp`) or it carries the cluster autoscaler's
   * `ToBeDeletedByClusterAutoscaler` taint. `/healthz` then answers 503
   * (kube-proxy's nodeEligible, pkg/proxy/healthcheck/proxy_health.go).
   */
  readonly leaving?: string;
  /**
   * True when no Node object describes this node and only its name is
   * known (`--hostname-override`, or the host name for the Kubernetes
   * source): endpoints are still local by name (kube-proxy compares an
   * endpoint's nodeName with its hostname), but there is no zone and no
   * address, and the node counts as absent for `/healthz`.
   */
  readonly nameOnly?: true;
}

/** ClientIP session affinity; `timeoutSeconds` is in seconds (kube-proxy default 10800). */
export interface SessionAffinity {
  readonly timeoutSeconds: number;
}

/**
 * One port of one Service, the unit kube-proxy programs (one KUBE-SVC chain each).
 */
export interface ServicePort {
  /** ServicePortName string: "namespace/name:portName", or "namespace/name" when the port is unnamed. */
  readonly key: string;
  readonly namespace: string;
  readonly name: string;
  /** Port name; "" for the single unnamed port of a Service. */
  readonly portName: string;
  readonly type: ServiceType;
  /**
   * The ClusterIP of this service port's family view (family.ts): in
   * {@link Snapshot.services} the IPv4 entry of `frontends.clusterIPs`
   * (a dotted quad), in {@link Snapshot.ipv6Services} the IPv6 one.
   */
  readonly clusterIP: string;
  /** True when drover allocated the ClusterIP (Shepherd services without one). */
  readonly clusterIPAllocated: boolean;
  /** Service port, 1-65535. */
  readonly port: number;
  readonly protocol: Protocol;
  /** Every address and port this service port is reachable at, of both families (frontends.ts picks one family's). */
  readonly frontends: Frontends;
  /** ClientIP affinity, or null for none. */
  readonly sessionAffinity: SessionAffinity | null;
  /** Which endpoints serve traffic from inside the cluster (ClusterIP): all of them, or only this node's (policy.ts). */
  readonly internalTrafficPolicy: TrafficPolicy;
  /** Which endpoints serve traffic from outside (NodePort, external IPs, LoadBalancer): all of them, or only this node's. */
  readonly externalTrafficPolicy: TrafficPolicy;
  /**
   * Endpoints for this port, of the view's family only, sorted by ip then
   * port, de-duplicated by ip:port, with all their conditions: which of them serve is the endpoint
   * policy's decision (policy.ts), never a mode's.
   */
  readonly endpoints: readonly Endpoint[];
}

/**
 * The whole desired state at one moment: service ports by key, sorted by
 * key, per IP family, and the node drover runs on. Immutable once built.
 * Read one family with family.ts `familyView`.
 */
export interface Snapshot {
  /**
   * The IPv4 view: the service ports that have an IPv4 ClusterIP (given or
   * allocated), each with its IPv4 endpoints. A single-stack IPv6 Service is
   * not here; a dual-stack one is, whichever family is primary.
   */
  readonly services: ReadonlyMap<string, ServicePort>;
  /**
   * The IPv6 view: the service ports that have an IPv6 ClusterIP, each with
   * that ClusterIP and its IPv6 endpoints, under the same keys; absent when
   * no Service has one.
   */
  readonly ipv6Services?: ReadonlyMap<string, ServicePort>;
  /** This node; undefined when the source describes none (then no endpoint is local and zone hints are ignored). */
  readonly node?: NodeInfo;
  /**
   * The Services only DNS serves (headless and ExternalName ones), by
   * "namespace/name", sorted; absent when there are none. No mode reads
   * it: they are never proxied. src/dns gives them names.
   */
  readonly dnsOnly?: ReadonlyMap<string, DnsOnlyService>;
}

/**
 * One endpoint group of a headless Service (model/parsed.ts EndpointGroup
 * has this shape): the ports its endpoints serve, their addresses with the
 * Ready condition, and the `hostname` of those that have one (address →
 * a DNS-1123 label, model/dns-names.ts readHostname).
 */
export interface DnsEndpointGroup {
  readonly ports: ReadonlyArray<{ readonly name: string; readonly port: number; readonly protocol: Protocol }>;
  readonly addresses: ReadonlyArray<{ readonly ip: string; readonly ready: boolean }>;
  readonly hostnames?: ReadonlyMap<string, string>;
}

/**
 * A headless Service (`clusterIP: None`): its endpoint groups of both
 * families (its EndpointSlices, else its Endpoints subsets, else those of
 * the Pods its selector picks), for the names of the Kubernetes DNS
 * specification (schema 1.1.0) §2.4.
 */
export interface HeadlessService {
  readonly kind: 'headless';
  readonly namespace: string;
  readonly name: string;
  readonly groups: readonly DnsEndpointGroup[];
}

/** An ExternalName Service: `externalName` is a DNS-1123 subdomain, lower case, without a trailing dot (specification §2.5). */
export interface ExternalNameService {
  readonly kind: 'externalName';
  readonly namespace: string;
  readonly name: string;
  readonly externalName: string;
}

/** A Service only DNS serves (Snapshot.dnsOnly). */
export type DnsOnlyService = HeadlessService | ExternalNameService;

/** An empty snapshot, the state before the first source read. */
export const EMPTY_SNAPSHOT: Snapshot = { services: new Map() };

/**
 * The frontends of a service port reachable only at one IPv4 ClusterIP
 * (and `nodePort` when given, 1-65535): what a Shepherd Service or a
 * generated one has. `clusterIP` must already be validated.
 */
export function ipv4Frontends(clusterIP: string, nodePort?: number): Frontends {
  return Object.freeze({
    clusterIPs: Object.freeze([Object.freeze({ family: 'IPv4' as const, ip: clusterIP })]),
    ...(nodePort !== undefined ? { nodePort } : {}),
    externalIPs: Object.freeze([]),
    loadBalancerIngress: Object.freeze([]),
    loadBalancerSourceRanges: Object.freeze([]),
  });
}
