/**
 * Drift between IPVS mode's desired state and the live kernel, as
 * `drover diff --mode ipvs` and `drover status --mode ipvs` report it.
 *
 * There is no diff logic of its own: the items are read off the plans a full
 * IPVS sync would apply (backend.ts): planIpvs (reconcile.ts) for virtual and
 * real servers, planAddresses (link.ts) for kube-ipvs0, planIpsetRestore
 * (ipset.ts) for the sets, and for IPVS mode's iptables rules the same
 * driftItems as iptables mode plus the removal of iptables mode's hook jumps
 * (rules.ts otherModeLeftovers). The graceful period is taken as 0, so an
 * unwanted real server is listed as extra rather than as one to quiesce.
 * A virtual server drover does not own (outside `--service-cidr` and not
 * bound on kube-ipvs0) is not drift, as a sync leaves it alone.
 */
import type { StaticRuleset } from '../backends/iptables/static.ts';
import { cidrContains, realServerKey, type DesiredIpvsState } from '../backends/ipvs/desired.ts';
import { CLUSTER_IP_SET, LOOP_BACK_SET, planIpsetRestore } from '../backends/ipvs/ipset.ts';
import { DUMMY_INTERFACE, planAddresses } from '../backends/ipvs/link.ts';
import { planIpvs, type IpvsOp } from '../backends/ipvs/reconcile.ts';
import { otherModeLeftovers } from '../backends/ipvs/rules.ts';
import type { RealServer, VirtualServer } from '../backends/ipvs/codec.ts';
import { TABLES } from '../backends/iptables/parse.ts';
import { DIFF_EXIT, driftItems, formatDrift, type DriftItem } from './diff.ts';
import { boundAddresses, virtualServerLabel, type IpvsLive } from './ipvs-live.ts';

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
  | 'missing entry'
  | 'extra entry';

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

/** Every difference: IPVS, kube-ipvs0 and ipset items, and IPVS mode's iptables rules. */
export interface IpvsDrift {
  readonly items: readonly IpvsDriftItem[];
  readonly rules: readonly DriftItem[];
}

/** Inputs of {@link ipvsDrift} besides the live state. */
export interface IpvsDriftOptions {
  /** `--service-cidr`: unwanted virtual servers in it are drover's. */
  readonly serviceCIDR: string;
  /** IPVS mode's static iptables rules (ipvsStaticRules) for the render flags. */
  readonly statics: StaticRuleset;
  /** iptables mode's static rules, whose hook jumps IPVS mode removes. */
  readonly iptablesStatics: StaticRuleset;
}

function describeService(vs: Pick<VirtualServer, 'scheduler' | 'persistent'>): string {
  return `${vs.scheduler}${vs.persistent ? ` persistent ${vs.persistent.timeoutSeconds} s` : ''}`;
}

function describeDest(rs: Pick<RealServer, 'weight' | 'forwarding'>): string {
  return `weight ${rs.weight} ${rs.forwarding === 'masq' ? 'Masq' : rs.forwarding}`;
}

/**
 * The differences between `desired` and `live`, in the order a sync writes
 * them: ipsets, kube-ipvs0 (link, then addresses), virtual and real servers
 * (planIpvs order); iptables rules apart. Pure.
 * @throws IpsetTypeError when one of drover's sets exists with another type
 *   (a sync would fail the same way).
 */
export function ipvsDrift(desired: DesiredIpvsState, live: IpvsLive, opts: IpvsDriftOptions): IpvsDrift {
  const items: IpvsDriftItem[] = [];
  const sets = planIpsetRestore({ [CLUSTER_IP_SET]: desired.clusterIPSet, [LOOP_BACK_SET]: desired.loopBackSet }, live.sets);
  for (const line of sets.input.split('\n').filter(Boolean)) {
    const [cmd, set, entry] = line.split(' ') as [string, string, string];
    if (cmd === 'create') items.push({ kind: 'missing set', object: set });
    else items.push({ kind: cmd === 'add' ? 'missing entry' : 'extra entry', object: `${set} ${entry}` });
  }
  if (live.bound === null) items.push({ kind: 'missing link', object: DUMMY_INTERFACE });
  const addresses = planAddresses(desired.addresses, live.bound ?? []);
  for (const a of addresses.add) items.push({ kind: 'missing address', object: `${DUMMY_INTERFACE} ${a}/32` });
  for (const a of addresses.remove) items.push({ kind: 'extra address', object: `${DUMMY_INTERFACE} ${a.address}/${a.prefixLength}` });

  const bound = boundAddresses(live);
  const plan = planIpvs(desired.virtualServers, live.virtualServers, {
    owned: (vs) => cidrContains(opts.serviceCIDR, vs.address) || bound.has(vs.address),
    pending: new Map(),
    now: 0,
    gracefulPeriodMs: 0,
  });
  for (const op of plan.ops) items.push(opItem(op, desired, live));

  const leftovers = otherModeLeftovers(opts.statics, opts.iptablesStatics, live.tables);
  const rules: DriftItem[] = [
    ...driftItems(opts.statics, new Map(), live.tables),
    ...TABLES.flatMap((table) => leftovers[table].deleteRules.map(({ chain, rule }): DriftItem => ({ kind: 'extra rule', table, chain, rule }))),
  ];
  return { items, rules };
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
      return { kind: 'missing real server', object: `${vsLabel} -> ${realServerKey(op.rs)}`, ...servicePort, detail: describeDest(op.rs) };
    case 'edit-dest': {
      const d = have?.dests.find((x) => realServerKey(x) === realServerKey(op.rs));
      return { kind: 'changed real server', object: `${vsLabel} -> ${realServerKey(op.rs)}`, ...servicePort, detail: `${describeDest(op.rs)}${d ? ` (kernel: ${describeDest(d)})` : ''}` };
    }
    case 'quiesce-dest':
    case 'del-dest':
      return { kind: 'extra real server', object: `${vsLabel} -> ${realServerKey(op.rs)}`, ...servicePort };
  }
}

/** The number of differences (IPVS items and iptables items). */
export function ipvsDriftCount(drift: IpvsDrift): number {
  return drift.items.length + drift.rules.length;
}

/**
 * One line per item, `<kind> <object>[ (<service port>)][: <detail>]`, then
 * the iptables items as formatDrift prints them. No item prints "no differences".
 */
export function formatIpvsDrift(drift: IpvsDrift): string {
  if (ipvsDriftCount(drift) === 0) return 'no differences\n';
  const lines = drift.items.map((i) => `${i.kind} ${i.object}${i.servicePort ? ` (${i.servicePort})` : ''}${i.detail ? `: ${i.detail}` : ''}\n`);
  return `${lines.join('')}${drift.rules.length > 0 ? formatDrift(drift.rules) : ''}`;
}

/** `drover diff --mode ipvs`'s exit code: DIFF_EXIT.same without differences, else DIFF_EXIT.differ. */
export function ipvsDriftExitCode(drift: IpvsDrift): number {
  return ipvsDriftCount(drift) === 0 ? DIFF_EXIT.same : DIFF_EXIT.differ;
}
