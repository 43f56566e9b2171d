/**
 * The Service DNS of `drover run --dns-address`: the address on the dummy
 * link `drover-dns0` (as NodeLocal DNSCache puts 169.254.20.10 on
 * `nodelocaldns`; on `lo` where the kernel has no dummy driver), the zone kept equal to what the proxier syncs (view.ts,
 * updated in the proxier's `sync` event, right after the kernel was
 * written), and the server (server.ts) on UDP and TCP of the address.
 *
 * With `--dns-intercept-cluster-dns` the cluster DNS ClusterIP
 * (intercept.ts) is bound on a second dummy link, {@link INTERCEPT_LINK}, a
 * second server answers on it, port 53, and the dataplane bypasses
 * conntrack for it too, as NodeLocal DNSCache binds the kube-dns ClusterIP on
 * `nodelocaldns`. The link of its own marks the interception: a run
 * without the flag deletes it, after the rules no longer name the address.
 *
 * It runs in drover's own network namespace: a socket cannot be bound in
 * another one from Node, so `run` refuses `--dns-address` with `--netns`
 * (run drover inside the namespace with `ip netns exec` instead).
 */
import { networkInterfaces } from 'node:os';
import { runCommand } from '../kernel/exec.ts';
import type { DnsCliOptions } from '../config/dns.ts';
import type { LinkManager } from '../kernel/rtnetlink/link.ts';
import { planAddresses, RtnlLinkManager } from '../kernel/rtnetlink/link.ts';
import type { Proxier } from '../proxier/proxier.ts';
import type { Logger } from '../util/log.ts';
import { Forwarder, resolvConfUpstreams } from './forward.ts';
import { DnsServer } from './server.ts';
import { ServiceDnsView } from './view.ts';
import { Zone } from './zone.ts';
import { programDnsDataplane, removeDnsDataplane } from './dataplane.ts';
import type { IptablesVariant } from '../kernel/iptables/exec.ts';
import { INTERCEPT_PORT } from './intercept.ts';

/** The dummy link that holds the DNS address (NodeLocal DNSCache's is `nodelocaldns`). */
export const DNS_LINK = 'drover-dns0';

/** The dummy link that holds the intercepted cluster DNS ClusterIP (`--dns-intercept-cluster-dns`), and only it. */
export const INTERCEPT_LINK = 'drover-cdns0';
/** The label of the intercepted ClusterIP when it is on `lo` (a kernel without the dummy driver). */
export const INTERCEPT_LABEL = 'lo:drover-cdns';

/** The running DNS of a node. */
export interface NodeDns {
  readonly server: DnsServer;
  /** The server on the intercepted ClusterIP, port 53, sharing the zone, the forwarder and `server.stats`. */
  readonly interceptServer?: DnsServer;
  readonly zone: Zone;
  /** Where other names go (empty: none found; they are answered SERVFAIL). */
  readonly upstreams: readonly { ip: string; port: number }[];
  /** When the zone last took a sync's changes, ms since the epoch; 0 before the first. */
  readonly updatedAt: () => number;
  /** Stop serving and listening to the proxier; the address and link stay (cleanup removes them). */
  close(): Promise<void>;
}

/** The interfaces of this namespace that have `address`. */
function interfacesWith(address: string): string[] {
  return Object.entries(networkInterfaces()).filter(([, list]) => list?.some((i) => i.address === address)).map(([name]) => name);
}

/** Whether `address` is already an address of an interface of this namespace. */
function isLocalAddress(address: string): boolean {
  return interfacesWith(address).length > 0;
}

/** Run `fn` with `given`, or with a link manager of its own, closed after. */
async function withLinks<T>(given: LinkManager | undefined, fn: (links: LinkManager) => Promise<T>): Promise<T> {
  const links = given ?? new RtnlLinkManager();
  try {
    return await fn(links);
  } finally {
    if (given === undefined) (links as RtnlLinkManager).close();
  }
}

/** Whether `err` says the kernel has no dummy link driver (CONFIG_DUMMY; rtnl_newlink answers EOPNOTSUPP, ENOTSUP to Node, for an unknown kind). */
function noDummyDriver(err: unknown): boolean {
  return /\b(EOPNOTSUPP|ENOTSUP)\b|not supported/i.test((err as Error).message);
}

/**
 * Make {@link INTERCEPT_LINK} hold `address` and nothing else (created when
 * missing). On a kernel without the dummy driver the address goes on `lo`,
 * labelled {@link INTERCEPT_LABEL} so that a later run and cleanup can tell
 * it from the node's own (IPv4 only: IPv6 addresses have no label).
 * @throws Error when another interface has the address (NodeLocal DNSCache's
 * `nodelocaldns`, IPVS mode's `kube-ipvs0`): two programs would answer for it.
 */
export async function bindIntercepted(address: string, links: LinkManager, logger: Logger): Promise<void> {
  const others = interfacesWith(address).filter((name) => name !== INTERCEPT_LINK && name !== INTERCEPT_LABEL);
  if (others.length > 0) {
    throw new Error(`--dns-intercept-cluster-dns: ${address} is already an address of ${others.join(', ')} (NodeLocal DNSCache's nodelocaldns, or kube-ipvs0 of IPVS mode?); stop what put it there, or run without the flag`);
  }
  const v6 = address.includes(':');
  let index: number;
  try {
    index = (await links.ensureDummy(INTERCEPT_LINK)).index;
  } catch (err) {
    if (!noDummyDriver(err) || v6) throw err;
    const lo = await links.find('lo');
    if (lo === undefined) throw err;
    logger.warn({ interceptedClusterDns: address }, `DNS: no dummy link ${INTERCEPT_LINK}; the cluster DNS ClusterIP goes on lo, labelled ${INTERCEPT_LABEL}`);
    await links.addAddress(lo, address, INTERCEPT_LABEL);
    for (const a of (await links.labelled?.(INTERCEPT_LABEL)) ?? []) if (a.address !== address) await links.delAddress(a.index, a);
    return;
  }
  const current = [...(await links.addresses(index, 'IPv4')), ...(await links.addresses(index, 'IPv6'))];
  const plan = planAddresses([address], current, v6 ? 128 : 32);
  for (const a of plan.add) await links.addAddress(index, a);
  for (const a of plan.remove) await links.delAddress(index, a);
}

/** Whether an intercepted ClusterIP is bound: {@link INTERCEPT_LINK} is there, or an address labelled {@link INTERCEPT_LABEL}. */
async function interceptBound(links: LinkManager): Promise<boolean> {
  return (await links.find(INTERCEPT_LINK)) !== undefined || ((await links.labelled?.(INTERCEPT_LABEL)) ?? []).length > 0;
}

/** Delete {@link INTERCEPT_LINK}, and the addresses labelled {@link INTERCEPT_LABEL}. @returns how many links and labelled addresses were removed. */
export async function unbindIntercepted(links: LinkManager): Promise<{ links: number; addresses: number }> {
  const index = await links.find(INTERCEPT_LINK);
  if (index !== undefined) await links.deleteLink(index);
  const labelled = (await links.labelled?.(INTERCEPT_LABEL)) ?? [];
  for (const a of labelled) await links.delAddress(a.index, a);
  return { links: index !== undefined ? 1 : 0, addresses: labelled.length };
}

async function addAddress(address: string, given: LinkManager | undefined, logger: Logger): Promise<void> {
  await withLinks(given, async (links) => {
    let index: number | undefined;
    try {
      index = (await links.ensureDummy(DNS_LINK)).index;
    } catch (err) {
      // A kernel without the dummy driver: the loopback link holds a local address just as well. Any other failure is one.
      if (!noDummyDriver(err)) throw err;
      index = await links.find('lo');
      if (index === undefined) throw err;
      logger.warn({ dnsAddress: address, err: (err as Error).message }, `DNS: no dummy link ${DNS_LINK}; the address goes on lo`);
    }
    await links.addAddress(index, address);
  });
}

/**
 * Put `opts.dnsAddress` on {@link DNS_LINK} (unless an interface already
 * has it) and `opts.intercept` on {@link INTERCEPT_LINK}, start the server on
 * each (the intercepted ClusterIP on port 53), then bypass conntrack for
 * them and accept their traffic (dataplane.ts: `opts.dataplane` says
 * nftables or which iptables variant), and keep the zone equal to every
 * successful sync of `proxier` from now on. Without `opts.intercept`, an
 * earlier run's {@link INTERCEPT_LINK} is deleted once the rules are rewritten.
 * @throws the link's or the bind's error, naming the address.
 */
export async function startNodeDns(
  proxier: Pick<Proxier, 'on'>,
  opts: DnsCliOptions & {
    readonly dnsAddress: string;
    readonly dataplane: { readonly nftables: boolean; readonly iptables: 'auto' | IptablesVariant };
    /** The cluster DNS ClusterIP to answer on too (intercept.ts interceptedAddress); absent: none, and an earlier run's is removed. */
    readonly intercept?: string;
  },
  logger: Logger,
  links?: LinkManager,
): Promise<NodeDns> {
  const address = opts.dnsAddress;
  const { intercept } = opts;
  if (!isLocalAddress(address)) await addAddress(address, links, logger);
  if (intercept !== undefined) await withLinks(links, (l) => bindIntercepted(intercept, l, logger));
  const zone = new Zone({ domain: opts.clusterDomain, ttl: opts.dnsTtl });
  const view = new ServiceDnsView(zone);
  let updatedAt = 0;
  const stop = proxier.on('sync', (last) => {
    if (last.snapshot === undefined || last.error !== undefined) return;
    view.apply(last.snapshot, last.full ? undefined : last.changed, last.incomplete.length > 0);
    updatedAt = Date.now();
  });
  // Neither the DNS address nor the intercepted ClusterIP may be an upstream: forwarding there would reach drover again.
  const upstreams = opts.dnsUpstream ?? resolvConfUpstreams('/etc/resolv.conf', [address, ...(intercept !== undefined ? [intercept] : [])]);
  if (upstreams.length === 0) logger.warn({ dnsAddress: address }, 'DNS: no upstream server (none in /etc/resolv.conf, no --dns-upstream): names outside the cluster domain get SERVFAIL');
  const forwarder = new Forwarder({ upstreams });
  const server = new DnsServer({ address, port: opts.dnsPort, zone, forwarder, logger });
  const interceptServer = intercept !== undefined ? new DnsServer({ address: intercept, port: INTERCEPT_PORT, zone, forwarder, logger, stats: server.stats }) : undefined;
  const close = async () => {
    stop();
    await Promise.all([server.close(), interceptServer?.close()]);
  };
  try {
    await server.listen();
    await interceptServer?.listen();
    // After the servers listen: an untracked query to the intercepted ClusterIP must find its socket.
    const ep = { address, port: opts.dnsPort, ...(intercept !== undefined ? { intercept } : {}) };
    await programDnsDataplane(ep, opts.dataplane);
    if (intercept === undefined && (await withLinks(links, interceptBound))) {
      // An earlier run intercepted, perhaps in another mode, whose form of the rules would still
      // bypass the ClusterIP's DNAT: both forms go, this one is written again, then the address goes.
      await removeDnsDataplane();
      await programDnsDataplane(ep, opts.dataplane);
      await withLinks(links, unbindIntercepted);
      logger.info({ link: INTERCEPT_LINK }, 'DNS: the cluster DNS ClusterIP is no longer intercepted; its rules and address are removed');
    }
  } catch (err) {
    await close();
    throw err;
  }
  logger.info(
    { dnsAddress: address, dnsPort: server.port, ...(intercept !== undefined ? { interceptedClusterDns: `${intercept}:${INTERCEPT_PORT}` } : {}), clusterDomain: zone.domain, ttl: zone.ttl, upstreams: upstreams.map((u) => `${u.ip}:${u.port}`) },
    'DNS server listening',
  );
  return {
    server,
    ...(interceptServer !== undefined ? { interceptServer } : {}),
    zone,
    upstreams,
    updatedAt: () => updatedAt,
    close,
  };
}

/**
 * For `run` without `--dns-address`: when an earlier run intercepted the
 * cluster DNS ClusterIP ({@link INTERCEPT_LINK} is there), remove the whole
 * node DNS ({@link removeNodeDns}), since its rules would keep the ClusterIP's
 * DNS queries from the mode's DNAT with nothing to answer them. Nothing
 * else is touched when the link is not there.
 * @returns what was removed, or undefined when there was no such link.
 */
export async function removeInterceptLeftover(given?: LinkManager): Promise<Awaited<ReturnType<typeof removeNodeDns>> | undefined> {
  return withLinks(given, async (links) => {
    return (await interceptBound(links)) ? removeNodeDns(links) : undefined;
  });
}

/**
 * Remove what `run --dns-address` added to this network namespace: the
 * dataplane (dataplane.ts removeDnsDataplane), the link {@link DNS_LINK},
 * and the intercepted ClusterIP ({@link INTERCEPT_LINK}, or the `lo`
 * addresses labelled {@link INTERCEPT_LABEL}).
 * The DNS address put on `lo` instead (no dummy driver) stays.
 * @returns what was removed, by kind (`addresses`: the labelled ones on `lo`).
 */
export async function removeNodeDns(given?: LinkManager): Promise<{ chains: number; rules: number; tables: number; links: number; addresses: number }> {
  const removed = await removeDnsDataplane();
  return withLinks(given, async (links) => {
    const index = await links.find(DNS_LINK);
    if (index !== undefined) await links.deleteLink(index);
    const unbound = await unbindIntercepted(links);
    return { ...removed, links: (index !== undefined ? 1 : 0) + unbound.links, addresses: unbound.addresses };
  });
}

/**
 * The node DNS's links and labelled address found in network namespace
 * `netns` (`ip -n NETNS -o link show`, `ip -n NETNS -o addr show dev lo`):
 * what `drover run --dns-address` left there when it was started inside the
 * namespace (`ip netns exec NETNS drover run …`). `run` and `cleanup` with
 * `--netns` cannot remove them (Node cannot bind a socket or open an
 * rtnetlink socket in another namespace), so they name them instead.
 * An empty list when there are none or `ip` cannot tell.
 */
export async function nodeDnsStateIn(netns: string): Promise<string[]> {
  const links = await runCommand('ip', ['-n', netns, '-o', 'link', 'show']);
  const found = links.code === 0 ? [DNS_LINK, INTERCEPT_LINK].filter((name) => new RegExp(`^\\d+: ${name}[:@]`, 'm').test(links.stdout)) : [];
  const lo = await runCommand('ip', ['-n', netns, '-o', 'addr', 'show', 'dev', 'lo']);
  if (lo.code === 0 && lo.stdout.includes(INTERCEPT_LABEL)) found.push(`the address labelled ${INTERCEPT_LABEL}`);
  return found;
}
