/**
 * The host's addresses IPVS mode's external frontends depend on
 * (frontends.ts NodeAddresses), read from os.networkInterfaces() as
 * kube-proxy's IPVS proxier reads them (pkg/proxy/ipvs/proxier.go
 * syncProxyRules: nodeAddressSet = GetAllLocalAddressesExcept(kube-ipvs0);
 * nodeIPs from it, or from `--nodeport-addresses`, without loopback); the
 * `--nodeport-addresses` choice is iptables mode's (iptables/node-ports.ts).
 * drover reads them once, when the backend starts.
 */
import { networkInterfaces } from 'node:os';
import { cidrContains, compareAddresses, isCanonicalIPv4, parseIP, type IPPrefix } from '../../model/addr.ts';
import type { IPFamily } from '../../model/types.ts';
import type { Interfaces } from '../../server/node-addresses.ts';
import type { NodeAddresses } from './frontends.ts';
import { DUMMY_INTERFACE } from '../../kernel/rtnetlink/link.ts';
import { nodePortIPs } from '../shared/kube-chains/node-ports.ts';

/**
 * The host's addresses of `family` (default IPv4), from `interfaces`
 * (default: this host's): `hostAddresses` every one of an interface other
 * than kube-ipvs0, `nodePortIPs` those that are not loopback (127.0.0.0/8,
 * ::1) nor IPv6 link-local (fe80::/10: kube-proxy's IPv6 proxier leaves them
 * out, netlink_linux.go GetLocalAddresses) and, when `cidrs`
 * (`--nodeport-addresses`) holds a CIDR of the family other than 0.0.0.0/0
 * or ::/0, lie in one of them (the other family's CIDRs are left to its
 * proxier). Both sorted, each address once. Pure apart from the default argument.
 */
export function nodeAddresses(cidrs: readonly IPPrefix[] | undefined, interfaces: Interfaces = networkInterfaces(), family: IPFamily = 'IPv4'): NodeAddresses {
  const host = new Set<string>();
  for (const [name, infos] of Object.entries(interfaces)) {
    if (name === DUMMY_INTERFACE) continue;
    for (const info of infos ?? []) {
      if (info.family !== family) continue;
      if (family === 'IPv4' ? isCanonicalIPv4(info.address) : parseIP(info.address)?.text === info.address) host.add(info.address);
    }
  }
  const hostAddresses = [...host].sort(compareAddresses);
  const unusable = family === 'IPv4' ? ['127.0.0.0/8'] : ['::1/128', 'fe80::/10'];
  // The same choice as iptables mode's (--nodeport-addresses, loopback left out).
  const picked = (nodePortIPs(cidrs, hostAddresses, family).ips ?? hostAddresses).filter((ip) => !unusable.some((c) => cidrContains(c, ip)));
  return { nodePortIPs: picked, hostAddresses };
}
