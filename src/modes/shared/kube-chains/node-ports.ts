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
 *
 * The IPv6 family reads the same flag the same way, as kube-proxy's IPv6
 * proxier does (NewNodePortAddresses with its family): no IPv6 CIDR, or
 * ::/0, means every local IPv6 address but ::1 (static6.rules); otherwise
 * this node's IPv6 addresses in the IPv6 CIDRs, `-d IP/128` each. There
 * are no localhost NodePorts for IPv6.
 */
import { cidrContains, compareAddresses, parseIP, type IPPrefix } from '../../../model/addr.ts';
import type { IPFamily } from '../../../model/types.ts';
import type { Logger } from '../../../util/log.ts';
import { localAddresses } from '../../../kernel/iptables/live.ts';
import { loadStatic6Rules, loadStaticRules, type StaticRuleset } from './static.ts';
import { localhostNodePortsOn } from './localnet.ts';

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
 * @param local the node's addresses of `family` (live.ts localAddresses)
 * @param family the family picked for (default IPv4): only CIDRs and addresses of it count, as for kube-proxy's proxier of that family
 * @param localhost localhost NodePorts are on (localhost.ts localhostNodePortsOn): loopback addresses are kept (IPv4 only: route_localnet has no IPv6 counterpart)
 */
export function nodePortIPs(cidrs: readonly IPPrefix[] | undefined, local: Iterable<string>, family: IPFamily = 'IPv4', localhost = false): NodePortIPs {
  const want = family === 'IPv4' ? 4 : 6;
  const mine = (cidrs ?? []).filter((c) => c.family === want);
  if (mine.length === 0 || mine.some((c) => c.bits === 0)) return { loopback: [] };
  const picked = [...new Set(local)].filter((ip) => parseIP(ip)?.family === want && mine.some((c) => cidrContains(c, ip))).sort(compareAddresses);
  if (localhost && family === 'IPv4') return { ips: picked, loopback: [] };
  const isLoopback = (ip: string) => ip.startsWith('127.') || ip === '::1';
  return { ips: picked.filter((ip) => !isLoopback(ip)), loopback: picked.filter(isLoopback) };
}

/**
 * The NodePort addresses of namespace `netns` (undefined: this process's)
 * for `cidrs` (see {@link nodePortIPs}), with the node's addresses of
 * `family` (default IPv4) they were picked from (live.ts localAddresses). Warns about left-out
 * loopback addresses and about CIDRs that hold no address of the node
 * (then no NodePort answers anywhere).
 * @throws Error when the addresses cannot be read.
 */
export async function readNodePortIPs(
  cidrs: readonly IPPrefix[] | undefined,
  netns: string | undefined,
  logger?: Logger,
  family: IPFamily = 'IPv4',
  localhost = false,
): Promise<NodePortIPs & { readonly local: ReadonlySet<string> }> {
  return pickNodePortIPs(cidrs, await localAddresses(netns, family), logger, family, localhost);
}

/**
 * {@link readNodePortIPs} over `local`, the node's addresses of `family`
 * already read: the NodePort addresses for `cidrs`, with the same warnings.
 */
export function pickNodePortIPs(
  cidrs: readonly IPPrefix[] | undefined,
  local: ReadonlySet<string>,
  logger?: Logger,
  family: IPFamily = 'IPv4',
  localhost = false,
): NodePortIPs & { readonly local: ReadonlySet<string> } {
  const picked = nodePortIPs(cidrs, local, family, localhost);
  const of = family === 'IPv4' ? '' : ` (${family})`;
  if (picked.loopback.length > 0) logger?.warn({ addresses: picked.loopback }, family === 'IPv4' ? '--nodeport-addresses holds loopback addresses; NodePorts are not served on them without --nodeport-localhost' : `--nodeport-addresses holds loopback addresses${of}; NodePorts are not served on them`);
  if (picked.ips !== undefined && picked.ips.length === 0) logger?.warn({ nodeportAddresses: cidrs?.map((c) => c.text) }, `no address of this node is in --nodeport-addresses${of}: no NodePort is reachable`);
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
  return loadStaticRules((await readNodePortIPs(cidrs, netns, logger, 'IPv4', on)).ips, on);
}

/**
 * iptables mode's IPv6 static rules for `--nodeport-addresses` in
 * namespace `netns` (its IPv6 addresses read only when an IPv6 CIDR is
 * given, {@link readNodePortIPs}; see the module comment). When they
 * cannot be read, IPv6 gets no NodePort hook and a warning, and IPv4 is
 * not held back (one family's failure never stops the other, as kube-proxy
 * issue 73157 asks; nftables mode's node-ports.ts does the same).
 */
export async function iptablesStatics6(cidrs: readonly IPPrefix[] | undefined, netns: string | undefined, logger?: Logger): Promise<StaticRuleset> {
  if (!(cidrs ?? []).some((c) => c.family === 6)) return loadStatic6Rules();
  const picked = await readNodePortIPs(cidrs, netns, logger, 'IPv6').catch((err: Error) => {
    logger?.warn({ err: err.message }, "cannot read this node's IPv6 addresses for --nodeport-addresses: IPv6 NodePorts are not served");
    return { ips: [] as readonly string[] };
  });
  return loadStatic6Rules(picked.ips);
}
