/**
 * The external frontends of a service port as kube-proxy's proxier of one
 * IP family sees them (pkg/proxy/service.go newBaseServiceInfo filters
 * each list by the proxier's family), for every mode: a family's ruleset
 * programs the addresses and ranges of its family only, and leaves the
 * others to the other family's. frontend-index.ts expands a service port
 * into its frontends with these; modes read the expansion, not these.
 */
import { cidrContains, isCanonicalIPv4, parseCIDR, type IPPrefix } from './addr.ts';
import type { Frontends, IPFamily, NodeInfo } from './types.ts';

/** The `spec.externalIPs` of `family`, in manifest order. */
export function externalIPsOf(f: Pick<Frontends, 'externalIPs'>, family: IPFamily): string[] {
  return f.externalIPs.filter((e) => e.family === family).map((e) => e.ip);
}

/** The LoadBalancer ingress IPs of `family` in VIP mode (Proxy-mode ones are the load balancer's, KEP-1860), in order. */
export function loadBalancerIPsOf(f: Pick<Frontends, 'loadBalancerIngress'>, family: IPFamily): string[] {
  return f.loadBalancerIngress.filter((i) => i.family === family && i.ipMode === 'VIP').map((i) => i.ip);
}

/**
 * The `loadBalancerSourceRanges` of `family`, host bits cleared
 * ("10.1.2.3/16" → 10.1.0.0/16), those of the other family left out, and
 * none at all, meaning every client, when one is 0.0.0.0/0 or ::/0
 * (kube-proxy's IsZeroCIDR). A range that does not parse is left out (the
 * model validates them first).
 */
export function sourceRangesOf(ranges: readonly string[], family: IPFamily): IPPrefix[] {
  const want = family === 'IPv4' ? 4 : 6;
  const out: IPPrefix[] = [];
  for (const text of ranges) {
    const parsed = parseCIDR(text);
    if (parsed === undefined || parsed.prefix.family !== want) continue;
    if (parsed.prefix.bits === 0) return [];
    out.push(parsed.prefix);
  }
  return out;
}

/** The IPv4 `loadBalancerSourceRanges` ({@link sourceRangesOf}). */
export const ipv4SourceRanges = (ranges: readonly string[]): IPPrefix[] => sourceRangesOf(ranges, 'IPv4');

/**
 * True when one of `ranges` holds this node's first InternalIP of
 * `family` (default IPv4): then the LoadBalancer IPs themselves are
 * allowed as sources too, for a VIP that loops back from the node
 * (kube-proxy's allowFromNode).
 */
export function rangesHoldNode(ranges: readonly IPPrefix[], node: NodeInfo | undefined, family: IPFamily = 'IPv4'): boolean {
  const ofFamily = family === 'IPv4' ? isCanonicalIPv4 : (a: string) => a.includes(':');
  const nodeIP = node?.addresses.find((a) => a.type === 'InternalIP' && ofFamily(a.address))?.address;
  return nodeIP !== undefined && ranges.some((r) => cidrContains(r, nodeIP));
}
