/**
 * The addresses nftables mode programs NodePorts on, per family: this
 * node's IPv4 addresses but loopback (IPv6: its global ones), or with
 * `--nodeport-addresses` those in its CIDRs of the family (iptables mode's
 * choice, iptables/node-ports.ts nodePortIPs), read once when the backend
 * starts, with one `ip -4 -o addr show` (`ip -6 … scope global`) in the
 * namespace drover programs. Never those on kube-ipvs0: they are the
 * Services' addresses IPVS mode binds there, not the node's (kube-proxy's
 * IPVS proxier leaves them out the same way), and they go with IPVS mode's
 * state when a takeover moves the node to nftables mode.
 */
import { cidrContains, compareAddresses, type IPPrefix } from '../../model/addr.ts';
import type { IPFamily } from '../../model/types.ts';
import type { Logger } from '../../util/log.ts';
import { pickNodePortIPs } from '../shared/kube-chains/node-ports.ts';
import { localAddressesOnLink } from '../../kernel/iptables/live.ts';
import { DUMMY_INTERFACE } from '../../kernel/rtnetlink/link.ts';

/**
 * The NodePort addresses of `family` (default IPv4) of namespace `netns` (undefined: this process's) for `cidrs`, sorted.
 * @throws Error when the addresses cannot be read.
 */
export async function nftNodePortIPs(cidrs: readonly IPPrefix[] | undefined, netns: string | undefined, logger?: Logger, family: IPFamily = 'IPv4'): Promise<string[]> {
  // One `ip` for both: the node's addresses, and those on kube-ipvs0 (none without the link, the usual case).
  const { all, onLink: services } = await localAddressesOnLink(netns, family, DUMMY_INTERFACE);
  const { ips, local } = pickNodePortIPs(cidrs, all, logger, family);
  const picked = ips !== undefined ? [...ips] : [...local].filter((ip) => ip !== '::1' && !cidrContains('127.0.0.0/8', ip)).sort(compareAddresses);
  return picked.filter((ip) => !services.has(ip));
}
