/**
 * The kernel settings IPVS mode needs, set in the network namespace drover
 * runs in (the net.* entries of /proc/sys belong to the namespace of the
 * process that opens them). As kube-proxy's IPVS proxier
 * (pkg/proxy/ipvs/proxier.go, NewProxier):
 *
 * - net.ipv4.vs.conntrack=1: IPVS keeps conntrack entries for its
 *   connections, which iptables' MASQUERADE (KUBE-POSTROUTING) needs;
 * - net.ipv4.vs.expire_nodest_conn=1: a connection whose real server was
 *   deleted is dropped on its next packet, instead of hanging;
 * - net.ipv4.vs.expire_quiescent_template=1: persistence templates of a
 *   weight-0 real server expire, so sticky clients move on;
 * - net.ipv4.ip_forward=1: the node forwards to the endpoints.
 *
 * The IPv6 family sets nothing ({@link IPVS_SYSCTLS_6} is empty): IPVS's own
 * settings live under net.ipv4.vs for both families (the IPv6 side of IPVS
 * reads the same netns_ipvs), and, as kube-proxy (whose NewProxier sets
 * net/ipv4/ip_forward only), drover leaves IPv6 forwarding to the node's
 * setup. The node must forward IPv6 (net.ipv6.conf.all.forwarding=1) for
 * IPv6 Services to reach endpoints on other hosts or in pod namespaces.
 * drover does not set it, because turning forwarding on stops router
 * advertisements from being processed on every interface with accept_ra=1
 * (ip-sysctl.rst, accept_ra): a node that takes its IPv6 default route from
 * router advertisements would lose it. Such a node sets accept_ra=2 on
 * those interfaces before it turns forwarding on.
 */

/** The settings drover applies, in the order it applies them. */
export const IPVS_SYSCTLS: readonly { readonly name: string; readonly value: string }[] = [
  { name: 'net.ipv4.vs.conntrack', value: '1' },
  { name: 'net.ipv4.vs.expire_nodest_conn', value: '1' },
  { name: 'net.ipv4.vs.expire_quiescent_template', value: '1' },
  { name: 'net.ipv4.ip_forward', value: '1' },
];

/** The settings the IPv6 family applies: none (see the module comment). */
export const IPVS_SYSCTLS_6: readonly { readonly name: string; readonly value: string }[] = [];

/** The settings a family's backend applies and checks: {@link IPVS_SYSCTLS} for IPv4, {@link IPVS_SYSCTLS_6} for IPv6. */
export function ipvsSysctls(family: 'IPv4' | 'IPv6'): readonly { readonly name: string; readonly value: string }[] {
  return family === 'IPv6' ? IPVS_SYSCTLS_6 : IPVS_SYSCTLS;
}

export { ProcSysctls, sysctlPath, type Sysctls } from '../shared/sysctls.ts';
import type { Sysctls } from '../shared/sysctls.ts';

/**
 * The first of `list` (default {@link IPVS_SYSCTLS}) that does not have its value (the cheap
 * drift check: four reads), as "name=value, not now"; undefined when all do.
 */
export async function sysctlDrift(sysctls: Sysctls, list = IPVS_SYSCTLS): Promise<string | undefined> {
  for (const { name, value } of list) {
    const now = await sysctls.read(name);
    if (now !== value) return `sysctl ${name} is ${now ?? 'missing'}, not ${value}`;
  }
  return undefined;
}

/**
 * Apply `list` (default {@link IPVS_SYSCTLS}): write each setting whose value differs.
 * @returns the names written (empty when all were set already)
 * @throws Error naming the setting when one is missing (no IPVS in this
 *   kernel) or cannot be written.
 */
export async function applyIpvsSysctls(sysctls: Sysctls, list = IPVS_SYSCTLS): Promise<string[]> {
  const written: string[] = [];
  for (const { name, value } of list) {
    const now = await sysctls.read(name);
    if (now === undefined) throw new Error(`sysctl ${name} does not exist (is the ip_vs module loaded?)`);
    if (now === value) continue;
    try {
      await sysctls.write(name, value);
    } catch (err) {
      throw new Error(`cannot set sysctl ${name}=${value}: ${(err as Error).message}`);
    }
    written.push(name);
  }
  return written;
}
