/**
 * The settings of the node's Service DNS server (`drover run --dns-address`;
 * src/dns/). Off unless `dnsAddress` is set.
 */
import { parseIP } from '../model/addr.ts';
import { UsageError } from '../errors.ts';

/** The cluster domain kube-proxy's and the kubelet's defaults name (`--cluster-domain`). */
export const DEFAULT_CLUSTER_DOMAIN = 'cluster.local';

/** The records' TTL, seconds: CoreDNS's kubernetes plugin's default. */
export const DEFAULT_DNS_TTL = 5;

/** One upstream resolver: an IPv4 or IPv6 address (canonical text) and a port, 1-65535. */
export interface Upstream {
  readonly ip: string;
  readonly port: number;
}

/**
 * An upstream from text: "IP", "IP:PORT" or "[IPv6]:PORT" (port default 53).
 * @throws UsageError naming `origin` when the text is not one.
 */
export function parseUpstream(text: string, origin: string): Upstream {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(text) ?? /^([^:]+):(\d+)$/.exec(text);
  const [host, port] = m ? [m[1]!, Number(m[2])] : [text, 53];
  const ip = parseIP(host);
  if (ip === undefined || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new UsageError(`${origin}: upstream DNS server ${JSON.stringify(text)} is not IP, IP:PORT or [IPv6]:PORT with a port of 1-65535`);
  }
  return { ip: ip.text, port };
}

/** Options of `run`'s DNS server. */
export type DnsCliOptions = {
  /** `--dns-address`: the node-local address to serve on (e.g. 169.254.20.10, NodeLocal DNSCache's); absent: no DNS server. */
  readonly dnsAddress?: string;
  /** `--dns-port`: UDP and TCP port, 1-65535 (default 53). */
  readonly dnsPort: number;
  /** `--cluster-domain`: the zone answered authoritatively (default cluster.local). */
  readonly clusterDomain: string;
  /** `--dns-ttl`: seconds, 0-2147483647 (default 5). */
  readonly dnsTtl: number;
  /** `--dns-upstream`: where other names are forwarded; absent: the `nameserver`s of /etc/resolv.conf. */
  readonly dnsUpstream?: readonly Upstream[];
  /**
   * `--dns-intercept-cluster-dns`: also answer queries sent to the cluster
   * DNS Service's ClusterIP, port 53 (as NodeLocal DNSCache does with its
   * second `-localip`); needs `dnsAddress`.
   */
  readonly dnsInterceptClusterDns?: boolean;
  /** `--cluster-dns`: the ClusterIP to intercept; absent: the ClusterIP of {@link CLUSTER_DNS_SERVICE} of dnsAddress's family. */
  readonly clusterDns?: string;
};

/** The Service whose ClusterIP is the cluster DNS by default: kube-dns, the name CoreDNS's Service keeps in kubeadm and most installers. */
export const CLUSTER_DNS_SERVICE = { namespace: 'kube-system', name: 'kube-dns' } as const;
