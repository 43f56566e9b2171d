/**
 * The addresses nftables mode programs NodePorts on: this node's IPv4
 * addresses but loopback, or with `--nodeport-addresses` those in its
 * CIDRs (iptables mode's choice, iptables/node-ports.ts nodePortIPs), read
 * once when the backend starts, with `ip -4 -o addr show` in the namespace
 * drover programs.
 */
import { cidrContains, compareAddresses, type IPPrefix } from '../../model/addr.ts';
import type { Logger } from '../../util/log.ts';
import { readNodePortIPs } from '../iptables/node-ports.ts';

/**
 * The NodePort addresses of namespace `netns` (undefined: this process's) for `cidrs`, sorted.
 * @throws Error when the addresses cannot be read.
 */
export async function nftNodePortIPs(cidrs: readonly IPPrefix[] | undefined, netns: string | undefined, logger?: Logger): Promise<string[]> {
  const { ips, local } = await readNodePortIPs(cidrs, netns, logger);
  return ips !== undefined ? [...ips] : [...local].filter((ip) => !cidrContains('127.0.0.0/8', ip)).sort(compareAddresses);
}
