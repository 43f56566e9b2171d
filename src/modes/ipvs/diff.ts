/**
 * Drift between IPVS mode's desired state and the live kernel, as
 * `drover diff --mode ipvs` and `drover status --mode ipvs` report it.
 *
 * There is no diff logic of its own: the items are read off the plans a full
 * IPVS sync would apply (backend.ts): planIpvs (reconcile.ts) for virtual and
 * real servers, planAddresses (link.ts) for kube-ipvs0, planIpsetRestore
 * (ipset.ts) for the sets, and for IPVS mode's iptables rules the same
 * driftItems as iptables mode plus the removal of iptables mode's hook jumps
 * (rules.ts otherModeLeftovers), in the IPv6 pass ip6tables' tables against
 * rules/ipvs/static6.rules, and IPVS mode's sysctls (sysctl.ts). The
 * graceful period is taken as 0, so an unwanted real server is listed as
 * extra rather than as one to quiesce; but one that is already quiesced
 * (weight 0) and still has connections is draining, as a sync leaves it
 * until they end: it is listed apart and is not a difference, as are the
 * real servers of a withheld ClusterIP's virtual server (desired.ts) kept
 * while they all drain (reconcile.ts).
 * A virtual server drover does not own (outside `--service-cidr` and not
 * bound on kube-ipvs0) is not drift, as a sync leaves it alone.
 */
import type { StaticRuleset } from '../shared/kube-chains/static.ts';
import { realServerKey, virtualServerKey, type DesiredIpvsState } from './desired.ts';
import { CLUSTER_IP_SET, familySetName, IPVS_SETS, planIpsetRestore, swapSetName } from './ipset.ts';
import { fullSyncTargets } from './keep.ts';
import { DUMMY_INTERFACE, hostPrefixLength, planAddresses } from '../../kernel/rtnetlink/link.ts';
import type { IPFamily } from '../../model/types.ts';
import { planIpvs, type IpvsOp } from './reconcile.ts';
import { otherModeLeftovers } from './rules.ts';
import { IP_VS_SVC_F, type DestEntry, type RealServer, type VirtualServer, type VirtualServerKey } from '../../kernel/ipvs/codec.ts';
import { ipvsSysctls } from './sysctl.ts';
import { TABLES } from '../../kernel/iptables/parse.ts';
import { driftItems, formatDrift, ipv6DriftItem, type DriftItem } from '../shared/kube-chains/diff.ts';
import { boundAddresses, virtualServerLabel, type IpvsLive } from './live.ts';
import { joinHostPort, uint32ToIPv4 } from '../../model/addr.ts';
import { inLayout } from './owned.ts';

/** What kind of IPVS-mode difference an item is. */
export type IpvsDriftKind =
  | 'missing virtual server'
  | 'changed virtual server'
  | 'extra virtual server'
  | 'missing real server'
  | 'changed real server'
  | 'extra real server'
  | 'missing link'
  | 'missing address'
  | 'extra address'
  | 'missing set'
  | 'extra set'
  | 'missing entry'
  | 'extra entry'
  | 'changed sysctl'
  | 'draining real server';

/** One IPVS-mode difference (besides iptables rules). */
export interface IpvsDriftItem {
  readonly kind: IpvsDriftKind;
  /**
   * The object: "TCP 10.96.0.10:80", "TCP 10.96.0.10:80 -> 10.244.1.2:8080",
   * "kube-ipvs0", "kube-ipvs0 10.96.0.10/32", "KUBE-CLUSTER-IP",
   * "KUBE-CLUSTER-IP 10.96.0.10,tcp:80".
   */
  readonly object: string;
  /** The service port of a desired virtual or real server. */
  readonly servicePort?: string;
  /** What is wanted, and for a changed item what the kernel has: "wrr (kernel: rr)". */
  readonly detail?: string;
}

/** Every difference: IPVS, kube-ipvs0, ipset and sysctl items, and IPVS mode's iptables rules. */
export interface IpvsDrift {
  readonly items: readonly IpvsDriftItem[];
  readonly rules: readonly DriftItem[];
  /** Unwanted real servers at weight 0 that still have connections: draining, not differences. */
  readonly draining: readonly IpvsDriftItem[];
}

/** Inputs of {@link ipvsDrift} besides the live state. */
export interface IpvsDriftOptions {
  /** `--service-cidr`: unwanted virtual servers in it are drover's; absent for an IPv6 pass without one. */
  readonly serviceCIDR?: string;
  /**
   * The family compared (default IPv4): its virtual servers, its sets
   * (ipset.ts familySetName, KUBE-6- for IPv6) and its host-length
   * addresses on kube-ipvs0 (/32 or /128). Virtual servers of the other
   * family are left out, as the other family's backend owns them
   * (dual-stack.ts).
   */
  readonly family?: IPFamily;
  /** The host's own addresses (node-ips.ts): unwanted virtual servers on them (NodePorts) are drover's too. Default none. */
  readonly hostAddresses?: readonly string[];
  /**
   * IPVS mode's static iptables rules of the family (ipvsStaticRules) for
   * the render flags, and iptables mode's of the family (rules.ts
   * iptablesModeStatics), whose hook jumps IPVS mode removes; these are
   * compared with the family's tables (`live.tables`, or `live.tables6` for
   * IPv6), and the family's sysctls (sysctl.ts ipvsSysctls) checked, only
   * when given.
   */
  readonly rules?: { readonly statics: StaticRuleset; readonly iptablesStatics: StaticRuleset };
  /** The source could not be read whole: as a full sync then would, keep what belongs to unlisted virtual servers (keep.ts). */
  readonly incomplete?: boolean;
}

/** Every field sameService compares: scheduler, persistence, netmask and (kernel side) flags besides hashed and persistent. */
function describeService(vs: Pick<VirtualServer, 'address' | 'scheduler' | 'persistent' | 'netmask'> & { readonly flags?: number }): string {
  // An IPv6 virtual server's netmask is a prefix length (codec.ts), 128 by default.
  const v6 = vs.address.includes(':');
  const full = v6 ? 128 : 0xffffffff;
  const netmask = vs.netmask ?? full;
  const other = (vs.flags ?? 0) & ~(IP_VS_SVC_F.HASHED | IP_VS_SVC_F.PERSISTENT);
  return [
    vs.scheduler,
    ...(vs.persistent ? [`persistent ${vs.persistent.timeoutSeconds} s`] : []),
    ...(netmask !== full ? [`netmask ${v6 ? `/${netmask}` : uint32ToIPv4(netmask)}`] : []),
    ...(other !== 0 ? [`flags 0x${other.toString(16)}`] : []),
  ].join(' ');
}

/** Every field sameDest compares: weight, forwarding and the connection thresholds. */
function describeDest(rs: Pick<RealServer, 'weight' | 'forwarding' | 'upperThreshold' | 'lowerThreshold'>): string {
  const limits = rs.upperThreshold || rs.lowerThreshold ? ` thresholds ${rs.lowerThreshold ?? 0}-${rs.upperThreshold ?? 0}` : '';
  return `weight ${rs.weight} ${rs.forwarding === 'masq' ? 'Masq' : rs.forwarding}${limits}`;
}

/**
 * The differences between `desired` and `live`, in the order a sync writes
 * them: ipsets, kube-ipvs0 (link, then addresses), virtual and real servers
 * (planIpvs order); iptables rules apart. Pure.
 * @throws IpsetTypeError when one of drover's sets exists with another type
 *   or family (a sync would fail the same way).
 */
export function ipvsDrift(desired: DesiredIpvsState, live: IpvsLive, opts: IpvsDriftOptions): IpvsDrift {
  const items: IpvsDriftItem[] = [];
  const family = opts.family ?? 'IPv4';
  const full = hostPrefixLength(family);
  const bound = boundAddresses(live, family);
  const host = new Set(opts.hostAddresses ?? []);
  const scope = { serviceCIDR: opts.serviceCIDR, bound, host };
  const owned = (vs: VirtualServerKey) => inLayout(vs.address, scope);
  const virtualServers = new Map([...live.virtualServers].filter(([, v]) => v.entry.address.includes(':') === (family === 'IPv6')));
  const targets = fullSyncTargets(desired, virtualServers, owned, opts.incomplete === true, bound, host);
  const sets = planIpsetRestore(targets.sets, live.sets, family);
  for (const name of IPVS_SETS.map((set) => familySetName(set.name, family))) {
    if (sets.missingSets.includes(name)) items.push({ kind: 'missing set', object: name });
    const scratch = swapSetName(name);
    if (sets.leftovers.includes(scratch)) items.push({ kind: 'extra set', object: scratch, detail: 'left over by an interrupted rebuild' });
    for (const { entry } of sets.extra.filter((e) => e.set === name)) items.push({ kind: 'extra entry', object: `${name} ${entry}` });
    for (const { entry } of sets.missing.filter((e) => e.set === name)) items.push({ kind: 'missing entry', object: `${name} ${entry}` });
  }
  const linkAddresses = family === 'IPv6' ? live.bound6 : live.bound;
  if (linkAddresses === null) items.push({ kind: 'missing link', object: DUMMY_INTERFACE });
  const addresses = planAddresses(targets.addresses, linkAddresses ?? [], full);
  for (const a of addresses.add) items.push({ kind: 'missing address', object: `${DUMMY_INTERFACE} ${a}/${full}` });
  for (const a of addresses.remove) items.push({ kind: 'extra address', object: `${DUMMY_INTERFACE} ${a.address}/${a.prefixLength}` });

  const plan = planIpvs(desired.virtualServers, virtualServers, {
    owned: targets.owned,
    pending: new Map(),
    now: 0,
    gracefulPeriodMs: 0,
  });
  const draining: IpvsDriftItem[] = [];
  const drains = (d: DestEntry) => d.weight === 0 && d.activeConns + d.inactiveConns > 0;
  const note = (vs: VirtualServerKey, d: DestEntry): IpvsDriftItem => ({
    kind: 'draining real server',
    object: `${virtualServerLabel(vs)} -> ${joinHostPort(d.address, d.port)}`,
    detail: `weight 0, ${d.activeConns} active and ${d.inactiveConns} inactive connections`,
  });
  for (const op of plan.ops) {
    const have = live.virtualServers.get(`${op.vs.protocol}/${op.vs.address}:${op.vs.port}`);
    const d = op.kind === 'del-dest' ? have?.dests.find((x) => realServerKey(x) === realServerKey(op.rs)) : undefined;
    if (d && drains(d)) draining.push(note(op.vs, d));
    // A withheld ClusterIP's virtual server (desired.ts) kept while its real servers drain, as a sync leaves it.
    else if (op.kind === 'del-service' && have && desired.withheld.has(virtualServerKey(op.vs)) && have.dests.length > 0 && have.dests.every(drains)) {
      for (const x of have.dests) draining.push(note(op.vs, x));
    } else items.push(opItem(op, desired, live));
  }
  if (opts.rules === undefined) return { items, rules: [], draining };
  for (const { name, value } of ipvsSysctls(family)) {
    if (!live.sysctls.has(name)) continue;
    const have = live.sysctls.get(name);
    if (have !== value) items.push({ kind: 'changed sysctl', object: name, detail: `${value} (kernel: ${have ?? 'missing'})` });
  }

  const { statics, iptablesStatics } = opts.rules;
  const tables = family === 'IPv6' ? live.tables6 : live.tables;
  const leftovers = otherModeLeftovers(statics, iptablesStatics, tables);
  const rules: DriftItem[] = [
    ...driftItems(statics, new Map(), tables, { retired: iptablesStatics }),
    ...TABLES.flatMap((table) => leftovers[table].deleteRules.map(({ chain, rule }): DriftItem => ({ kind: 'extra rule', table, chain, rule }))),
  ];
  // The IPv6 tables' items name their table "nat (IPv6)", as iptables mode's diff does.
  return { items, rules: family === 'IPv6' ? rules.map(ipv6DriftItem) : rules, draining };
}

function opItem(op: IpvsOp, desired: DesiredIpvsState, live: IpvsLive): IpvsDriftItem {
  const vsLabel = virtualServerLabel(op.vs);
  const key = `${op.vs.protocol}/${op.vs.address}:${op.vs.port}`;
  const sp = desired.virtualServers.get(key)?.servicePort;
  const servicePort = sp === undefined ? {} : { servicePort: sp };
  const have = live.virtualServers.get(key);
  switch (op.kind) {
    case 'add-service':
      return { kind: 'missing virtual server', object: vsLabel, ...servicePort, detail: describeService(op.vs) };
    case 'edit-service':
      return { kind: 'changed virtual server', object: vsLabel, ...servicePort, detail: `${describeService(op.vs)} (kernel: ${describeService(have!.entry)})` };
    case 'del-service':
      return { kind: 'extra virtual server', object: vsLabel, ...(have ? { detail: describeService(have.entry) } : {}) };
    case 'add-dest':
      return { kind: 'missing real server', object: `${vsLabel} -> ${joinHostPort(op.rs.address, op.rs.port)}`, ...servicePort, detail: describeDest(op.rs) };
    case 'edit-dest': {
      const d = have?.dests.find((x) => realServerKey(x) === realServerKey(op.rs));
      return { kind: 'changed real server', object: `${vsLabel} -> ${joinHostPort(op.rs.address, op.rs.port)}`, ...servicePort, detail: `${describeDest(op.rs)}${d ? ` (kernel: ${describeDest(d)})` : ''}` };
    }
    case 'quiesce-dest':
    case 'del-dest':
      return { kind: 'extra real server', object: `${vsLabel} -> ${joinHostPort(op.rs.address, op.rs.port)}`, ...servicePort };
  }
}

/**
 * Whether a full sync would touch the IPv6 side, so that `diff` compares it:
 * the source has IPv6 virtual servers, or the kernel has set
 * KUBE-6-CLUSTER-IP (left by an earlier run), as dual-stack.ts wakes the
 * IPv6 backend. Pure.
 */
export function ipv6DriftWanted(desired6: DesiredIpvsState, live: Pick<IpvsLive, 'sets'>): boolean {
  return desired6.virtualServers.size > 0 || live.sets.has(familySetName(CLUSTER_IP_SET, 'IPv6'));
}

/** Both families' drift as one: the IPv4 pass's items, then the IPv6 pass's; rules and draining likewise. */
export function joinIpvsDrift(a: IpvsDrift, b: IpvsDrift): IpvsDrift {
  return { items: [...a.items, ...b.items], rules: [...a.rules, ...b.rules], draining: [...a.draining, ...b.draining] };
}

/** The number of differences (IPVS items and iptables items). */
export function ipvsDriftCount(drift: IpvsDrift): number {
  return drift.items.length + drift.rules.length;
}

/**
 * One line per item, `<kind> <object>[ (<service port>)][: <detail>]`, then
 * the iptables items as formatDrift prints them, then the draining real
 * servers as `note:` lines. No item prints "no differences".
 */
export function formatIpvsDrift(drift: IpvsDrift): string {
  const line = (i: IpvsDriftItem): string => `${i.kind} ${i.object}${i.servicePort ? ` (${i.servicePort})` : ''}${i.detail ? `: ${i.detail}` : ''}\n`;
  const draining = drift.draining.map((i) => `note: ${line(i)}`).join('');
  if (ipvsDriftCount(drift) === 0) return `no differences\n${draining}`;
  return `${drift.items.map(line).join('')}${drift.rules.length > 0 ? formatDrift(drift.rules) : ''}${draining}`;
}

