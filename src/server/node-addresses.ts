/**
 * Where the Services' health checks listen: kube-proxy's NodePortAddresses
 * (pkg/proxy/util/nodeport_addresses.go) as its IPv4 proxier reads
 * `--nodeport-addresses`, and newServiceHealthServer
 * (pkg/proxy/healthcheck/service_health.go), which listens on the
 * matching addresses of the node, or on every address.
 */
import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';
import { cidrContains, compareAddresses, parseIP, type IPAddress, type IPPrefix } from '../model/addr.ts';

/** The host's interfaces, as os.networkInterfaces() gives them. */
export type Interfaces = NodeJS.Dict<NetworkInterfaceInfo[]>;

/**
 * The addresses to listen on for `cidrs` (`--nodeport-addresses`):
 *   - none given, no IPv4 one (kube-proxy's NewNodePortAddresses then
 *     adds 0.0.0.0/0 for the family), or an IPv4 one that is 0.0.0.0/0:
 *     every address, `0.0.0.0`;
 *   - else the IPv4 addresses of the host's interfaces (read now, as
 *     kube-proxy reads them once at start) that lie in an IPv4 CIDR, in
 *     address order, each once; IPv6 CIDRs are left to an IPv6 proxy, as
 *     kube-proxy's IPv4 proxier leaves them. Empty when none matches: then
 *     no health check listens anywhere, as in kube-proxy.
 */
export function healthCheckAddresses(cidrs: readonly IPPrefix[] | undefined, interfaces: Interfaces = networkInterfaces()): IPAddress[] {
  if (cidrs === undefined || cidrs.length === 0) return [parseIP('0.0.0.0')!];
  const v4 = cidrs.filter((c) => c.family === 4);
  if (v4.length === 0 || v4.some((c) => c.bits === 0)) return [parseIP('0.0.0.0')!];
  const found = new Map<string, IPAddress>();
  for (const infos of Object.values(interfaces)) {
    for (const info of infos ?? []) {
      const ip = info.family === 'IPv4' ? parseIP(info.address) : undefined;
      if (ip !== undefined && v4.some((c) => cidrContains(c, ip))) found.set(ip.text, ip);
    }
  }
  return [...found.values()].sort(compareAddresses);
}
