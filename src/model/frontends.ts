/**
 * The IPv4 external frontends of a service port as kube-proxy's IPv4
 * proxier sees them (pkg/proxy/service.go newBaseServiceInfo), for every
 * mode: the modes program IPv4 only, and leave IPv6 addresses and ranges
 * to an IPv6 proxier.
 */
import { cidrContains, isCanonicalIPv4, parseCIDR, type IPPrefix } from './addr.ts';
import type { Frontends, NodeInfo } from './types.ts';

/** The IPv4 `spec.externalIPs`, in manifest order. */
export function ipv4ExternalIPs(f: Pick<Frontends, 'externalIPs'>): string[] {
  return f.externalIPs.filter((e) => e.family === 'IPv4').map((e) => e.ip);
}

/** The IPv4 LoadBalancer ingress IPs in VIP mode (Proxy-mode ones are the load balancer's, KEP-1860), in order. */
export function ipv4LoadBalancerIPs(f: Pick<Frontends, 'loadBalancerIngress'>): string[] {
  return f.loadBalancerIngress.filter((i) => i.family === 'IPv4' && i.ipMode === 'VIP').map((i) => i.ip);
}

/**
 * The IPv4 `loadBalancerSourceRanges`, host bits cleared ("10.1.2.3/16" →
 * 10.1.0.0/16), IPv6 ones left out, and none at all, meaning every client,
 * when one is 0.0.0.0/0 (kube-proxy's IsZeroCIDR). A range that does not
 * parse is left out (the model validates them first).
 */
export function ipv4SourceRanges(ranges: readonly string[]): IPPrefix[] {
  const out: IPPrefix[] = [];
  for (const text of ranges) {
    const parsed = parseCIDR(text);
    if (parsed === undefined || parsed.prefix.family !== 4) continue;
    if (parsed.prefix.bits === 0) return [];
    out.push(parsed.prefix);
  }
  return out;
}

/**
 * True when one of `ranges` holds this node's first IPv4 InternalIP: then
 * the LoadBalancer IPs themselves are allowed as sources too, for a VIP
 * that loops back from the node (kube-proxy's allowFromNode).
 */
export function rangesHoldNode(ranges: readonly IPPrefix[], node: NodeInfo | undefined): boolean {
  const nodeIP = node?.addresses.find((a) => a.type === 'InternalIP' && isCanonicalIPv4(a.address))?.address;
  return nodeIP !== undefined && ranges.some((r) => cidrContains(r, nodeIP));
}
