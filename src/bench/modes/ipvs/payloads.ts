/**
 * Hand-built IPVS-mode changes for the benchmark's baselines, one service
 * port changing from `before` to `after` (undefined: absent). Pure; built
 * off the clock, so a baseline's time is the kernel work alone.
 *
 * An IPVS-mode change has three parts, applied in the order drover's IPVS
 * backend applies them (src/modes/ipvs/backend.ts): ipset entries (one
 * `ipset restore -exist`), ClusterIPs added to kube-ipvs0, IPVS commands
 * over generic netlink, then ClusterIPs removed from kube-ipvs0.
 *
 * - minimalIpvsChange: only what the change needs (the physical limit): one
 *   real server added or deleted with its KUBE-LOOP-BACK entry, or one
 *   virtual server with its real servers, its address and its set entries.
 * - wholeIpvsState: every virtual server and real server sent again
 *   (SET_SERVICE, SET_DEST), every set entry and every address: a re-apply
 *   of the whole state without reading it first.
 */
import { CLUSTER_IP_SET, LOOP_BACK_SET } from '../../../modes/ipvs/ipset.ts';
import type { DesiredServicePort } from '../../../modes/ipvs/desired.ts';
import type { SetEntry } from '../../../modes/ipvs/frontends.ts';
import type { IpvsOp } from '../../../modes/ipvs/reconcile.ts';

/** One IPVS-mode change, ready to apply. */
export interface IpvsChange {
  /** `ipset restore -exist` input ("" when no entry changes). */
  readonly ipset: string;
  /** ClusterIPs to bind to kube-ipvs0 (as /32) before the IPVS commands. */
  readonly bind: readonly string[];
  /** IPVS commands, in a valid order (service deletes, service writes, destination commands). */
  readonly ops: readonly IpvsOp[];
  /** ClusterIPs to unbind from kube-ipvs0 after the IPVS commands. */
  readonly unbind: readonly string[];
}

/** The `ipset restore` lines adding (`add`) or deleting (`del`) the set entries of one service port; `others` are its other entries (DesiredServicePort.entries: KUBE-IPVS-IPS and the like). */
function setLines(verb: 'add' | 'del', clusterIPEntry: string | undefined, loopBack: readonly string[], others: readonly SetEntry[] = []): string[] {
  return [
    ...(clusterIPEntry ? [`${verb} ${CLUSTER_IP_SET} ${clusterIPEntry}`] : []),
    ...loopBack.map((e) => `${verb} ${LOOP_BACK_SET} ${e}`),
    ...others.map((e) => `${verb} ${e.set} ${e.entry}`),
  ];
}

const text = (lines: readonly string[]): string => (lines.length === 0 ? '' : `${lines.join('\n')}\n`);

/**
 * The smallest IPVS-mode change for one service port going from `before` to
 * `after` (both computed with desiredServicePort). A real server that goes
 * is deleted (DEL_DEST), not quiesced: the physical limit of "no new
 * connection reaches it". Both must have the same virtual server when both
 * are given. KUBE-LOOP-BACK entries are per endpoint, so other service
 * ports may share them: an entry in `keep` (the entries of the other
 * service ports after the change) is never deleted.
 * @throws Error when `before` and `after` are different virtual servers.
 */
export function minimalIpvsChange(
  before: DesiredServicePort | undefined,
  after: DesiredServicePort | undefined,
  keep: ReadonlySet<string> = new Set(),
): IpvsChange {
  if (before && after && before.server.key !== after.server.key) {
    throw new Error(`minimalIpvsChange: ${before.server.key} and ${after.server.key} are different virtual servers`);
  }
  if (after && !before) {
    const vs = after.server.vs;
    return {
      ipset: text(setLines('add', after.clusterIPEntry, after.loopBackEntries, after.entries)),
      bind: [vs.address],
      ops: [{ kind: 'add-service', vs }, ...[...after.server.reals.values()].map((rs): IpvsOp => ({ kind: 'add-dest', vs, rs }))],
      unbind: [],
    };
  }
  if (before && !after) {
    const vs = before.server.vs;
    return {
      ipset: text(setLines('del', before.clusterIPEntry, before.loopBackEntries.filter((e) => !keep.has(e)), before.entries.filter((e) => !keep.has(e.entry)))),
      bind: [],
      ops: [{ kind: 'del-service', vs }],
      unbind: [vs.address],
    };
  }
  if (!before || !after) return { ipset: '', bind: [], ops: [], unbind: [] };
  const vs = after.server.vs;
  const ops: IpvsOp[] = [];
  for (const [key, rs] of before.server.reals) if (!after.server.reals.has(key)) ops.push({ kind: 'del-dest', vs, rs });
  for (const [key, rs] of after.server.reals) if (!before.server.reals.has(key)) ops.push({ kind: 'add-dest', vs, rs });
  const had = new Set(before.loopBackEntries);
  const has = new Set(after.loopBackEntries);
  const lines = [
    ...setLines('del', undefined, before.loopBackEntries.filter((e) => !has.has(e) && !keep.has(e))),
    ...setLines('add', undefined, after.loopBackEntries.filter((e) => !had.has(e))),
  ];
  return { ipset: text(lines), bind: [], ops, unbind: [] };
}

/**
 * The whole desired state sent again without reading the kernel: SET_SERVICE
 * for every virtual server and SET_DEST for every real server of `ports`
 * (which must all exist already), every set entry (`add`, which
 * `restore -exist` accepts for entries already there) and every ClusterIP
 * bound again (an address already bound is not an error).
 */
export function wholeIpvsState(ports: Iterable<DesiredServicePort>): IpvsChange {
  const ops: IpvsOp[] = [];
  const dests: IpvsOp[] = [];
  const lines: string[] = [];
  const bind: string[] = [];
  for (const p of ports) {
    const vs = p.server.vs;
    ops.push({ kind: 'edit-service', vs });
    for (const rs of p.server.reals.values()) dests.push({ kind: 'edit-dest', vs, rs });
    lines.push(...setLines('add', p.clusterIPEntry, p.loopBackEntries, p.entries));
    bind.push(vs.address);
  }
  return { ipset: text(lines), bind, ops: [...ops, ...dests], unbind: [] };
}

/** `a` then `b` as one change (applyOps puts the commands in a valid order again). */
export function concatChanges(a: IpvsChange, b: IpvsChange): IpvsChange {
  return { ipset: a.ipset + b.ipset, bind: [...a.bind, ...b.bind], ops: [...a.ops, ...b.ops], unbind: [...a.unbind, ...b.unbind] };
}
