/**
 * `drover chains` in IPVS mode: per virtual server, what the live kernel
 * holds for it: the virtual server (scheduler, persistence, flags), its real
 * servers (weight, forwarding, connection counters), whether its address is
 * bound on kube-ipvs0, and its entries in KUBE-CLUSTER-IP (or, for a
 * NodePort, external IP or LoadBalancer virtual server of `--source`, in
 * the frontend sets) and KUBE-LOOP-BACK (the entries desired.ts builds for
 * it, and whether the kernel has them).
 *
 * IPVS keeps no names, so a virtual server is mapped to its service port
 * only through the desired state of `--source` (matched by
 * ClusterIP:port/protocol); without it, virtual servers are listed by
 * address. Pure: the state comes from ipvs-live.ts.
 */
import { IP_VS_SVC_F, type ForwardingMethod, type IpvsProtocol } from '../../kernel/ipvs/codec.ts';
import { compareText, realServerKey, type DesiredVirtualServer } from './desired.ts';
import { CLUSTER_IP_SET, clusterIPEntry, familySetName, LOOP_BACK_SET, loopBackEntry } from './ipset.ts';
import { IpsetValidationError } from '../../kernel/ipset/ipset.ts';
import { DUMMY_INTERFACE, hostPrefixLength } from '../../kernel/rtnetlink/link.ts';
import type { IPFamily } from '../../model/types.ts';
import { boundAddresses, virtualServerLabel, type IpvsLive } from './live.ts';
import { compareAddresses, joinHostPort, uint32ToIPv4 } from '../../model/addr.ts';
import { endpointPodKey } from '../../model/pods.ts';

/** An ipset entry that belongs to a virtual server or real server, and whether the kernel's set has it. */
export interface SetEntryView {
  readonly set: string;
  /** As `ipset save` prints it, e.g. "10.96.0.10,tcp:80"; null when no entry can hold this server (port 0, a catch-all virtual server). */
  readonly entry: string | null;
  readonly present: boolean;
}

/** A real server as the kernel has it. */
export interface RealServerView {
  readonly address: string;
  readonly port: number;
  /** 0-65535; 0 = quiesced (no new connections). */
  readonly weight: number;
  readonly forwarding: ForwardingMethod;
  /** IPVS_DEST_ATTR_ACTIVE_CONNS / INACT_CONNS: established and other (e.g. TIME_WAIT) connections. */
  readonly activeConns: number;
  readonly inactiveConns: number;
  /** Its KUBE-LOOP-BACK (hairpin) entry. */
  readonly loopBack: SetEntryView;
  /** With `--source`: the Pod ("namespace/name") the endpoint was derived from; absent otherwise. */
  readonly pod?: string;
}

/** The virtual server itself, as the kernel has it. */
export interface VirtualServerView {
  readonly protocol: IpvsProtocol;
  readonly address: string;
  readonly port: number;
  readonly scheduler: string;
  /** Persistence timeout in seconds; null when not persistent. */
  readonly persistentTimeoutSeconds: number | null;
  /** Persistence netmask, dotted ("255.255.255.255"); of an IPv6 virtual server, its prefix length ("/128"). */
  readonly netmask: string;
  /** IP_VS_SVC_F_* flags by name: "persistent", "hashed", "one-packet", "sched-flag-1".."sched-flag-3". */
  readonly flags: readonly string[];
}

/**
 * One virtual server (or one the source wants). This is the `--json` shape
 * of `drover chains --mode ipvs` (an array of these).
 */
export interface IpvsServicePortView {
  /** ServicePortName from `--source`; null without `--source` or for a virtual server the source does not want. */
  readonly servicePort: string | null;
  /** virtualServerKey, "TCP/10.96.0.10:80". */
  readonly key: string;
  /** null when the source wants this virtual server and the kernel has none. */
  readonly virtualServer: VirtualServerView | null;
  /** Present (true) for a ClusterIP drover deliberately gives no virtual server: internalTrafficPolicy Local with endpoints on other nodes only, so the rules drop new connections (desired.ts DesiredServicePort.withheld). */
  readonly withheld?: true;
  /** Whether its address is bound as /32 (IPv6: /128) on kube-ipvs0. */
  readonly bound: boolean;
  /**
   * Its KUBE-CLUSTER-IP entry; for a NodePort, external IP or LoadBalancer
   * virtual server of `--source` (desired.ts DesiredVirtualServer.frontend),
   * its first frontend set entry instead (e.g. KUBE-NODE-PORT-TCP "30080").
   */
  readonly clusterIP: SetEntryView;
  /** Such a frontend virtual server's other set entries (KUBE-NODE-PORT-LOCAL-TCP, KUBE-LOAD-BALANCER-SOURCE-CIDR, ...); absent otherwise. */
  readonly frontendEntries?: readonly SetEntryView[];
  /** Its real servers, sorted by address and port (as ipvsadm lists them). */
  readonly realServers: readonly RealServerView[];
}

const FLAG_NAMES: readonly [number, string][] = [
  [IP_VS_SVC_F.PERSISTENT, 'persistent'],
  [IP_VS_SVC_F.HASHED, 'hashed'],
  [IP_VS_SVC_F.ONEPACKET, 'one-packet'],
  [IP_VS_SVC_F.SCHED1, 'sched-flag-1'],
  [IP_VS_SVC_F.SCHED2, 'sched-flag-2'],
  [IP_VS_SVC_F.SCHED3, 'sched-flag-3'],
];

/** The view of the entry `make` builds; an entry no set can hold (port 0) has none. */
function entryView(live: IpvsLive, set: string, make: () => string): SetEntryView {
  let entry: string;
  try {
    entry = make();
  } catch (err) {
    if (err instanceof IpsetValidationError) return { set, entry: null, present: false };
    throw err;
  }
  return { set, entry, present: live.sets.get(set)?.entries.has(entry) ?? false };
}

/** The set entries of a view: KUBE-CLUSTER-IP's, or those of a desired frontend virtual server; in the sets of `family` (KUBE-6-… for IPv6). */
function setViews(live: IpvsLive, want: DesiredVirtualServer | undefined, clusterEntry: () => string, family: IPFamily): Pick<IpvsServicePortView, 'clusterIP' | 'frontendEntries'> {
  const own = want?.frontend?.entries ?? [];
  if (own.length === 0) return { clusterIP: entryView(live, familySetName(CLUSTER_IP_SET, family), clusterEntry) };
  const [first, ...rest] = own.map((e) => entryView(live, familySetName(e.set, family), () => e.entry));
  return { clusterIP: first!, frontendEntries: rest };
}

/**
 * The views of `drover chains` in IPVS mode. With `desired` (from
 * `--source`): one per desired virtual server, in service port order, then
 * the kernel's other virtual servers by key; without: every kernel virtual
 * server by key. `pods` (model/pods.ts endpointPods of the same source)
 * names the Pod of each real server derived from one. Pure.
 */
export function ipvsServicePortViews(
  live: IpvsLive,
  desired?: ReadonlyMap<string, DesiredVirtualServer>,
  pods: ReadonlyMap<string, string> = new Map(),
  withheld: ReadonlyMap<string, DesiredVirtualServer> = new Map(),
): IpvsServicePortView[] {
  const bound = { IPv4: boundAddresses(live), IPv6: boundAddresses(live, 'IPv6') };
  const view = (key: string, servicePort: string | null, want?: DesiredVirtualServer): IpvsServicePortView => {
    const have = live.virtualServers.get(key);
    const vs = have?.entry ?? want!.vs;
    const proto = vs.protocol.toLowerCase();
    const family: IPFamily = vs.address.includes(':') ? 'IPv6' : 'IPv4';
    return {
      servicePort,
      key,
      virtualServer: have
        ? {
            protocol: have.entry.protocol,
            address: have.entry.address,
            port: have.entry.port,
            scheduler: have.entry.scheduler,
            persistentTimeoutSeconds: have.entry.persistent?.timeoutSeconds ?? null,
            netmask: family === 'IPv6' ? `/${have.entry.netmask}` : uint32ToIPv4(have.entry.netmask),
            flags: FLAG_NAMES.filter(([bit]) => (have.entry.flags & bit) !== 0).map(([, name]) => name),
          }
        : null,
      bound: bound[family].has(vs.address),
      ...setViews(live, want, () => clusterIPEntry(vs.address, proto, vs.port), family),
      realServers: [...(have?.dests ?? [])].sort((a, b) => compareAddresses(a.address, b.address) || a.port - b.port).map((d) => {
        const pod = servicePort === null ? undefined : pods.get(endpointPodKey(servicePort, realServerKey(d)));
        return {
          address: d.address,
          port: d.port,
          weight: d.weight,
          forwarding: d.forwarding,
          activeConns: d.activeConns,
          inactiveConns: d.inactiveConns,
          loopBack: entryView(live, familySetName(LOOP_BACK_SET, family), () => loopBackEntry(d.address, proto, d.port)),
          ...(pod !== undefined ? { pod } : {}),
        };
      }),
    };
  };
  const wanted = [...(desired?.values() ?? []), ...withheld.values()].sort((a, b) => compareText(a.servicePort, b.servicePort) || compareText(a.key, b.key));
  const named = wanted.map((d) => (withheld.get(d.key) === d ? { ...view(d.key, d.servicePort, d), withheld: true as const } : view(d.key, d.servicePort, d)));
  const others = [...live.virtualServers.keys()].filter((k) => !desired?.has(k) && !withheld.has(k)).map((k) => view(k, null));
  return [...named, ...others];
}

function entryText(e: SetEntryView): string {
  if (e.entry === null) return '(none: no entry holds port 0)';
  return e.present ? e.entry : `${e.entry} (missing)`;
}

function header(v: IpvsServicePortView, withSource: boolean): string {
  const vs = v.virtualServer;
  const label = virtualServerLabel(vs ?? parseKey(v.key));
  if (v.servicePort === null) return `# ${label}${withSource ? ' (not in --source)' : ''}`;
  if (v.withheld) {
    const why = 'internalTrafficPolicy Local with endpoints on other nodes only: new connections are dropped';
    return vs ? `# ${v.servicePort} (virtual server ${label}, not wanted: ${why})` : `# ${v.servicePort}: no virtual server ${label} (${why})`;
  }
  return vs ? `# ${v.servicePort} (virtual server ${label})` : `# ${v.servicePort}: no virtual server ${label} in the kernel`;
}

function parseKey(key: string): { protocol: string; address: string; port: number } {
  const m = /^([A-Z]+)\/(.+):(\d+)$/.exec(key)!;
  return { protocol: m[1]!, address: m[2]!, port: Number(m[3]) };
}

function pad(cells: readonly string[], widths: readonly number[]): string {
  return cells.map((c, i) => (i < cells.length - 1 ? c.padEnd(widths[i]!) : c)).join('  ');
}

/**
 * The text of `drover chains --mode ipvs`: per view a `# ` header (service
 * port and virtual server, or the virtual server alone), the virtual server
 * line `TCP 10.96.0.10:80 rr [persistent 600 s, netmask 255.255.255.255]
 * (flags: hashed)`, its kube-ipvs0 binding and KUBE-CLUSTER-IP entry, and a
 * table of real servers with their KUBE-LOOP-BACK entry (an entry the
 * kernel lacks is marked "(missing)"), and a pod column when one of them
 * was derived from a Pod. Without `--source` a first line says
 * that virtual servers are listed by address. Blank line between views.
 */
export function formatIpvsChains(views: readonly IpvsServicePortView[], withSource: boolean): string {
  const intro = withSource ? [] : ['(no --source: IPVS keeps no service names, so virtual servers are listed by address)', ''];
  if (views.length === 0) return `${[...intro, 'no IPVS virtual servers in the kernel'].join('\n')}\n`;
  const blocks = views.map((v) => {
    const lines = [header(v, withSource)];
    const vs = v.virtualServer;
    if (vs) {
      const persistence = vs.persistentTimeoutSeconds !== null ? ` persistent ${vs.persistentTimeoutSeconds} s, netmask ${vs.netmask}` : '';
      lines.push(`${virtualServerLabel(vs)} ${vs.scheduler}${persistence} (flags: ${vs.flags.join(', ') || 'none'})`);
    }
    const address = vs?.address ?? parseKey(v.key).address;
    lines.push(`  ${DUMMY_INTERFACE}: ${address}/${hostPrefixLength(address.includes(':') ? 'IPv6' : 'IPv4')} ${v.bound ? 'bound' : 'not bound'}`);
    for (const e of [v.clusterIP, ...(v.frontendEntries ?? [])]) lines.push(`  ${e.set}: ${entryText(e)}`);
    if (vs && v.realServers.length === 0) lines.push('  no real servers: IPVS refuses connections to it');
    if (v.realServers.length > 0) {
      const withPods = v.realServers.some((r) => r.pod !== undefined);
      const rows = [
        // The loop-back set of the virtual server's family: KUBE-6-LOOP-BACK for an IPv6 one.
        ['-> real server', 'forward', 'weight', 'active', 'inactive', v.realServers[0]!.loopBack.set, ...(withPods ? ['pod'] : [])],
        ...v.realServers.map((r) => [
          `-> ${joinHostPort(r.address, r.port)}`,
          r.forwarding === 'masq' ? 'Masq' : r.forwarding,
          String(r.weight),
          String(r.activeConns),
          String(r.inactiveConns),
          entryText(r.loopBack),
          ...(withPods ? [r.pod ?? '-'] : []),
        ]),
      ];
      const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
      lines.push(...rows.map((row) => `  ${pad(row, widths)}`));
    }
    return lines.join('\n');
  });
  return `${[...intro, blocks.join('\n\n')].join('\n')}\n`;
}
