/**
 * The Service DNS of `drover run --dns-address`: the address on the dummy
 * link `drover-dns0` (as NodeLocal DNSCache puts 169.254.20.10 on
 * `nodelocaldns`; on `lo` where the kernel has no dummy driver), the zone kept equal to what the proxier syncs (view.ts,
 * updated in the proxier's `sync` event, right after the kernel was
 * written), and the server (server.ts) on UDP and TCP of the address.
 *
 * It runs in drover's own network namespace: a socket cannot be bound in
 * another one from Node, so `run` refuses `--dns-address` with `--netns`
 * (run drover inside the namespace with `ip netns exec` instead).
 */
import { networkInterfaces } from 'node:os';
import type { DnsCliOptions } from '../config/dns.ts';
import type { LinkManager } from '../kernel/rtnetlink/link.ts';
import { RtnlLinkManager } from '../kernel/rtnetlink/link.ts';
import type { Proxier } from '../proxier/proxier.ts';
import type { Logger } from '../util/log.ts';
import { Forwarder, resolvConfUpstreams } from './forward.ts';
import { DnsServer } from './server.ts';
import { ServiceDnsView } from './view.ts';
import { Zone } from './zone.ts';
import { programDnsDataplane, removeDnsDataplane } from './dataplane.ts';
import type { IptablesVariant } from '../kernel/iptables/exec.ts';

/** The dummy link that holds the DNS address (NodeLocal DNSCache's is `nodelocaldns`). */
export const DNS_LINK = 'drover-dns0';

/** The running DNS of a node. */
export interface NodeDns {
  readonly server: DnsServer;
  readonly zone: Zone;
  /** Where other names go (empty: none found; they are answered SERVFAIL). */
  readonly upstreams: readonly { ip: string; port: number }[];
  /** When the zone last took a sync's changes, ms since the epoch; 0 before the first. */
  readonly updatedAt: () => number;
  /** Stop serving and listening to the proxier; the address and link stay (cleanup removes them). */
  close(): Promise<void>;
}

/** Whether `address` is already an address of an interface of this namespace. */
function isLocalAddress(address: string): boolean {
  return Object.values(networkInterfaces()).some((list) => list?.some((i) => i.address === address));
}

/** Add `address` to {@link DNS_LINK}, created when missing, or to `lo` where the kernel has no dummy driver. */
async function addAddress(address: string, given: LinkManager | undefined, logger: Logger): Promise<void> {
  const links = given ?? new RtnlLinkManager();
  try {
    let index: number | undefined;
    try {
      index = (await links.ensureDummy(DNS_LINK)).index;
    } catch (err) {
      // A kernel without the dummy driver (CONFIG_DUMMY; rtnl_newlink answers EOPNOTSUPP, ENOTSUP to Node, for an unknown kind):
      // the loopback link holds a local address just as well. Any other failure is one.
      if (!/\b(EOPNOTSUPP|ENOTSUP)\b|not supported/i.test((err as Error).message)) throw err;
      index = await links.find('lo');
      if (index === undefined) throw err;
      logger.warn({ dnsAddress: address, err: (err as Error).message }, `DNS: no dummy link ${DNS_LINK}; the address goes on lo`);
    }
    await links.addAddress(index, address);
  } finally {
    if (given === undefined) (links as RtnlLinkManager).close();
  }
}

/**
 * Put `opts.dnsAddress` on {@link DNS_LINK} (unless an interface already
 * has it), bypass conntrack for it and accept its traffic (dataplane.ts:
 * `opts.dataplane` says nftables or which iptables variant), start the server on it, and keep the zone equal to every
 * successful sync of `proxier` from now on.
 * @throws the link's or the bind's error, naming the address.
 */
export async function startNodeDns(
  proxier: Pick<Proxier, 'on'>,
  opts: DnsCliOptions & { readonly dnsAddress: string; readonly dataplane: { readonly nftables: boolean; readonly iptables: 'auto' | IptablesVariant } },
  logger: Logger,
  links?: LinkManager,
): Promise<NodeDns> {
  const address = opts.dnsAddress;
  if (!isLocalAddress(address)) await addAddress(address, links, logger);
  await programDnsDataplane({ address, port: opts.dnsPort }, opts.dataplane);
  const zone = new Zone({ domain: opts.clusterDomain, ttl: opts.dnsTtl });
  const view = new ServiceDnsView(zone);
  let updatedAt = 0;
  const stop = proxier.on('sync', (last) => {
    if (last.snapshot === undefined || last.error !== undefined) return;
    view.apply(last.snapshot, last.full ? undefined : last.changed, last.incomplete.length > 0);
    updatedAt = Date.now();
  });
  const upstreams = opts.dnsUpstream ?? resolvConfUpstreams('/etc/resolv.conf', [address]);
  if (upstreams.length === 0) logger.warn({ dnsAddress: address }, 'DNS: no upstream server (none in /etc/resolv.conf, no --dns-upstream): names outside the cluster domain get SERVFAIL');
  const server = new DnsServer({ address, port: opts.dnsPort, zone, forwarder: new Forwarder({ upstreams }), logger });
  try {
    await server.listen();
  } catch (err) {
    stop();
    throw err;
  }
  logger.info({ dnsAddress: address, dnsPort: server.port, clusterDomain: zone.domain, ttl: zone.ttl, upstreams: upstreams.map((u) => `${u.ip}:${u.port}`) }, 'DNS server listening');
  return {
    server,
    zone,
    upstreams,
    updatedAt: () => updatedAt,
    close: async () => {
      stop();
      await server.close();
    },
  };
}

/**
 * Remove what `run --dns-address` added to this network namespace: the
 * dataplane (dataplane.ts removeDnsDataplane) and the link {@link DNS_LINK}.
 * An address put on `lo` instead (no dummy driver) stays.
 * @returns what was removed, by kind.
 */
export async function removeNodeDns(given?: LinkManager): Promise<{ chains: number; rules: number; tables: number; links: number }> {
  const removed = await removeDnsDataplane();
  const links = given ?? new RtnlLinkManager();
  try {
    const index = await links.find(DNS_LINK);
    if (index !== undefined) await links.deleteLink(index);
    return { ...removed, links: index !== undefined ? 1 : 0 };
  } finally {
    if (given === undefined) (links as RtnlLinkManager).close();
  }
}
