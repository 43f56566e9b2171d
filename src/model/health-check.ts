/**
 * Which Services get a health-check NodePort on this node, and what it
 * reports: kube-proxy's ServicePortMap.HealthCheckNodePorts
 * (pkg/proxy/serviceport.go, servicechangetracker.go) and
 * EndpointsMap.LocalReadyEndpoints (pkg/proxy/endpointsmap.go), for
 * server/service-health.ts.
 */
import { familyView, IP_FAMILIES } from './family.ts';
import { localReadyEndpoints } from './policy.ts';
import type { ServicePort, Snapshot } from './types.ts';

/** One Service whose load balancer checks this node. */
export interface HealthCheckService {
  readonly namespace: string;
  readonly name: string;
  /** `spec.healthCheckNodePort`, 1-65535. */
  readonly port: number;
  /**
   * This node's ready endpoints over every port of the Service, counted by
   * IP (an endpoint serving two ports is one), as kube-proxy counts them.
   */
  readonly localEndpoints: number;
}

/**
 * True when kube-proxy serves a health check for the Service of `sp`
 * (pkg/api/v1/service NeedsHealthCheck): a LoadBalancer Service with
 * externalTrafficPolicy Local and a `spec.healthCheckNodePort`. A
 * healthCheckNodePort on any other Service is ignored, as kube-proxy
 * ignores it.
 */
export function needsHealthCheck(sp: Pick<ServicePort, 'type' | 'externalTrafficPolicy' | 'frontends'>): boolean {
  return sp.type === 'LoadBalancer' && sp.externalTrafficPolicy === 'Local' && sp.frontends.healthCheckNodePort !== undefined;
}

/**
 * The health checks `snapshot` asks for, by Service ("namespace/name"),
 * in the snapshot's order, IPv4 view first (family.ts). Locality is the
 * endpoint policy's (policy.ts localReadyEndpoints). A Service's local
 * endpoints are those of one family: kube-proxy runs a health check server
 * per family (pkg/proxy/iptables/proxier.go NewDualStackProxier), each
 * counting its own; drover serves one per port, so a dual-stack Service
 * reports its IPv4 endpoints and a single-stack IPv6 one its IPv6
 * endpoints. O(service ports + endpoints).
 */
export function healthCheckServices(snapshot: Snapshot): Map<string, HealthCheckService> {
  const ips = new Map<string, { namespace: string; name: string; port: number; family: string; ips: Set<string> }>();
  for (const family of IP_FAMILIES) {
    const view = familyView(snapshot, family);
    for (const sp of view.services.values()) {
      if (!needsHealthCheck(sp)) continue;
      const key = `${sp.namespace}/${sp.name}`;
      let entry = ips.get(key);
      if (entry === undefined) {
        entry = { namespace: sp.namespace, name: sp.name, port: sp.frontends.healthCheckNodePort!, family, ips: new Set() };
        ips.set(key, entry);
      } else if (entry.family !== family) continue;
      for (const ep of localReadyEndpoints(sp, view.node)) entry.ips.add(ep.ip);
    }
  }
  const out = new Map<string, HealthCheckService>();
  for (const [key, e] of ips) out.set(key, { namespace: e.namespace, name: e.name, port: e.port, localEndpoints: e.ips.size });
  return out;
}
