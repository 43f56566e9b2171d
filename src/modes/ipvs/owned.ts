/**
 * Which virtual servers belong to IPVS mode's layout (kube-proxy's IPVS
 * proxier's, which drover's IPVS mode writes): the ones a sync may delete
 * when unwanted, that `cleanup` removes, and that a takeover drains. Pure.
 */
import { cidrContains } from '../../model/addr.ts';

/** Where the layout's virtual servers are: the addresses that make one IPVS mode's. */
export interface LayoutScope {
  /** The service CIDR (`--service-cidr`), when this family has one. */
  readonly serviceCIDR?: string;
  /** The addresses bound to kube-ipvs0 (ClusterIPs, external and LoadBalancer IPs). */
  readonly bound: ReadonlySet<string>;
  /** The host's own addresses (NodePorts, external IPs the host has). */
  readonly host: ReadonlySet<string>;
}

/**
 * True when a virtual server at `address` is IPVS mode's: in the service
 * CIDR, bound to kube-ipvs0, or one of the host's own addresses. Any other
 * one is another program's, and is left alone.
 */
export function inLayout(address: string, scope: LayoutScope): boolean {
  return (scope.serviceCIDR !== undefined && cidrContains(scope.serviceCIDR, address)) || scope.bound.has(address) || scope.host.has(address);
}
