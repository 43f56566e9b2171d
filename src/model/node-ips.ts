/**
 * This node's primary IPs, as kube-proxy finds them: the Node's addresses
 * (component-helpers node/util GetNodeHostIPs: InternalIPs first, then
 * ExternalIPs; the first address, then the first of the other family),
 * each family overridden by `bindAddress` when it gives an address of it
 * (cmd/kube-proxy/app/server.go detectNodeIPs). `nodePortAddresses:
 * [primary]` is these, as /32 and /128 CIDRs, loopback left out
 * (server.go newProxyServer).
 */
import { parseCIDR, parseIP, type IPPrefix } from './addr.ts';
import type { NodeInfo } from './types.ts';

/** One primary IP per family; a family the node has no address of is absent. */
export interface PrimaryIPs {
  readonly ipv4?: string;
  readonly ipv6?: string;
}

/**
 * The primary IPs of `node` (see the module comment), with the addresses
 * of `bindAddress` (at most one per family, unspecified ones already left
 * out) taking their family's place.
 */
export function primaryNodeIPs(node: NodeInfo | undefined, bindAddress: readonly string[] = []): PrimaryIPs {
  const ordered = [...(node?.addresses ?? []).filter((a) => a.type === 'InternalIP'), ...(node?.addresses ?? []).filter((a) => a.type === 'ExternalIP')];
  const family = (ip: string) => parseIP(ip)?.family;
  const firstOf = (f: 4 | 6, list: readonly string[]) => list.find((ip) => family(ip) === f);
  const host = ordered.map((a) => a.address);
  const first = host[0];
  const picked = first === undefined ? [] : [first, ...(firstOf(family(first) === 4 ? 6 : 4, host) ?? [])];
  const ipv4 = firstOf(4, bindAddress) ?? firstOf(4, picked);
  const ipv6 = firstOf(6, bindAddress) ?? firstOf(6, picked);
  return { ...(ipv4 !== undefined ? { ipv4 } : {}), ...(ipv6 !== undefined ? { ipv6 } : {}) };
}

/** `nodePortAddresses: [primary]` for `ips`: IP/32 and IP/128 of each non-loopback primary IP, IPv4 first. */
export function primaryNodePortCIDRs(ips: PrimaryIPs): IPPrefix[] {
  const out: IPPrefix[] = [];
  if (ips.ipv4 !== undefined && !ips.ipv4.startsWith('127.')) out.push(parseCIDR(`${ips.ipv4}/32`)!.prefix);
  if (ips.ipv6 !== undefined && ips.ipv6 !== '::1') out.push(parseCIDR(`${ips.ipv6}/128`)!.prefix);
  return out;
}
