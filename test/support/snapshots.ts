/** Helpers that build model objects for tests, with kube-proxy test defaults. */
import { ipv4Frontends, type Endpoint, type ServicePort, type Snapshot } from '../../src/model/types.ts';

/** A ready endpoint "ip:port". */
export function ep(target: string, extra: Partial<Endpoint> = {}): Endpoint {
  const [ip, port] = target.split(':');
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
