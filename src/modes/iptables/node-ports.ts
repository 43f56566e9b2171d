/**
 * Where NodePorts answer in iptables mode, from `--nodeport-addresses`, as
 * kube-proxy's IPv4 proxier reads it (pkg/proxy/util/nodeport_addresses.go
 * and syncProxyRules in pkg/proxy/iptables/proxier.go): no CIDR, no IPv4
 * CIDR, or 0.0.0.0/0 means every local address (the nodeports hooks match
 * `--dst-type LOCAL`, never 127.0.0.0/8); otherwise this node's IPv4
 * addresses in the IPv4 CIDRs, read once, one hook each. Loopback
 * addresses are left out and reported, as kube-proxy logs them when
 * localhost NodePorts are off; with them on (`--nodeport-localhost`,
 * localhost.ts), they get their hooks too.
 */
import { cidrContains, compareAddresses, isCanonicalIPv4, type IPPrefix } from '../../model/addr.ts';
import type { Logger } from '../../util/log.ts';
import { localAddresses } from './live.ts';
import { loadStaticRules, type StaticRuleset } from './static.ts';
import { localhostNodePortsOn } from './localhost.ts';

/** The NodePort addresses for `cidrs` among `local`. */
export interface NodePortIPs {
  /** The addresses NodePorts answer on, sorted; undefined: every local address but loopback. */
  readonly ips?: readonly string[];
  /** Loopback addresses the CIDRs hold, left out. */
  readonly loopback: readonly string[];
}

/**
 * Pick the NodePort addresses (see the module comment). Pure.
 * @param cidrs `--nodeport-addresses`; undefined or empty: every address
 * @param local the node's IPv4 addresses (live.ts localAddresses)
 * @param localhost localhost NodePorts are on (localhost.ts localhostNodePortsOn): loopback addresses are kept
 */
export function nodePortIPs(cidrs: readonly IPPrefix[] | undefined, local: Iterable<string>, localhost = false): NodePortIPs {
  const v4 = (cidrs ?? []).filter((c) => c.family === 4);
  if (v4.length === 0 || v4.some((c) => c.bits === 0)) return { loopback: [] };
  const picked = [...new Set(local)].filter((ip) => isCanonicalIPv4(ip) && v4.some((c) => cidrContains(c, ip))).sort(compareAddresses);
  if (localhost) return { ips: picked, loopback: [] };
  const isLoopback = (ip: string) => ip.startsWith('127.');
  return { ips: picked.filter((ip) => !isLoopback(ip)), loopback: picked.filter(isLoopback) };
}

/**
 * The NodePort addresses of namespace `netns` (undefined: this process's)
 * for `cidrs` (see {@link nodePortIPs}), with the node's IPv4 addresses
 * they were picked from (`ip -4 -o addr show`). Warns about left-out
 * loopback addresses and about CIDRs that hold no address of the node
 * (then no NodePort answers anywhere).
 * @throws Error when the addresses cannot be read.
 */
export async function readNodePortIPs(
  cidrs: readonly IPPrefix[] | undefined,
  netns: string | undefined,
  logger?: Logger,
  localhost = false,
): Promise<NodePortIPs & { readonly local: ReadonlySet<string> }> {
  const local = await localAddresses(netns);
  const picked = nodePortIPs(cidrs, local, localhost);
  if (picked.loopback.length > 0) logger?.warn({ addresses: picked.loopback }, '--nodeport-addresses holds loopback addresses; NodePorts are not served on them without --nodeport-localhost');
  if (picked.ips !== undefined && picked.ips.length === 0) logger?.warn({ nodeportAddresses: cidrs?.map((c) => c.text) }, 'no address of this node is in --nodeport-addresses: no NodePort is reachable');
  return { ...picked, local };
}

/**
 * iptables mode's static rules for `--nodeport-addresses` in namespace
 * `netns` (its addresses read only when CIDRs are given, {@link readNodePortIPs}),
 * with localhost NodePorts when `localhost` (`--nodeport-localhost`) is set
 * and the CIDRs allow them (localhost.ts localhostNodePortsOn).
 * @throws Error when the addresses cannot be read.
 */
export async function iptablesStatics(cidrs: readonly IPPrefix[] | undefined, netns: string | undefined, logger?: Logger, localhost = false): Promise<StaticRuleset> {
  const on = localhostNodePortsOn(localhost, cidrs);
  if (cidrs === undefined || cidrs.length === 0) return loadStaticRules(undefined, on);
  return loadStaticRules((await readNodePortIPs(cidrs, netns, logger, on)).ips, on);
}
