/**
 * The IPVS diff: desired virtual and real servers (desired.ts) against what
 * the kernel holds, into the exact list of IPVS commands to send. Pure.
 *
 * As kube-proxy's syncProxyRules/syncEndpoint/cleanLegacyService
 * (pkg/proxy/ipvs/proxier.go), with these rules:
 * - a missing virtual server is added, then its real servers;
 * - a virtual server whose scheduler, persistence or netmask differs is
 *   edited in place (SET_SERVICE), keeping its real servers and connections;
 * - a virtual server drover owns that is not wanted is deleted. drover owns
 *   a virtual server when the caller says so (its address is in
 *   `--service-cidr` or bound to kube-ipvs0); any other one, e.g. one an
 *   operator made outside the service range, is left alone; a withheld
 *   one (ReconcileContext.withheld) is kept until its real servers have
 *   drained, then deleted;
 * - a missing real server is added; one whose weight, forwarding or
 *   thresholds differ is edited (this also restores weight 1 after a restart
 *   or when an endpoint comes back during graceful termination);
 * - an unwanted real server goes through graceful termination (graceful.ts).
 *
 * On restart, live state that already matches produces no operation at all:
 * drover adopts it without flushing anything.
 */
import { IP_VS_SVC_F, type DestEntry, type RealServer, type RealServerKey, type ServiceEntry, type VirtualServer, type VirtualServerKey } from '../../kernel/ipvs/codec.ts';
import type { DesiredVirtualServer } from './desired.ts';
import { realServerKey, virtualServerKey } from './desired.ts';
import { pendingKey, removalDecision, type PendingList, type PendingRemoval } from './graceful.ts';

/** One IPVS command. */
export type IpvsOp =
  | { readonly kind: 'add-service'; readonly vs: VirtualServer }
  | { readonly kind: 'edit-service'; readonly vs: VirtualServer }
  | { readonly kind: 'del-service'; readonly vs: VirtualServerKey }
  | { readonly kind: 'add-dest'; readonly vs: VirtualServerKey; readonly rs: RealServer }
  /** Weight, forwarding or thresholds differ (SET_DEST). */
  | { readonly kind: 'edit-dest'; readonly vs: VirtualServerKey; readonly rs: RealServer }
  /** Graceful termination: SET_DEST with weight 0. */
  | { readonly kind: 'quiesce-dest'; readonly vs: VirtualServerKey; readonly rs: RealServer }
  | { readonly kind: 'del-dest'; readonly vs: VirtualServerKey; readonly rs: RealServerKey };

/** A virtual server as the kernel has it, with its destinations. */
export interface KernelVirtualServer {
  readonly entry: ServiceEntry;
  readonly dests: readonly DestEntry[];
}

/** Kernel virtual servers by {@link virtualServerKey}. */
export type KernelIpvsState = ReadonlyMap<string, KernelVirtualServer>;

/** Inputs of {@link planIpvs} besides desired and kernel state. */
export interface ReconcileContext {
  /** True for a virtual server drover may delete when it is not wanted. */
  readonly owned: (vs: VirtualServerKey) => boolean;
  /** Real servers currently in graceful termination. */
  readonly pending: PendingList;
  /** ms since the epoch. */
  readonly now: number;
  /** `--ipvs-graceful-period`, ms. */
  readonly gracefulPeriodMs: number;
  /**
   * True for the key of a virtual server that is withheld (desired.ts
   * DesiredServicePort.withheld): not wanted, but its service port still
   * is. Such a virtual server is kept while real servers drain (graceful
   * termination, as any endpoint that goes away) and deleted once none is
   * left. Absent: every unwanted virtual server is deleted at once.
   */
  readonly withheld?: (key: string) => boolean;
}

/** The result of {@link planIpvs}. */
export interface IpvsPlan {
  /** Commands in a valid order: service deletes, service adds/edits, then destination commands. */
  readonly ops: readonly IpvsOp[];
  /** The pending list after these commands. */
  readonly pending: Map<string, PendingRemoval>;
}

/** Key of a virtual server. */
function keyOf(vs: VirtualServerKey): VirtualServerKey {
  return { protocol: vs.protocol, address: vs.address, port: vs.port };
}

/** True when the kernel's service has the scheduler, persistence and netmask drover wants. */
export function sameService(want: VirtualServer, have: ServiceEntry): boolean {
  const wantFlags = want.persistent ? IP_VS_SVC_F.PERSISTENT : 0;
  const haveFlags = have.flags & ~IP_VS_SVC_F.HASHED;
  if (want.scheduler !== have.scheduler || wantFlags !== haveFlags) return false;
  if (want.persistent && want.persistent.timeoutSeconds !== have.persistent?.timeoutSeconds) return false;
  return (want.netmask ?? 0xffffffff) === have.netmask;
}

/** True when the kernel's destination has the weight, forwarding and thresholds drover wants. */
export function sameDest(want: RealServer, have: DestEntry): boolean {
  return (
    want.weight === have.weight &&
    want.forwarding === have.forwarding &&
    (want.upperThreshold ?? 0) === have.upperThreshold &&
    (want.lowerThreshold ?? 0) === have.lowerThreshold
  );
}

/**
 * The commands that bring `kernel` to `desired`, in scope: only virtual
 * servers present in one of the two maps are looked at, so a partial sync
 * passes just the virtual servers of the changed service ports. Pure;
 * deterministic (sorted by virtual server, then real server).
 */
export function planIpvs(
  desired: ReadonlyMap<string, DesiredVirtualServer>,
  kernel: KernelIpvsState,
  ctx: ReconcileContext,
): IpvsPlan {
  const serviceDeletes: IpvsOp[] = [];
  const serviceWrites: IpvsOp[] = [];
  const destOps: IpvsOp[] = [];
  const pending = new Map(ctx.pending);
  const keys = [...new Set([...desired.keys(), ...kernel.keys()])].sort();
  for (const key of keys) {
    const want = desired.get(key);
    const have = kernel.get(key);
    if (!want) {
      if (!have || !ctx.owned(have.entry)) continue;
      // A withheld virtual server's real servers drain first; it goes with the last of them.
      if (ctx.withheld?.(key)) {
        const drain: IpvsOp[] = [];
        if (retire(keyOf(have.entry), have.dests, NO_REALS, pending, ctx, drain)) {
          destOps.push(...drain);
          continue;
        }
      }
      serviceDeletes.push({ kind: 'del-service', vs: keyOf(have.entry) });
      forgetService(pending, key);
      continue;
    }
    const vsKey = keyOf(want.vs);
    if (!have) {
      serviceWrites.push({ kind: 'add-service', vs: want.vs });
      for (const rs of want.reals.values()) destOps.push({ kind: 'add-dest', vs: vsKey, rs });
      forgetService(pending, key);
      continue;
    }
    if (!sameService(want.vs, have.entry)) serviceWrites.push({ kind: 'edit-service', vs: want.vs });
    const present = new Map(have.dests.map((d) => [realServerKey(d), d]));
    for (const [rsKey, rs] of want.reals) {
      const d = present.get(rsKey);
      pending.delete(pendingKey(vsKey, rs));
      if (!d) destOps.push({ kind: 'add-dest', vs: vsKey, rs });
      else if (!sameDest(rs, d)) destOps.push({ kind: 'edit-dest', vs: vsKey, rs });
    }
    retire(vsKey, have.dests, want.reals, pending, ctx, destOps);
  }
  return { ops: [...serviceDeletes, ...serviceWrites, ...destOps], pending };
}

const NO_REALS: ReadonlyMap<string, RealServer> = new Map();

/**
 * Graceful termination of the kernel's real servers of one virtual server
 * that are not in `wanted`: each is deleted, quiesced or left waiting
 * (graceful.ts removalDecision); the commands go to `destOps` and `pending`
 * is updated, its entries for real servers the kernel no longer has
 * forgotten. Returns true when some unwanted real server is still draining.
 */
function retire(
  vsKey: VirtualServerKey,
  dests: readonly DestEntry[],
  wanted: ReadonlyMap<string, RealServer>,
  pending: Map<string, PendingRemoval>,
  ctx: ReconcileContext,
  destOps: IpvsOp[],
): boolean {
  let draining = false;
  for (const d of [...dests].sort((a, b) => (realServerKey(a) < realServerKey(b) ? -1 : 1))) {
    if (wanted.has(realServerKey(d))) continue;
    const pk = pendingKey(vsKey, d);
    const decision = removalDecision(vsKey.protocol, d, pending.get(pk), ctx.now, ctx.gracefulPeriodMs);
    const rsKey = { address: d.address, port: d.port };
    if (decision === 'delete') {
      destOps.push({ kind: 'del-dest', vs: vsKey, rs: rsKey });
      pending.delete(pk);
      continue;
    }
    draining = true;
    if (decision === 'quiesce') destOps.push({ kind: 'quiesce-dest', vs: vsKey, rs: quiesced(d) });
    pending.set(pk, { vs: vsKey, rs: rsKey, since: pending.get(pk)?.since ?? ctx.now });
  }
  // Pending entries whose real server the kernel no longer has are forgotten.
  const present = new Set(dests.map((d) => realServerKey(d)));
  const key = virtualServerKey(vsKey);
  for (const [pk, p] of pending) {
    if (virtualServerKey(p.vs) === key && !present.has(realServerKey(p.rs))) pending.delete(pk);
  }
  return draining;
}

/** The destination as it is, at weight 0 (keeping forwarding and thresholds). */
function quiesced(d: DestEntry): RealServer {
  return {
    address: d.address,
    port: d.port,
    weight: 0,
    forwarding: d.forwarding,
    upperThreshold: d.upperThreshold,
    lowerThreshold: d.lowerThreshold,
  };
}

function forgetService(pending: Map<string, PendingRemoval>, vsKey: string): void {
  for (const [pk, p] of pending) if (virtualServerKey(p.vs) === vsKey) pending.delete(pk);
}

/** Counts of a plan's commands by kind. */
export type IpvsOpCounts = Readonly<Record<IpvsOp['kind'], number>>;

/** Count a plan's commands by kind. */
export function countOps(ops: readonly IpvsOp[]): IpvsOpCounts {
  const counts: Record<IpvsOp['kind'], number> = {
    'add-service': 0,
    'edit-service': 0,
    'del-service': 0,
    'add-dest': 0,
    'edit-dest': 0,
    'quiesce-dest': 0,
    'del-dest': 0,
  };
  for (const op of ops) counts[op.kind]++;
  return counts;
}

/** One line per command, ipvsadm-like, for logs and tests: "add-dest TCP/10.96.0.10:80 -> 10.244.1.2:8080 w1". */
export function describeOp(op: IpvsOp): string {
  const vs = virtualServerKey(op.vs);
  switch (op.kind) {
    case 'add-service':
    case 'edit-service':
      return `${op.kind} ${vs} ${op.vs.scheduler}${op.vs.persistent ? ` persistent ${op.vs.persistent.timeoutSeconds}` : ''}`;
    case 'del-service':
      return `${op.kind} ${vs}`;
    case 'add-dest':
    case 'edit-dest':
    case 'quiesce-dest':
      return `${op.kind} ${vs} -> ${realServerKey(op.rs)} w${op.rs.weight}`;
    case 'del-dest':
      return `${op.kind} ${vs} -> ${realServerKey(op.rs)}`;
  }
}
