/**
 * The sync loop: reads desired state from a source, works out what changed
 * since the last successful sync, and hands it to the backend, on a
 * bounded-frequency schedule (kube-proxy's syncRunner in
 * pkg/proxy/iptables/proxier.go).
 *
 * - A source change is applied within `minSyncPeriodMs`.
 * - Every `syncPeriodMs` a full sync compares the kernel with desired state
 *   and repairs drift.
 * - A failed sync is retried with exponential backoff (1 s doubling up to
 *   30 s), and the retry is a full sync.
 * - A read-back never holds back a change once drover knows what it
 *   programmed: the changes are served first, and a read-back past the
 *   backend's bound is put off and retried with backoff
 *   ({@link Proxier.syncOnce}).
 * - drover never deletes on an incomplete view of desired state: while the
 *   source reports parts it could not read, a sync adds and updates but
 *   deletes no service port (the unreadable part may hold it), and UDP
 *   conntrack entries of the missing ones are left alone. The first read
 *   that is whole again brings a full sync, which deletes what is stale.
 * - What changed comes from the source: each read names the service ports
 *   it changed since the previous read (kube-proxy's change trackers,
 *   pkg/proxy/servicechangetracker.go and endpointschangetracker.go, fed by
 *   the informers). The proxier collects them until a sync succeeds, so a
 *   one-object change costs the proxier what that object's service ports
 *   cost. Only a source that cannot tell has two whole snapshots compared
 *   (changes.ts).
 * - Every sync attempt is announced to the `sync` listeners
 *   ({@link Proxier.on}): the status file (status-file.ts), the metrics and
 *   the health check (server/); every sync the loop queues, to the `queued`
 *   listeners.
 */
import { isDeepStrictEqual } from 'node:util';
import { resultsByFamily, type Backend, type ModeSyncDetail, type SyncResult } from './backend.ts';
import type { NodeInfo, ServicePort, Snapshot } from '../model/types.ts';
import type { Logger } from '../util/log.ts';
import type { ConntrackExec } from '../conntrack/exec.ts';
import type { SnapshotSource, SourceRead } from '../sources/source.ts';
import { notNATedUDPFlows, staleUDPFlows, type StaleFlow } from '../conntrack/stale.ts';
import { changedServicePorts, countChanges, type ChangeCounts } from './changes.ts';
import { allPortKeys, portsOfKey } from '../model/family.ts';
import { BoundedFrequencyRunner } from './runner.ts';
import { ReadBackTimeoutError } from '../errors.ts';

/** Options of the Proxier; times in milliseconds. */
export interface ProxierOptions {
  readonly source: SnapshotSource;
  readonly backend: Backend;
  /**
   * What the "sync done" log line adds from the mode's own detail of the
   * sync (SyncResult.detail), e.g. nftables mode's `via` and `structural`:
   * the mode's ModeDriver.syncLogFields. Absent: nothing.
   */
  readonly syncLogFields?: (detail: ModeSyncDetail | undefined) => Readonly<Record<string, unknown>>;
  readonly logger: Logger;
  /** Least time between two syncs (`--min-sync-period`, default 1 s). */
  readonly minSyncPeriodMs: number;
  /**
   * Time between periodic checks (`--sync-period`, default 30 s): a full
   * resync, or for a backend with a cheap drift check (Backend.driftCheck)
   * that check, and a full resync only when it suspects drift.
   */
  readonly syncPeriodMs: number;
  /**
   * Longest time between two full resyncs of a backend with a drift check
   * (`--full-sync-period`, default 1 h: kube-proxy's FullSyncPeriod).
   */
  readonly fullSyncPeriodMs?: number;
  /** A first `sync` listener (see {@link Proxier.on}). */
  readonly onSync?: SyncListener;
  /**
   * Where stale UDP conntrack entries are deleted after a sync (see
   * conntrack/stale.ts); none: no cleanup.
   */
  readonly conntrack?: ConntrackExec;
}

/** The outcome of the last sync attempt. */
export interface LastSync {
  /** Wall-clock time the sync ended, ms since the epoch. */
  readonly at: number;
  /** Whether it was a full sync (else partial). */
  readonly full: boolean;
  /** The whole attempt, reading the source included, ms. */
  readonly durationMs: number;
  readonly result?: SyncResult;
  readonly error?: string;
  /** What the source could not read at this sync (deletions were held); empty when it was whole. */
  readonly incomplete: readonly string[];
  /** What the error was (a mode tells its kernel failures apart by it); absent on success. */
  readonly cause?: unknown;
  /** Service ports this attempt's read changed, by what changed (absent when the source could not be read). */
  readonly changes?: ChangeCounts;
  /**
   * On success: when the changes this sync programmed were made at the
   * source (SourceRead.triggerTimes), ms since the epoch, per service port:
   * every one reported since the last successful sync, each observed once
   * in `network_programming_duration_seconds` as kube-proxy does.
   */
  readonly triggerTimes?: ReadonlyMap<string, readonly number[]>;
  /** On success: the snapshot the kernel now holds. */
  readonly snapshot?: Snapshot;
  /**
   * On a successful partial sync: the service ports it wrote (those the
   * source changed and the snapshot lists); absent on a full sync, where any
   * may have changed.
   */
  readonly changed?: ReadonlySet<string>;
}

/**
 * Called after every sync attempt, successful or not, with its outcome
 * (`drover run` writes the status file from it). Must not throw, and should
 * return quickly: it runs inside the sync loop.
 */
export type SyncListener = (last: LastSync) => void;

/**
 * Called when the loop queues a sync: the source may have changed, or a
 * failed sync is to be retried. `at` is ms since the epoch. Must not throw.
 */
export type QueuedListener = (at: number) => void;

/** The events of a {@link Proxier} and their listeners. */
export interface ProxierEvents {
  readonly sync: SyncListener;
  readonly queued: QueuedListener;
}

const MAX_BACKOFF_MS = 30_000;

/** The longest wait before a read-back put off is tried again (see {@link Proxier.syncOnce}). */
export const MAX_READ_BACK_BACKOFF_MS = 300_000;

/** Default of {@link ProxierOptions.fullSyncPeriodMs}: one hour, kube-proxy's FullSyncPeriod (pkg/proxy/util). */
export const DEFAULT_FULL_SYNC_PERIOD_MS = 3_600_000;

/** See the module comment. */
export class Proxier {
  private applied: Snapshot | null = null;
  /** The last snapshot applied successfully; unlike `applied`, kept across failures (conntrack cleanup). */
  private lastGood: Snapshot | null = null;
  private lastFullAt = Number.NEGATIVE_INFINITY;
  /** When the last periodic check (a full sync, or the backend's drift check) was made. */
  private lastCheckAt = Number.NEGATIVE_INFINITY;
  private failures = 0;
  /** True while service ports the source no longer lists may still be programmed (a sync ran on an incomplete read). */
  private deletionsHeld = false;
  private readonly runner: BoundedFrequencyRunner;
  /**
   * Service ports the source reported changed since the last successful
   * sync; `all` when a read could not tell (then the snapshots are compared).
   */
  private pending: { all: boolean; keys: Set<string> } = { all: false, keys: new Set() };
  private readonly listeners: { [E in keyof ProxierEvents]: Set<ProxierEvents[E]> } = { sync: new Set(), queued: new Set() };
  /** A full sync was asked for ({@link Proxier.resync}). */
  private fullRequested = false;
  /** The snapshot of the last read (for counting what a read changed). */
  private lastRead: Snapshot | undefined;
  /** Source change times per service port not yet programmed (SourceRead.triggerTimes). */
  private triggers = new Map<string, number[]>();
  /** The last sync attempt, for status reporting. */
  last: LastSync | undefined;
  /** Set when the source reports a change, cleared at each read: the source may hold changes not yet read. */
  private signalled = false;
  /**
   * A full sync owed since a read-back ran past its bound, how many in a
   * row did, and when to try again (ms since the epoch).
   */
  private readBack = { owed: false, failures: 0, retryAt: Number.NEGATIVE_INFINITY };

  constructor(private readonly opts: ProxierOptions) {
    this.runner = new BoundedFrequencyRunner(() => this.loop(), {
      minIntervalMs: opts.minSyncPeriodMs,
      maxIntervalMs: opts.syncPeriodMs,
    });
    if (opts.onSync) this.on('sync', opts.onSync);
  }

  /**
   * Call `listener` on every `event`: `sync` after each sync attempt, with
   * its {@link LastSync}; `queued` when the loop queues a sync. Listeners run in the order they were added; one
   * that throws is logged and does not disturb the others or the loop.
   * @returns a function that removes the listener.
   */
  on<E extends keyof ProxierEvents>(event: E, listener: ProxierEvents[E]): () => void {
    this.listeners[event].add(listener);
    return () => this.listeners[event].delete(listener);
  }

  /**
   * One sync attempt: load the source, diff against the last applied
   * snapshot, and apply. Full when forced, when nothing was applied yet (or
   * the last attempt failed), when the node or a held deletion needs it, or
   * when a periodic check, a resync request or a read-back put off earlier
   * asks for one. A full sync asked for while drover knows what it
   * programmed never holds back a change: changes the source reported are
   * served first by a partial sync, and a read-back that runs past the
   * backend's bound (ChangeSet.deferrable, modes/shared/read-back.ts) is put
   * off, retried after the sync period, then twice as long each time up to
   * 5 minutes, while partial syncs go on.
   * @returns what the last sync of the attempt did (a partial sync when the full one was put off).
   * @throws the source's or the backend's error; the next sync is then a full one.
   */
  async syncOnce(opts: { full?: boolean } = {}): Promise<SyncResult> {
    const requested = this.fullRequested;
    this.fullRequested = false;
    if (opts.full === true || this.applied === null) return (await this.syncFrom(true, false))!;
    // Changes first: a read-back never holds back what the source has already reported.
    const served = this.signalled ? await this.syncFrom(false, false) : undefined;
    if (served?.full !== true && (await this.fullDue(requested))) {
      const result = await this.syncFrom(true, true);
      if (result !== undefined) return result;
    }
    return served ?? (await this.syncFrom(false, false))!;
  }

  /**
   * One read of the source and one backend sync, full or partial as
   * `wantFull` says (made full when the source's read requires it).
   * `deferrable`: a full sync the proxier may put off; past the backend's
   * read-back bound it is, and this returns undefined.
   * @throws the source's or the backend's error (recorded; the next sync is then a full one).
   */
  private async syncFrom(wantFull: boolean, deferrable: boolean): Promise<SyncResult | undefined> {
    const start = performance.now();
    let full = wantFull;
    let required = !deferrable;
    let incomplete: readonly string[] = [];
    let changes: ChangeCounts | undefined;
    try {
      this.signalled = false;
      const read = await this.opts.source.load({ full });
      const { snapshot } = read;
      changes = this.countRead(read);
      this.collect(read.changed);
      incomplete = read.incomplete ?? [];
      const partial = incomplete.length > 0;
      // Whole again: delete what was held. The node (its name, zone, addresses) feeds the endpoint policy of every service port.
      if ((!partial && this.deletionsHeld) || (this.applied && !isDeepStrictEqual(policyNode(this.applied.node), policyNode(snapshot.node)))) {
        full = true;
        required = true;
      }
      let changed = full || !this.applied ? new Set<string>() : this.pendingChanges(this.applied, snapshot);
      let held: string[] = [];
      if (partial) {
        held = [...changed].filter((key) => !listsKey(snapshot, key));
        changed = new Set([...changed].filter((key) => listsKey(snapshot, key)));
        this.logIncomplete(incomplete, held);
      }
      const result = await this.opts.backend.sync(snapshot, { full, changed, incomplete: partial, ...(full && !required ? { deferrable: true } : {}) });
      this.applied = snapshot;
      // On a partial sync the conntrack baseline is the last snapshot applied, so the keys changed since it are enough.
      const touched = full || this.pending.all ? undefined : this.pending.keys;
      this.pending = { all: false, keys: new Set() };
      if (full) {
        this.lastFullAt = this.lastCheckAt = Date.now();
        this.readBack = { owed: false, failures: 0, retryAt: Number.NEGATIVE_INFINITY };
      }
      if (!partial) this.deletionsHeld = false;
      else if (full || held.length > 0) this.deletionsHeld = true;
      await this.cleanConntrack(this.lastGood, snapshot, partial, touched);
      await this.cleanNotNATed(result, snapshot);
      this.lastGood = snapshot;
      const triggerTimes = this.triggers;
      this.triggers = new Map();
      this.record({ at: Date.now(), full, durationMs: performance.now() - start, result, incomplete, changes, triggerTimes, snapshot, ...(full ? {} : { changed }) });
      const level = full || changed.size > 0 ? 'info' : 'debug';
      this.opts.logger[level](
        {
          mode: this.opts.backend.mode,
          full: result.full,
          changed: full ? undefined : [...changed],
          services: result.services,
          endpoints: result.endpoints,
          written: result.written,
          deleted: result.deleted,
          transactions: result.transactions,
          bytes: result.bytes,
          readMs: round(result.readMs),
          applyMs: round(result.applyMs),
          durationMs: round(result.totalMs),
          ...(partial ? { incomplete: incomplete.length } : {}),
          // The mode's own fields (nftables mode: whether the elements went over nf_tables netlink or nft -f, and whether the structure changed).
          ...this.opts.syncLogFields?.(result.detail),
        },
        `${result.full ? 'full sync done' : 'partial sync done'}${partial ? '; deletions held: the source is incomplete' : ''}`,
      );
      return result;
    } catch (err) {
      if (full && !required && err instanceof ReadBackTimeoutError) {
        // Nothing was written and the backend still knows what it programmed: only the drift is unknown.
        this.putOffReadBack(err);
        return undefined;
      }
      this.applied = null;
      this.record({ at: Date.now(), full, durationMs: performance.now() - start, error: (err as Error).message, cause: err, incomplete, changes });
      throw err;
    }
  }

  /**
   * Whether a full sync is asked for now, the kernel state being known:
   * requested (SIGHUP), owed by a read-back put off whose retry time has
   * come, or the periodic check's verdict once `syncPeriodMs` has passed.
   */
  private async fullDue(requested: boolean): Promise<boolean> {
    if (requested) return true;
    if (this.readBack.owed) return Date.now() >= this.readBack.retryAt;
    if (Date.now() - this.lastCheckAt < this.opts.syncPeriodMs) return false;
    return this.periodicCheck();
  }

  /** A read-back ran past its bound: owe a full sync, retried after the sync period, doubling up to {@link MAX_READ_BACK_BACKOFF_MS}. */
  private putOffReadBack(err: ReadBackTimeoutError): void {
    const failures = this.readBack.failures + 1;
    const delay = Math.min(MAX_READ_BACK_BACKOFF_MS, (this.opts.syncPeriodMs > 0 ? this.opts.syncPeriodMs : 1000) * 2 ** (failures - 1));
    this.readBack = { owed: true, failures, retryAt: Date.now() + delay };
    this.opts.logger.warn(
      { err: err.message, retryInMs: delay, attempts: failures },
      'kernel read-back put off: drift is unknown until one finishes; changes are still served by partial syncs',
    );
  }

  /**
   * The check of each `syncPeriodMs`: a full sync when the backend has no
   * cheap drift check, when its check suspects drift (or fails), or when
   * the last full sync is `fullSyncPeriodMs` old; else no read-back.
   * @returns whether this sync is to be full.
   */
  private async periodicCheck(): Promise<boolean> {
    const check = this.opts.backend.driftCheck?.bind(this.opts.backend);
    if (!check || Date.now() - this.lastFullAt >= (this.opts.fullSyncPeriodMs ?? DEFAULT_FULL_SYNC_PERIOD_MS)) return true;
    let why: string | undefined;
    try {
      why = await check();
    } catch (err) {
      why = `the drift check failed: ${(err as Error).message}`;
    }
    if (why === undefined) {
      this.lastCheckAt = Date.now();
      return false;
    }
    this.opts.logger.info({ reason: why }, 'the kernel may have changed behind drover: full sync');
    return true;
  }

  /** What `read` changed since the previous read, counted (changes.ts countChanges); keeps its trigger times until a sync succeeds. */
  private countRead(read: SourceRead): ChangeCounts {
    const before = this.lastRead;
    this.lastRead = read.snapshot;
    for (const [key, times] of read.triggerTimes ?? []) {
      const known = this.triggers.get(key);
      if (known) known.push(...times);
      else this.triggers.set(key, [...times]);
    }
    const keys = read.changed ?? (before ? changedServicePorts(before, read.snapshot) : allPortKeys(read.snapshot));
    return countChanges(before, read.snapshot, keys);
  }

  /** Add what a read reports changed to the pending changes (everything when it cannot tell). */
  private collect(changed: ReadonlySet<string> | undefined): void {
    if (changed === undefined) this.pending.all = true;
    else if (!this.pending.all) for (const key of changed) this.pending.keys.add(key);
  }

  /** The service ports to rewrite on a partial sync from `applied` to `snapshot`: the pending ones, or the compared ones when a read could not tell. */
  private pendingChanges(applied: Snapshot, snapshot: Snapshot): Set<string> {
    return this.pending.all ? changedServicePorts(applied, snapshot) : new Set(this.pending.keys);
  }

  /** Say once per sync that the source is incomplete, what is missing, and which removals wait. */
  private logIncomplete(incomplete: readonly string[], held: readonly string[]): void {
    this.opts.logger.warn(
      { missing: incomplete, ...(held.length > 0 ? { heldServicePorts: held } : {}) },
      `source is incomplete (${incomplete.length} ${incomplete.length === 1 ? 'part' : 'parts'} could not be read): no service port is deleted until it is whole again`,
    );
  }

  private record(last: LastSync): void {
    this.last = last;
    this.emit('sync', last);
  }

  /** Queue a sync (the runner coalesces and paces them) and tell the `queued` listeners. */
  private queue(): void {
    this.emit('queued', Date.now());
    this.runner.run();
  }

  /** Call every listener of `event`; one that throws is logged. */
  private emit<E extends keyof ProxierEvents>(event: E, ...args: Parameters<ProxierEvents[E]>): void {
    for (const listener of this.listeners[event]) {
      try {
        (listener as (...a: Parameters<ProxierEvents[E]>) => void)(...args);
      } catch (err) {
        this.opts.logger.warn({ err: (err as Error).message, event }, `a ${event} listener failed`);
      }
    }
  }

  /**
   * Delete the UDP conntrack entries the sync left stale (on an incomplete
   * read, only those of service ports still listed). Not on the first
   * sync (drover does not know what was programmed before it started, and
   * deleting live flows to unchanged endpoints would break them). Only the
   * service ports in `keys` are looked at when given (every other one is
   * the same in both snapshots). Failures are logged: the rules are
   * already right, and the next change retries.
   */
  private async cleanConntrack(before: Snapshot | null, after: Snapshot, incomplete: boolean, keys: ReadonlySet<string> | undefined): Promise<void> {
    if (!this.opts.conntrack || !before) return;
    // On an incomplete read a missing service port may still be programmed: its flows are not stale.
    const from = incomplete ? listedIn(before, after, keys) : before;
    await this.deleteUDPFlows(staleUDPFlows(from, after, keys), 'stale UDP conntrack entries');
  }

  /** Delete each of `flows`' UDP conntrack entries, logging `what` was deleted, or could not be. Never throws. */
  private async deleteUDPFlows(flows: Iterable<StaleFlow>, what: string): Promise<void> {
    for (const flow of flows) {
      try {
        const deleted = await this.opts.conntrack!.deleteUDP(flow);
        this.opts.logger.info({ ...flow, deleted }, `deleted ${what}`);
      } catch (err) {
        this.opts.logger.warn({ ...flow, err: (err as Error).message }, `could not delete ${what}`);
      }
    }
  }

  /**
   * Delete the UDP conntrack entries of the snapshot's frontends that were
   * not DNATed, in each IP family whose result says its write may have let
   * new UDP flows through untranslated (SyncResult.udpNotNATed): the
   * kernel keeps such a flow on its entry without NAT for as long as
   * datagrams keep coming (conntrack/stale.ts notNATedUDPFlows). On the
   * first sync too: entries without NAT to a frontend with endpoints are
   * never a flow that works. Failures are logged, as cleanConntrack's.
   */
  private async cleanNotNATed(result: SyncResult, snapshot: Snapshot): Promise<void> {
    if (!this.opts.conntrack) return;
    // Each family's own result; without them, the whole result is the IPv4 family's (SyncResult.families).
    const families = resultsByFamily(result).flatMap(([f, r]) => (r.udpNotNATed ? [f] : []));
    if (families.length === 0) return;
    await this.deleteUDPFlows(notNATedUDPFlows(snapshot, families), 'UDP conntrack entries that were not DNATed');
  }

  /** Start the loop: watch the source and the kernel (Backend.watchDrift), then an immediate full sync, then on source changes, kernel changes and every sync period. */
  async start(): Promise<void> {
    await this.opts.source.watch(() => {
      this.signalled = true;
      this.queue();
    });
    // Before the first sync: what another program changes from then on is seen.
    await this.opts.backend.watchDrift?.((reason, full) => this.repair(reason, full));
    this.runner.start();
  }

  /**
   * A change behind drover's back seen by the backend's watch
   * (Backend.watchDrift): a full sync (`full`), or a sync in which the
   * backend repairs what it saw, as soon as the min sync period allows.
   */
  private repair(reason: string, full: boolean): void {
    this.opts.logger.info({ reason }, full ? 'the kernel changed behind drover: full sync' : 'the kernel changed behind drover: repairing what changed');
    if (full) this.resync();
    else this.queue();
  }

  /**
   * Queue a full sync (`drover run` on SIGHUP): the kernel is read back and
   * every difference repaired, as at the periodic resync.
   */
  resync(): void {
    this.fullRequested = true;
    this.queue();
  }

  /** Stop the loop and the source watch; the kernel rules are left in place. */
  async stop(): Promise<void> {
    await this.runner.stop();
    await this.opts.source.close();
    // An open socket of the backend (nftables mode's netlink) would keep the process alive.
    await this.opts.backend.close?.();
  }

  private async loop(): Promise<void> {
    try {
      await this.syncOnce();
      this.failures = 0;
    } catch (err) {
      this.failures++;
      const delay = Math.min(MAX_BACKOFF_MS, 1000 * 2 ** (this.failures - 1));
      this.opts.logger.error({ err: (err as Error).message, full: this.last?.full, retryInMs: delay }, 'sync failed; will retry with a full sync');
      this.emit('queued', Date.now());
      this.runner.retryAfter(delay);
    }
  }
}

/** The service ports of `before` (only those in `keys`, when given), of either family, that `after` still lists. */
function listedIn(before: Snapshot, after: Snapshot, keys: ReadonlySet<string> | undefined): Snapshot {
  const services = new Map<string, ServicePort>();
  const ipv6Services = new Map<string, ServicePort>();
  for (const key of keys ?? allPortKeys(before)) {
    if (!listsKey(after, key)) continue;
    const [v4, v6] = portsOfKey(before, key);
    if (v4 !== undefined) services.set(key, v4);
    if (v6 !== undefined) ipv6Services.set(key, v6);
  }
  return { services, ...(ipv6Services.size > 0 ? { ipv6Services } : {}), ...(before.node !== undefined ? { node: before.node } : {}) };
}

/** Whether `snapshot` has service port `key` in either family (family.ts). */
function listsKey(snapshot: Snapshot, key: string): boolean {
  const [v4, v6] = portsOfKey(snapshot, key);
  return v4 !== undefined || v6 !== undefined;
}

function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}

/** The node as the endpoint policy reads it: all of it but `leaving`, which only /healthz follows. */
function policyNode(node: NodeInfo | undefined): Omit<NodeInfo, 'leaving'> | undefined {
  if (node === undefined) return undefined;
  const { leaving: _leaving, ...policy } = node;
  return policy;
}
