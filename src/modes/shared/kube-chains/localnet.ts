/**
 * The anti-martian rule of kube-proxy's iptables layout (filter
 * KUBE-FIREWALL, CVE-2020-8558) and the test of whether localhost NodePorts
 * are on: what the static rules and the node-port addresses of both
 * iptables and IPVS mode need of `--nodeport-localhost` (the flag itself
 * and route_localnet are iptables mode's, modes/iptables/localhost.ts).
 */
import { cidrContains, type IPPrefix } from '../../../model/addr.ts';

/** The filter chain of the anti-martian rule (kube-proxy's and kubelet's name). */
export const LOCALNET_FIREWALL_CHAIN = 'KUBE-FIREWALL';

/** The comment of the anti-martian rule, and of drover's jumps to its chain. */
export const LOCALNET_FIREWALL_COMMENT = 'block incoming localnet connections';

/** The anti-martian rule of CVE-2020-8558, as iptables-save prints it. */
export const LOCALNET_FIREWALL_RULE = `! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "${LOCALNET_FIREWALL_COMMENT}" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP`;

/** drover's jump to {@link LOCALNET_FIREWALL_CHAIN} from INPUT and OUTPUT, as iptables-save prints it (kube-proxy's and kubelet's carry no comment). */
export const LOCALNET_FIREWALL_JUMP = `-m comment --comment "${LOCALNET_FIREWALL_COMMENT}" -j ${LOCALNET_FIREWALL_CHAIN}`;

/**
 * Whether localhost NodePorts are on: the flag, and `--nodeport-addresses`
 * empty, 0.0.0.0/0 or with an IPv4 CIDR that overlaps 127.0.0.0/8 (only
 * IPv6 CIDRs count as empty), as kube-proxy's NewProxier turns
 * localhostNodePorts off unless nodePortAddresses.ContainsIPv4Loopback().
 * Pure.
 */
export function localhostNodePortsOn(flag: boolean | undefined, cidrs: readonly IPPrefix[] | undefined): boolean {
  if (flag !== true) return false;
  const v4 = (cidrs ?? []).filter((c) => c.family === 4);
  return v4.length === 0 || v4.some((c) => cidrContains(c, '127.0.0.0') || cidrContains('127.0.0.0/8', addressOf(c)));
}

/** The first address of an IPv4 prefix, dotted. */
function addressOf(c: IPPrefix): string {
  return c.text.slice(0, c.text.indexOf('/'));
}
