/** Helpers that build model objects for tests, with kube-proxy test defaults. */
import { ipv4Frontends, type Endpoint, type ServicePort, type Snapshot } from '../../src/model/types.ts';

/** A ready endpoint "ip:port", or "[ipv6]:port". */
export function ep(target: string, extra: Partial<Endpoint> = {}): Endpoint {
  const v6 = /^\[([^\]]+)\]:(\d+)$/.exec(target);
  const [ip, port] = v6 ? [v6[1], v6[2]] : target.split(':');
  return { ip: ip!, port: Number(port), ready: true, serving: true, terminating: false, ...extra };
}

/** A ClusterIP service port keyed "ns/name:portName". */
export function sp(key: string, clusterIP: string, port: number, endpoints: Endpoint[], extra: Partial<ServicePort> = {}): ServicePort {
  const m = /^([^/]+)\/([^:]+)(?::(.*))?$/.exec(key)!;
  return {
    key,
    namespace: m[1]!,
    name: m[2]!,
    portName: m[3] ?? '',
    type: 'ClusterIP',
    clusterIP,
    clusterIPAllocated: false,
    frontends: ipv4Frontends(clusterIP),
    port,
    protocol: 'TCP',
    sessionAffinity: null,
    internalTrafficPolicy: 'Cluster',
    externalTrafficPolicy: 'Cluster',
    endpoints,
    ...extra,
  };
}

/** A snapshot of service ports (sorted by key). */
export function snap(...ports: ServicePort[]): Snapshot {
  return { services: new Map([...ports].sort((a, b) => (a.key < b.key ? -1 : 1)).map((p) => [p.key, p])) };
}

/**
 * A dual-stack snapshot: `ipv4` as its services, `ipv6` (their ClusterIP
 * and endpoints IPv6 ones) as its IPv6 view, as normalise.ts builds it.
 */
export function dualSnap(ipv4: ServicePort[], ipv6: ServicePort[]): Snapshot {
  return { ...snap(...ipv4), ipv6Services: snap(...ipv6).services };
}
