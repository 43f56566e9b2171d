/**
 * The intermediate shapes between a raw manifest and the Snapshot: what
 * `parseObject` (parse.ts) produces from one object and `buildSnapshot`
 * (normalise.ts) consumes. Every value in them has been validated.
 */
import type { Endpoint, FamilyIP, LoadBalancerIngress, NodeAddress, Protocol, ServiceType, SessionAffinity, TrafficPolicy } from './types.ts';

/** One object read from a manifest file: `index` is its 0-based position in the file after List flattening. */
export interface ManifestObject {
  readonly file: string;
  readonly index: number;
  readonly raw: unknown;
}

/** Which API an object was written for. */
export type SourceAPI = 'kubernetes' | 'shepherd';

/** An endpoint address with its conditions: an {@link Endpoint} before a port is attached. */
export type EndpointAddress = Omit<Endpoint, 'port'>;

/**
 * A port an endpoint group serves: `name` is the Service port name it
 * belongs to ("" when unnamed), `port` the already-resolved target port.
 * (discovery.k8s.io/v1 EndpointPort; v1 EndpointPort.)
 */
export interface EndpointGroupPort {
  readonly name: string;
  readonly port: number;
  readonly protocol: Protocol;
}

/**
 * A set of addresses that all serve the same ports: one EndpointSlice, one
 * subset of a legacy Endpoints object, or one port of a Shepherd Service.
 */
export interface EndpointGroup {
  readonly ports: readonly EndpointGroupPort[];
  readonly addresses: readonly EndpointAddress[];
  /**
   * Address → the endpoint's `hostname` (a DNS-1123 label), for the
   * endpoints that have one; absent when none has. Only DNS reads it
   * (a headless Service's per-endpoint names, dns-names.ts).
   */
  readonly hostnames?: ReadonlyMap<string, string>;
}

/** One validated Service port. `index` is its position in `spec.ports` (for error messages). */
export interface ParsedServicePort {
  readonly index: number;
  /** Port name, "" when unnamed. */
  readonly name: string;
  readonly port: number;
  readonly protocol: Protocol;
  readonly nodePort?: number;
  /**
   * `targetPort`: the port number on the Pod, or the name of a container
   * port (resolved per Pod, pods.ts); `port` when the manifest has none.
   */
  readonly targetPort: number | string;
}

/** Fields common to every parsed object. `identity` is "Kind/namespace/name". */
interface ParsedBase {
  readonly identity: string;
  readonly source: SourceAPI;
  readonly file: string;
  readonly index: number;
  readonly namespace: string;
  readonly name: string;
}

/** A Service (Kubernetes v1 or Shepherd). */
export interface ParsedService extends ParsedBase {
  readonly kind: 'Service';
  readonly type: ServiceType | 'ExternalName';
  /**
   * The validated unicast IPv4 ClusterIP; undefined when the Service has
   * none: drover must allocate one when `clusterIPs` is empty too, and
   * none is needed for a single-stack IPv6 Service.
   */
  readonly clusterIP: string | undefined;
  /**
   * Every ClusterIP the manifest gives, primary first (`spec.clusterIPs`, or
   * `spec.clusterIP` alone); empty when drover must allocate one or the
   * service is not proxied.
   */
  readonly clusterIPs: readonly FamilyIP[];
  /** `spec.externalIPs`. */
  readonly externalIPs: readonly FamilyIP[];
  /** `status.loadBalancer.ingress[]` entries with an IP. */
  readonly loadBalancerIngress: readonly LoadBalancerIngress[];
  /** `spec.loadBalancerSourceRanges`, validated CIDRs. */
  readonly loadBalancerSourceRanges: readonly string[];
  /** `spec.healthCheckNodePort`, 1-65535. */
  readonly healthCheckNodePort?: number;
  /** Ports to proxy; empty for headless and ExternalName services. */
  readonly ports: readonly ParsedServicePort[];
  /** Why the service has no proxied ports despite declaring some (headless, ExternalName), for debug logs. */
  readonly unproxiedReason?: string;
  /**
   * What DNS alone serves of a headless or an ExternalName Service (never
   * proxied: `ports` is empty); absent for every other Service, and for an
   * ExternalName Service whose `spec.externalName` is not a valid name.
   */
  readonly dnsOnly?: ParsedDnsOnly;
  readonly sessionAffinity: SessionAffinity | null;
  readonly internalTrafficPolicy: TrafficPolicy;
  readonly externalTrafficPolicy: TrafficPolicy;
  /** Shepherd only: endpoints carried in the Service itself (one group per service port). */
  readonly inlineEndpoints?: readonly EndpointGroup[];
  /**
   * `spec.selector`: the labels a Pod needs (every key, equal value) for
   * the Service to take its endpoints from it (pods.ts); empty when absent
   * or `{}`, and then no Pod is selected.
   */
  readonly selector: ReadonlyMap<string, string>;
  /** `spec.publishNotReadyAddresses` (false for Shepherd): every selected Pod's endpoint is ready. */
  readonly publishNotReadyAddresses: boolean;
  /**
   * When the Service was created, ms since the epoch: `metadata.creationTimestamp`
   * (Shepherd: `metadata.created_at`); absent when the object has none.
   * It decides which of two Services keeps a frontend both claim (created.ts).
   */
  readonly createdAt?: number;
}

/**
 * The DNS-only part of a Service (dns-names.ts): a headless Service's
 * ports, which name its SRV records and pick its Pods' ports; or an
 * ExternalName Service's validated `spec.externalName`.
 */
export type ParsedDnsOnly =
  | { readonly kind: 'headless'; readonly ports: readonly ParsedServicePort[] }
  | { readonly kind: 'externalName'; readonly externalName: string };

/** A discovery.k8s.io/v1 EndpointSlice (IPv4 or IPv6; each address of its addressType), for Service `serviceName` in the same namespace. */
export interface ParsedEndpointSlice extends ParsedBase {
  readonly kind: 'EndpointSlice';
  readonly serviceName: string;
  readonly groups: readonly EndpointGroup[];
}

/** A legacy v1 Endpoints object; its name is the Service name. One group per subset. */
export interface ParsedEndpoints extends ParsedBase {
  readonly kind: 'Endpoints';
  readonly serviceName: string;
  readonly groups: readonly EndpointGroup[];
}

/**
 * A v1 Node (cluster-scoped: `namespace` is ""). `zone` is its
 * `topology.kubernetes.io/zone` label when set and not empty.
 */
export interface ParsedNode extends ParsedBase {
  readonly kind: 'Node';
  readonly zone?: string;
  /** Why the node is about to go away, when it is (see NodeInfo.leaving). */
  readonly leaving?: string;
  readonly addresses: readonly NodeAddress[];
  /** `spec.podCIDRs` (see NodeInfo.podCIDRs). */
  readonly podCIDRs: readonly string[];
}

/** A container port of a Pod, for a Service's named `targetPort`; `name` is undefined when the port has none. */
export interface ContainerPort {
  readonly name: string | undefined;
  readonly port: number;
  readonly protocol: Protocol;
}

/**
 * A Pod (Kubernetes v1 or Shepherd), reduced to what the EndpointSlice
 * controller reads of it (pods.ts derives the endpoints).
 */
export interface ParsedPod extends ParsedBase {
  readonly kind: 'Pod';
  readonly labels: ReadonlyMap<string, string>;
  /**
   * The IPv4 address an IPv4 EndpointSlice would carry: the first IPv4
   * entry of `status.podIPs` (`status.podIP` when that list is empty;
   * Shepherd `status.pod_ip`), canonical; undefined when the Pod has none.
   */
  readonly ip: string | undefined;
  /**
   * The IPv6 address an IPv6 EndpointSlice would carry: the first IPv6
   * entry of `status.podIPs` (or `status.podIP`), canonical; absent when
   * the Pod has none.
   */
  readonly ipv6?: string;
  /** `status.phase` is Succeeded or Failed: the Pod is done and never an endpoint. */
  readonly terminal: boolean;
  /** The Pod's Ready condition is True (Shepherd: phase Running). */
  readonly ready: boolean;
  /** `metadata.deletionTimestamp` is set (Shepherd Pods have none). */
  readonly terminating: boolean;
  /** `spec.nodeName` (Shepherd `spec.node_name`), when scheduled. */
  readonly nodeName?: string;
  /** Container ports in manifest order, then those of sidecar init containers (`restartPolicy: Always`), as FindPort looks them up. */
  readonly ports: readonly ContainerPort[];
  /** `spec.hostname` (a DNS-1123 label), Kubernetes Pods only: the endpoint's hostname when `subdomain` names the Service (pods.ts). */
  readonly hostname?: string;
  /** `spec.subdomain` (a DNS-1123 label), Kubernetes Pods only. */
  readonly subdomain?: string;
}

/** Any parsed object. */
export type ParsedObject = ParsedService | ParsedEndpointSlice | ParsedEndpoints | ParsedNode | ParsedPod;
