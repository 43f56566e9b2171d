/**
 * The contract between the proxier and a backend (one per mode: iptables,
 * IPVS, nftables), kept here with its consumer. What a sync or a cleanup did
 * is told in counts of kernel objects by kind, the same for every mode, plus
 * each mode's own detail, whose shape the mode declares in its folder.
 */
import { IP_FAMILIES } from '../model/family.ts';
import type { IPFamily, Snapshot } from '../model/types.ts';

/** The proxy modes drover knows. */
export type ProxyMode = string;

/** What changed since the last successful sync. */
export interface ChangeSet {
  /** A full sync is needed (first sync, periodic resync, after a failure): compare with the kernel. */
  readonly full: boolean;
  /** ServicePortNames whose service or endpoints changed (added, removed or modified). */
  readonly changed: ReadonlySet<string>;
  /**
   * The source could not be read whole, so the snapshot may lack service
   * ports that are programmed: add and update what the snapshot holds, but
   * delete nothing that belongs to a service port it does not list (a full
   * sync keeps such chains, rules, virtual servers, set entries and
   * addresses as the kernel has them). Default false.
   */
  readonly incomplete?: boolean;
  /**
   * A full sync the proxier may put off: a periodic or requested resync
   * while the backend knows what it programmed (the changes were already
   * served by a partial sync). A backend may then bound the time its
   * read-back takes and, past the bound, throw a ReadBackTimeoutError
   * (shared/read-back.ts) before writing anything, keeping what it knows;
   * the proxier retries later with backoff. Default false: read back for as
   * long as it takes.
   */
  readonly deferrable?: boolean;
}

/**
 * The kinds of kernel object a sync or a cleanup counts, in every mode:
 * - `chain`: an iptables chain created or rewritten (written), or deleted;
 * - `rule`: an iptables rule appended or inserted on its own (written), or
 *   deleted on its own; the rules of a chain written or deleted whole are
 *   not counted again. Cleanup deletes rules only from the built-in chains
 *   (the hook rules that jump to drover's chains);
 * - `virtual server`: an IPVS virtual server added or edited, or deleted
 *   (its real servers go with it and are not counted again);
 * - `real server`: an IPVS real server added, edited or quiesced (weight 0
 *   during graceful termination), or deleted;
 * - `set entry`: an ipset entry that became present, or went;
 * - `set`: an ipset destroyed (cleanup);
 * - `address`: an address bound to, or removed from, a link (IPVS mode's
 *   ClusterIPs on kube-ipvs0);
 * - `link`: a network link deleted (cleanup: kube-ipvs0).
 */
export type ObjectKind = 'chain' | 'rule' | 'virtual server' | 'real server' | 'set entry' | 'set' | 'address' | 'link';

/**
 * Objects counted by kind. A backend lists every kind it can write or delete,
 * 0 included; a kind it does not list is 0 (read it with {@link countOf}).
 */
export type ObjectCounts = Readonly<Partial<Record<ObjectKind, number>>>;

/** The count of `kind` in `counts` (0 when absent). */
export function countOf(counts: ObjectCounts, kind: ObjectKind): number {
  return counts[kind] ?? 0;
}

/** The sum of every kind in `counts`. */
export function totalOf(counts: ObjectCounts): number {
  return Object.values(counts).reduce((sum, n) => sum + (n ?? 0), 0);
}

/**
 * What a mode reports of a sync beyond {@link SyncResult}'s counts, for the
 * log, the metrics, the bench and tests: an open shape each mode extends in
 * its own folder (e.g. modes/nftables/sync-detail.ts), told apart by `mode`
 * (the backend's {@link Backend.mode}). Only the mode that wrote a detail
 * reads its other fields, through its own guard (e.g. `ipvsDetail`); the
 * proxier logs what the mode's driver picks (ModeDriver.syncLogFields).
 */
export interface ModeSyncDetail {
  /** The mode that wrote it, as `--mode` names it. */
  readonly mode: ProxyMode;
}

/** What one sync did. Times in milliseconds. */
export interface SyncResult {
  /** True for a full sync (the kernel was read back and compared). */
  readonly full: boolean;
  /** Service ports in the snapshot. */
  readonly services: number;
  /** Serving endpoints in the snapshot. */
  readonly endpoints: number;
  /** Kernel objects created or changed, by kind ({@link ObjectKind}). */
  readonly written: ObjectCounts;
  /** Kernel objects deleted, by kind ({@link ObjectKind}). */
  readonly deleted: ObjectCounts;
  /** Size of the kernel transaction payloads, bytes (0 when nothing needed writing). */
  readonly bytes: number;
  /** Kernel transactions used (0 when nothing needed writing; more than 1 only for very large changes). */
  readonly transactions: number;
  /** Time spent reading the kernel back (full syncs), ms. */
  readonly readMs: number;
  /** Time spent in the kernel transaction, ms. */
  readonly applyMs: number;
  /** Whole sync, ms. */
  readonly totalMs: number;
  /** The mode's own account of the sync, if it has one. */
  readonly detail?: ModeSyncDetail;
  /**
   * Present (true) when, while the sync wrote, new UDP flows to the
   * snapshot's frontends may have gone through the nat rules without being
   * DNATed (a rule that translates them was briefly missing or wrong): the
   * kernel keeps a conntrack entry without NAT for each, which later
   * datagrams of the flow would follow. The proxier then deletes the UDP
   * entries of the snapshot's frontends of this result's family that were
   * not DNATed (conntrack/stale.ts notNATedUDPFlows), first sync included.
   */
  readonly udpNotNATed?: true;
  /**
   * Each IP family's own result, for a backend that syncs both families
   * (shared/dual-stack.ts): the families synced, each with what its
   * backend reported. Absent: the whole result is the IPv4 family's.
   */
  readonly families?: Readonly<Partial<Record<IPFamily, SyncResult>>>;
}

/** Each family's own result of a sync, IPv4 first: `result.families`, or without them the whole result as the IPv4 family's. */
export function resultsByFamily(result: SyncResult): Array<[IPFamily, SyncResult]> {
  if (result.families === undefined) return [['IPv4', result]];
  return IP_FAMILIES.flatMap((f): Array<[IPFamily, SyncResult]> => (result.families![f] ? [[f, result.families![f]]] : []));
}

/** A proxy backend: turns a Snapshot into kernel state. */
export interface Backend {
  /** The mode's name, as `--mode` takes it. */
  readonly mode: ProxyMode;
  /**
   * Bring the kernel to `snapshot`. A partial sync writes only what belongs
   * to `changes.changed`; a full sync reads the kernel back and repairs any
   * difference. On failure the backend forgets what it believes is
   * programmed, so that the next sync is a full one.
   * @throws whatever the kernel transaction threw; nothing is half-applied within a table.
   */
  sync(snapshot: Snapshot, changes: ChangeSet): Promise<SyncResult>;
  /**
   * A cheap check, made at each sync period between full syncs, of whether
   * the kernel may have changed behind drover's back: a reason (for the
   * log) when it may, undefined when nothing suggests it. A backend without
   * it is synced in full at every sync period.
   * @throws when the check cannot be made (the proxier then syncs in full).
   */
  driftCheck?(): Promise<string | undefined>;
  /**
   * Start watching the kernel's own events for changes to drover's state
   * made by another program (nftables mode: nf_tables notifications of its
   * tables); `repair` is then called, with a reason for the log, as soon as
   * one is seen: with `full`, the proxier runs a full sync (read-back and
   * repair); without, a sync that need not be full, during which the backend
   * repairs what it saw (nftables mode: the elements of the sets named).
   * Called once, when the proxier starts, before its first sync; resolves
   * once the watch runs (or could not be started: the backend then says so
   * and keeps to {@link driftCheck}). Without it, drift is found only by
   * {@link driftCheck} at each sync period.
   */
  watchDrift?(repair: (reason: string, full: boolean) => void): Promise<void> | void;
  /**
   * Remove everything this backend created, and nothing else. A chain that
   * a rule of someone else's still jumps to cannot be deleted; it is emptied
   * and reported in the result's `kept`.
   * @throws whatever reading or writing the kernel threw.
   */
  cleanup(): Promise<CleanupResult>;
  /**
   * Release what the backend holds open (sockets), once no sync runs any
   * more; the kernel state is left as it is. Without it there is nothing to
   * release.
   */
  close?(): Promise<void> | void;
}

/**
 * A chain of drover's that cleanup emptied but could not delete: the kernel
 * refuses to delete a chain while a rule jumps to it, and the rules that do
 * are not drover's, so cleanup leaves them alone.
 */
export interface KeptChain {
  /** The table, e.g. `nat`. */
  readonly table: string;
  readonly chain: string;
  /** The rules drover does not own that jump to the chain, as iptables-save prints them (`-A CHAIN …`), all in `table`. */
  readonly referencedBy: readonly string[];
  /** True when the chain was left as it is, rules included, for the rules that jump to it (iptables mode's shared KUBE-FIREWALL, ruleset.ts SHARED_CHAINS); otherwise it was emptied. */
  readonly untouched?: boolean;
}

/** What cleanup did. */
export interface CleanupResult {
  /**
   * Kernel objects removed, by kind ({@link ObjectKind}): `chain` and `rule`
   * (the hook rules, the jumps from the built-in chains) in every mode, and
   * whatever else the mode created (IPVS: `virtual server`, `link`, `set`).
   */
  readonly removed: ObjectCounts;
  /** Chains emptied (or left as they are) but not deleted (see {@link KeptChain}); empty when everything was removed. */
  readonly kept: readonly KeptChain[];
}
