/**
 * The flags of `run`'s Service DNS server (src/dns/, config/dns.ts):
 * `--dns-address`, `--dns-port`, `--cluster-domain`, `--dns-ttl`,
 * `--dns-upstream`, `--dns-intercept-cluster-dns`, `--cluster-dns`. Each value is checked here, one clear line naming the
 * flag and the value.
 */
import { InvalidArgumentError, Option } from 'commander';
import { parseIP } from '../model/addr.ts';
import { DEFAULT_CLUSTER_DOMAIN, DEFAULT_DNS_TTL, parseUpstream, type Upstream } from '../config/dns.ts';
import { UsageError } from '../errors.ts';

/** `--dns-address`: one IPv4 or IPv6 unicast address, canonical. */
function dnsAddressArg(value: string): string {
  const ip = parseIP(value.trim());
  if (ip === undefined) throw new InvalidArgumentError(`"${value}" is not an IPv4 or IPv6 address`);
  if (/^(0\.0\.0\.0|::|255\.255\.255\.255)$/.test(ip.text) || /^(22[4-9]|23\d)\./.test(ip.text) || /^ff/i.test(ip.text)) {
    throw new InvalidArgumentError(`"${value}" is not a unicast address (the DNS server listens on one address)`);
  }
  return ip.text;
}

/** An integer of `min`-`max` named `what`. */
function integerArg(what: string, min: number, max: number): (value: string) => number {
  return (value) => {
    if (!/^\d+$/.test(value.trim()) || Number(value) < min || Number(value) > max) throw new InvalidArgumentError(`"${value}" is not ${what}, an integer of ${min}-${max}`);
    return Number(value);
  };
}

/** `--cluster-domain`: a domain of DNS-1123 labels, lower-cased, without the trailing dot. */
function clusterDomainArg(value: string): string {
  const domain = value.trim().toLowerCase().replace(/\.$/, '');
  if (domain.length > 253 || !domain.split('.').every((l) => /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(l))) {
    throw new InvalidArgumentError(`"${value}" is not a domain name of DNS-1123 labels (e.g. cluster.local)`);
  }
  return domain;
}

/** `--dns-upstream`: IP, IP:PORT or [IPv6]:PORT, separated by commas. */
function upstreamsArg(value: string): Upstream[] {
  try {
    return value.split(',').map((p) => p.trim()).filter((p) => p !== '').map((p) => parseUpstream(p, '--dns-upstream'));
  } catch (err) {
    throw new InvalidArgumentError((err as UsageError).message.replace(/^--dns-upstream: /, ''));
  }
}

/** The DNS server's flags of `run`. */
export function dnsOptions(): Option[] {
  return [
    new Option('--dns-address <ip>', 'serve Service names (and forward other names) over DNS on UDP and TCP of this node-local address, added to the link drover-dns0 (e.g. 169.254.20.10); off by default').argParser(dnsAddressArg),
    new Option('--dns-port <port>', 'with --dns-address: the UDP and TCP port').default(53).argParser(integerArg('a port', 1, 65535)),
    new Option('--cluster-domain <domain>', 'with --dns-address: the zone answered from the Services, <svc>.<ns>.svc.<domain>').default(DEFAULT_CLUSTER_DOMAIN).argParser(clusterDomainArg),
    new Option('--dns-ttl <seconds>', 'with --dns-address: TTL of the Service records and of their denials').default(DEFAULT_DNS_TTL).argParser(integerArg('a TTL in seconds', 0, 2147483647)),
    new Option('--dns-upstream <ip[:port],...>', "with --dns-address: where names outside the cluster domain are forwarded (default: the nameservers of /etc/resolv.conf)").argParser(upstreamsArg),
    new Option('--dns-intercept-cluster-dns', "with --dns-address: also answer DNS queries sent to the cluster DNS Service's ClusterIP, port 53, on this node instead of DNATing them to its Pods (as NodeLocal DNSCache does); not in IPVS mode"),
    new Option('--cluster-dns <ip>', 'with --dns-intercept-cluster-dns: the ClusterIP to intercept, as the kubelet\'s --cluster-dns names it (default: the ClusterIP of the Service kube-system/kube-dns)').argParser(dnsAddressArg),
  ];
}
