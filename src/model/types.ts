/**
 * drover's normalised desired state: what every source is turned into, and
 * the only input a backend's renderer sees.
 *
 * The shapes follow kube-proxy's `ServicePort` / `Endpoint` interfaces
 * (pkg/proxy/service.go, pkg/proxy/endpoint.go), reduced to IPv4.
 */

/** Transport protocol of a service port, upper-case as in the Kubernetes API. */
export type Protocol = 'TCP' | 'UDP' | 'SCTP';

/** The Service types drover knows. Only the ClusterIP part of each is programmed so far. */
export type ServiceType = 'ClusterIP' | 'NodePort' | 'LoadBalancer';

/**
 * One endpoint of one service port: a backend address and its target port
 * (already resolved by whoever wrote the EndpointSlice), with the
 * EndpointSlice conditions (discovery.k8s.io/v1 EndpointConditions).
 */
export interface Endpoint {
  /** Dotted-quad IPv4 address, validated. */
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
  /** Dotted-quad IPv4 ClusterIP, validated. */
  readonly clusterIP: string;
  /** True when drover allocated the ClusterIP (Shepherd services without one). */
  readonly clusterIPAllocated: boolean;
  /** Service port, 1-65535. */
  readonly port: number;
  readonly protocol: Protocol;
  /** NodePort, when the source assigned one (not programmed yet). */
  readonly nodePort?: number;
  /** ClientIP affinity, or null for none. */
  readonly sessionAffinity: SessionAffinity | null;
  readonly internalTrafficPolicy: 'Cluster' | 'Local';
  readonly externalTrafficPolicy: 'Cluster' | 'Local';
  /** Endpoints for this port, sorted by ip then port, de-duplicated by ip:port. */
  readonly endpoints: readonly Endpoint[];
}

/**
 * The whole desired state at one moment: service ports by key, sorted by key.
 * Immutable once built.
 */
export interface Snapshot {
  readonly services: ReadonlyMap<string, ServicePort>;
}

/** An empty snapshot, the state before the first source read. */
export const EMPTY_SNAPSHOT: Snapshot = { services: new Map() };
