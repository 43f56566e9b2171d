/**
 * Which address `drover run --dns-intercept-cluster-dns` intercepts: the
 * cluster DNS Service's ClusterIP, whose queries on port 53 drover then
 * answers itself, as NodeLocal DNSCache does when its `-localip` lists the
 * kube-dns ClusterIP beside 169.254.20.10 (k8s.io/dns cmd/node-cache: the
 * address bound on its dummy link, and raw NOTRACK for port 53 to and from
 * it, so kube-proxy's DNAT, which needs a conntrack entry, never applies).
 *
 * The address is `--cluster-dns` (the kubelet's name for the address its
 * Pods use as nameserver), or else the ClusterIP of the Service
 * kube-system/kube-dns, the name CoreDNS's Service keeps in kubeadm and in
 * NodeLocal DNSCache's manifest. Either way it must be, in the source
 * read at start, the ClusterIP of a Service with port 53, of the family of
 * `--dns-address` (one server socket family, one iptables family), and no
 * upstream may be it (forwarding to it would reach drover again). Pure.
 */
import { CLUSTER_DNS_SERVICE, type Upstream } from '../config/dns.ts';
import { UsageError } from '../errors.ts';
import { parseIP } from '../model/addr.ts';
import type { ServicePort, Snapshot } from '../model/types.ts';

/** The port whose queries are intercepted: where a Pod's resolver sends them (resolv.conf(5) has no port). */
export const INTERCEPT_PORT = 53;

/** What {@link interceptedAddress} is given. */
export interface InterceptRequest {
  /** `--dns-address`, canonical. */
  readonly dnsAddress: string;
  /** `--cluster-dns`, canonical; absent: {@link CLUSTER_DNS_SERVICE}'s ClusterIP. */
  readonly clusterDns?: string;
  /** `--dns-upstream`, when given. */
  readonly dnsUpstream?: readonly Upstream[];
}

/** `IPv4` or `IPv6`, for the messages. */
function familyName(address: string): string {
  return parseIP(address)?.family === 6 ? 'IPv6' : 'IPv4';
}

/**
 * The ClusterIP to intercept, checked against `snapshot` (the source's
 * first read).
 * @throws UsageError, one line naming the flag, when the address is not a
 * ClusterIP of a Service with port 53 in the snapshot, is of the other
 * family than `--dns-address` or is it, or is one of the upstreams.
 */
export function interceptedAddress(snapshot: Snapshot, req: InterceptRequest): string {
  const v6 = parseIP(req.dnsAddress)?.family === 6;
  const view: Iterable<ServicePort> = (v6 ? snapshot.ipv6Services : snapshot.services)?.values() ?? [];
  const fam = familyName(req.dnsAddress);
  let address: string;
  let ports: ServicePort[];
  if (req.clusterDns !== undefined) {
    address = req.clusterDns;
    const flag = `--cluster-dns ${address}`;
    if (familyName(address) !== fam) throw new UsageError(`${flag} is ${familyName(address)} and --dns-address ${req.dnsAddress} is ${fam}: the intercepted ClusterIP must be of the DNS address's family`);
    if (address === req.dnsAddress) throw new UsageError(`${flag} is --dns-address itself; name the cluster DNS Service's ClusterIP`);
    ports = [...view].filter((sp) => sp.clusterIP === address);
    if (ports.length === 0) throw new UsageError(`${flag} is not the ClusterIP of a Service in the source`);
  } else {
    const { namespace, name } = CLUSTER_DNS_SERVICE;
    ports = [...view].filter((sp) => sp.namespace === namespace && sp.name === name);
    if (ports.length === 0) {
      throw new UsageError(`--dns-intercept-cluster-dns: the source has no Service ${namespace}/${name} with an ${fam} ClusterIP; name the cluster DNS ClusterIP with --cluster-dns`);
    }
    address = ports[0]!.clusterIP;
  }
  if (!ports.some((sp) => sp.port === INTERCEPT_PORT)) {
    const svc = `${ports[0]!.namespace}/${ports[0]!.name}`;
    throw new UsageError(`${req.clusterDns !== undefined ? `--cluster-dns ${address}` : '--dns-intercept-cluster-dns'}: the Service ${svc} at ${address} has no port ${INTERCEPT_PORT}`);
  }
  const loop = req.dnsUpstream?.find((u) => u.ip === address && u.port === INTERCEPT_PORT);
  if (loop !== undefined) throw new UsageError(`--dns-upstream ${address}:${INTERCEPT_PORT} is the intercepted cluster DNS: forwarding to it would reach drover again`);
  return address;
}
