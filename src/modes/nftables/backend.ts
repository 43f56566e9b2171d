/**
 * The nftables backend: drover's own table `ip drover` (layout.ts), where
 * Services and endpoints are set and map elements; with `render.family`
 * IPv6, the same for `ip6 drover` (two of them, one per family, make
 * nftables mode's dual-stack backend: dual-stack.ts).
 *
 * - Full sync (first sync, periodic resync, after a failure): read the
 *   table back (over netlink with the element writer, else `nft -j`),
 *   compare every frontend, the hairpin set and the structure with the
 *   desired state, and write only what differs, in one
 *   transaction. A restart adopts the live table without flushing it; a
 *   table whose sets or base chains cannot be mended in place is written
 *   again whole, in the same single transaction.
 * - Partial sync: plan only the changed service ports' frontends against
 *   what the last syncs wrote (model.ts), without reading the kernel; its
 *   planning, encoding and bookkeeping cost O(the changed service ports),
 *   whatever the number of Services (no copy or walk of the whole state).
 * - Element-only changes (the common ones: an endpoint or a service added
 *   or removed) go through the element writer (nf_tables netlink) when
 *   there is one; anything structural (a new endpoint count, repairs) is
 *   one `nft -f` script with the elements in it.
 * - On an incomplete source a full sync deletes nothing of frontends the
 *   snapshot does not list, keeps every endpoint-count set and leaves the
 *   hairpin set's extra entries.
 */
import { ServedFrontends } from '../shared/served-frontends.ts';
import type { Logger } from '../../util/log.ts';
import { ServingEndpointCount } from '../../model/policy.ts';
import type { Snapshot } from '../../model/types.ts';
import type { Backend, ChangeSet, CleanupResult, ObjectCounts, SyncResult } from '../../proxier/backend.ts';
import type { RenderOptions } from '../../config/render.ts';
import { claimFrontends, conflictText, desiredNft, releasedOwners, uniqueFrontends, type DesiredFrontend, type DesiredOptions, type FrontendConflict } from './desired.ts';
import type { NftExec } from './exec.ts';
import type { LiveSet, LiveTable } from './live.ts';
import { AFFINITY_MAP, FIREWALL_ALLOW, HAIRPIN, MEMBERSHIP_SETS, countOfSet, tableRef, timeoutOfSet, type Layout } from './layout.ts';
import { elementLines } from './script.ts';
import { NftBatchTooLargeError, NftRequestError } from '../../kernel/nftables/client.ts';
import { NftDecodeError } from '../../kernel/nftables/errors.ts';
import { TableModel, type ElementOp } from './model.ts';
import { isEmptyStructure, layoutAfter, orderOps, planFrontend, planHairpin, planStructure, type StructurePlan } from './plan.ts';
import { transactionScript } from './script.ts';
import { netlinkRulesOf } from './netlink-rules.ts';
import { commitInBatches, fillOrder } from './batches.ts';
import type { NftablesSyncDetail } from './sync-detail.ts';
import { collectWhenGrown, SYNC_GROWTH_BOUND } from '../../util/gc.ts';

/**
 * The structure of drover's table (its sets without elements): from the
 * element writer's netlink dumps, or with `nft -j -t` when the writer reads
 * none, or when its read fails (the kernel refused a dump, the ruleset kept
 * changing under it, or it holds something the decoder does not know: a
 * hand-added verdict map, say), so that a full sync can still repair the
 * table. The failure is logged, naming the table.
 */
export async function liveStructure(elements: ElementWriter | undefined, nft: NftExec, logger: Logger, table: string): Promise<LiveTable> {
  try {
    const live = await elements?.structure?.();
    if (live !== undefined) return live;
  } catch (err) {
    if (!(err instanceof NftRequestError || err instanceof NftDecodeError)) throw err;
    logger.warn({ table, err: (err as Error).message }, `reading table ${table} over netlink failed; reading it with nft -j instead`);
  }
  return nft.list({ terse: true });
}

/** Writes element operations as one kernel transaction (nf_tables netlink). */
export interface ElementWriter {
  /**
   * Commit `ops` (ordered: deletes, then adds) to drover's table, all or nothing.
   * @returns the bytes sent.
   * @throws an error naming the set and errno when the kernel refuses any of them.
   */
  commit(ops: readonly ElementOp[]): Promise<number>;
  /** False when some of `ops` are for sets it does not write (they then go with `nft -f`); default true. */
  accepts?(ops: readonly ElementOp[]): boolean;
  /**
   * The elements of set or map `set` of drover's table, as element texts (a map's: key → value), read
   * from the kernel (a netlink dump); undefined for a set it does not read (then `nft -j` reads it).
   */
  read?(set: string): Promise<Map<string, string | undefined> | undefined>;
  /**
   * The table's structure as the kernel has it, its sets without elements (nf_tables netlink dumps of its chains,
   * sets and rules: live-netlink.ts); undefined when it reads none (then a full sync lists it with `nft -j -t`).
   */
  structure?(): Promise<LiveTable | undefined>;
  /** The ruleset's generation id (NFT_MSG_GETGEN): it changes with every committed transaction of the namespace. */
  generation?(): Promise<number>;
  /** Close its socket. */
  close?(): void;
}

/** Options of the nftables backend. */
export interface NftablesBackendOptions {
  /** nft for the table of `render.family`. */
  readonly nft: NftExec;
  /** Element-only transactions go here (for the table of `render.family`); without one they are `nft -f` scripts too. */
  readonly elements?: ElementWriter;
  /** The table's family (`family`, default IPv4) and the masquerade options. */
  readonly render: RenderOptions;
  /** This node's NodePort addresses of the family (desired.ts). */
  readonly frontends: DesiredOptions;
  readonly logger: Logger;
}

/** Every frontend the model holds an element of (any frontend set, slot map or firewall-allow). */
export function modelFrontends(model: TableModel): Set<string> {
  const all = new Set<string>();
  for (const slots of model.slots.values()) for (const f of slots.keys()) all.add(f);
  const frontendSets = new Set<string>(MEMBERSHIP_SETS);
  for (const [name, elements] of model.sets) {
    if (frontendSets.has(name) || countOfSet(name) !== undefined || timeoutOfSet(name) !== undefined) for (const f of elements) all.add(f);
    if (name === FIREWALL_ALLOW) for (const e of elements) all.add(e.split(' . ').slice(0, 3).join(' . '));
  }
  return all;
}

/** What a full sync writes: {@link planFullSync}. */
export interface FullSyncPlan {
  /** Element operations, unordered; planned from an empty table when `structure.rebuild`. */
  readonly ops: ElementOp[];
  readonly want: Layout;
  readonly structure: StructurePlan;
  /** The frontends of each service port once written. */
  readonly applied: Map<string, readonly DesiredFrontend[]>;
  /** Service ports left out (a frontend of theirs belongs to another). */
  readonly conflicts: readonly FrontendConflict[];
}

/**
 * What a full sync of `snapshot` writes onto the table `model` read back
 * (see the module comment); pure. `diff` and `status` show the same plan.
 * `incumbents` (frontend → service port, as the last sync left them) keep
 * a frontend two service ports want (desired.ts desiredNft).
 */
export function planFullSync(
  model: TableModel,
  snapshot: Snapshot,
  render: RenderOptions,
  frontends: DesiredOptions,
  incomplete: boolean,
  incumbents: ReadonlyMap<string, string> = new Map(),
): FullSyncPlan {
  const family = render.family ?? 'IPv4';
  const desired = desiredNft(snapshot, (frontends.family ?? 'IPv4') === family ? frontends : { ...frontends, family }, incumbents);
  const applied = new Map<string, readonly DesiredFrontend[]>();
  for (const f of desired.frontends.values()) applied.set(f.servicePort, [...(applied.get(f.servicePort) ?? []), f]);
  const planAll = (m: TableModel): ElementOp[] => {
    const out: ElementOp[] = [];
    for (const [text, f] of desired.frontends) planFrontend(m, text, f, out);
    if (!incomplete) for (const text of modelFrontends(m)) if (!desired.frontends.has(text)) planFrontend(m, text, undefined, out);
    planHairpin(m, new Set([...desired.frontends.values()].flatMap((f) => f.hairpin)), incomplete, out);
    return out;
  };
  let ops = planAll(model);
  let want = layoutAfter(model, ops, render, incomplete);
  const structure = planStructure(model, want, !incomplete);
  if (structure.rebuild && model.exists) {
    const empty = new TableModel();
    ops = planAll(empty);
    want = layoutAfter(empty, ops, render, false);
  }
  return { ops, want, structure, applied, conflicts: desired.conflicts };
}

/**
 * The model of the table once `structure`, `want` and `ops` (ordered) are
 * written onto the table `model` describes: `model` itself, updated, or a
 * new model when the table is written again whole (`structure.rebuild`).
 * A plan onto an empty model gives the table a first sync writes
 * (`.toLive()`: as the kernel would list it).
 */
export function modelAfterWrite(model: TableModel, structure: StructurePlan, want: Layout, ops: readonly ElementOp[]): TableModel {
  if (structure.rebuild) {
    const m = new TableModel();
    m.exists = true;
    return modelAfterWrite(m, { rebuild: false, addSets: want.sets, writeChains: want.chains, deleteSets: [], deleteChains: [] }, want, ops);
  }
  for (const s of structure.addSets) {
    model.types.set(s.name, { keyType: s.keyType, ...(s.mapType !== undefined ? { mapType: s.mapType } : {}) });
    if (s.mapType === undefined) model.sets.set(s.name, new Set());
  }
  for (const c of structure.writeChains) model.chains.set(c.name, { ...(c.base ? { base: { ...c.base, policy: 'accept' } } : {}), comments: c.rules.map((r) => r.comment) });
  model.apply(ops);
  for (const name of structure.deleteChains) model.chains.delete(name);
  for (const name of structure.deleteSets) {
    model.types.delete(name);
    model.sets.delete(name);
  }
  return model;
}

/** nftables-mode Backend. */
/** What the clean-up of stale affinity entries after a sync did: entries deleted, and whether it failed. */
interface AffinityCleanup {
  readonly deleted: number;
  readonly failed: boolean;
}

export class NftablesBackend implements Backend {
  readonly mode = 'nftables' as const;
  /** The table as the last syncs left it; null = unknown, so the next sync is full. */
  private model: TableModel | null = null;
  /** The frontends each service port was last programmed with. */
  private applied = new Map<string, readonly DesiredFrontend[]>();
  /** The ruleset's generation id after drover's last write; undefined when unknown. */
  private generation: number | undefined;
  /** Which service port owns each frontend. */
  private owner = new Map<string, string>();
  /** How many programmed frontends use each hairpin entry. */
  private hairpinRefs = new Map<string, number>();
  /** The endpoints of ClusterIP traffic per service port, for the sync result. */
  private readonly serving = new ServingEndpointCount();

  /** The NodePort addresses and the family, as desired.ts takes them. */
  private readonly frontends: DesiredOptions;

  /** The frontends served, settled once for every mode (shared/served-frontends.ts). */
  private readonly served: ServedFrontends;

  constructor(private readonly opts: NftablesBackendOptions) {
    this.frontends = { ...opts.frontends, family: opts.render.family ?? 'IPv4' };
    this.served = new ServedFrontends(this.frontends.family!, opts.logger);
  }

  async sync(given: Snapshot, asked: ChangeSet): Promise<SyncResult> {
    const start = performance.now();
    const { view: snapshot, changes } = this.served.settle(given, asked);
    const full = changes.full || this.model === null;
    const incomplete = changes.incomplete === true;
    let readMs = 0;
    try {
      let model: TableModel;
      let ops: ElementOp[] = [];
      let want: Layout;
      let structure: StructurePlan;
      // A full sync's frontends of every service port; a partial sync's of the changed ones ([] for gone).
      let nextApplied: Map<string, readonly DesiredFrontend[]> | undefined;
      let updates: Map<string, readonly DesiredFrontend[]> | undefined;
      if (full) {
        const readStart = performance.now();
        model = TableModel.fromLive(await this.readLive());
        readMs = performance.now() - readStart;
        const planned = planFullSync(model, snapshot, this.opts.render, this.frontends, incomplete, this.owner);
        for (const c of planned.conflicts) this.opts.logger.warn({ servicePort: c.servicePort, frontend: c.frontend, field: c.field, owner: c.owner }, conflictText(c));
        if (planned.structure.rebuild && model.exists) {
          this.opts.logger.warn('drover table has sets or base chains of another shape; writing it again whole, in one transaction');
        }
        ({ ops, want, structure, applied: nextApplied } = planned);
      } else {
        model = this.model!;
        updates = new Map();
        const touched = new Map<string, DesiredFrontend | undefined>();
        // The changed service ports give up their frontends and claim them again, as a full sync would hand them out.
        const owners = releasedOwners(this.owner, changes.changed);
        const candidates = [...changes.changed].sort().map((key) => {
          const sp = snapshot.services.get(key);
          return [sp, key, sp ? uniqueFrontends(sp, snapshot.node, this.frontends) : []] as const;
        });
        const { accepted, conflicts } = claimFrontends(candidates, owners, this.owner);
        for (const c of conflicts) this.opts.logger.warn({ servicePort: c.servicePort, frontend: c.frontend, field: c.field, owner: c.owner }, conflictText(c));
        for (const key of changes.changed) {
          for (const f of this.applied.get(key) ?? []) if (!touched.has(f.frontend)) touched.set(f.frontend, undefined);
          updates.set(key, []);
        }
        for (const [key, after] of accepted) {
          for (const f of after) touched.set(f.frontend, f);
          updates.set(key, after);
        }
        for (const [text, f] of touched) planFrontend(model, text, f, ops);
        this.planHairpinChanges(updates, model, ops);
        want = layoutAfter(model, ops, this.opts.render, true);
        structure = planStructure(model, want, false);
      }

      ops = orderOps(ops);
      const { bytes, transactions, applyMs, via, picksReplaced } = await this.write(structure, want, model, ops, full);
      this.model = modelAfterWrite(model, structure, want, ops);
      let cleaned: AffinityCleanup;
      if (nextApplied) {
        this.remember(nextApplied);
        cleaned = await this.cleanAffinity(model.affinity, undefined);
      } else {
        // The frontends that had affinity before the change: their entries may point to endpoints now gone.
        const scope = new Set([...updates!.keys()].flatMap((key) => (this.applied.get(key) ?? []).filter((f) => f.affinitySeconds !== undefined).map((f) => f.frontend)));
        this.update(updates!);
        cleaned = scope.size > 0 ? await this.cleanAffinity(undefined, scope) : { deleted: 0, failed: false };
      }
      const affinityDeleted = cleaned.deleted;
      this.generation = this.opts.elements?.generation ? await this.opts.elements.generation() : undefined;
      const counted = this.counts(structure.rebuild ? { ...structure, addSets: want.sets, writeChains: want.chains } : structure, ops, affinityDeleted);
      const detail: NftablesSyncDetail = { mode: 'nftables', via, structural: !isEmptyStructure(structure), ...(cleaned.failed ? { cleanupFailed: true } : {}) };
      return {
        full,
        services: snapshot.services.size,
        endpoints: full ? this.serving.reset(snapshot) : this.serving.update(snapshot, changes.changed),
        written: counted.written,
        deleted: counted.deleted,
        bytes,
        transactions,
        readMs,
        applyMs,
        totalMs: performance.now() - start,
        detail,
        // Between the script and the netlink transaction the rewritten chain's pick rules DNATed TCP only (pick-rule.ts).
        ...(picksReplaced ? { udpNotNATed: true as const } : {}),
      };
    } catch (err) {
      this.model = null;
      throw err;
    }
  }

  /**
   * Delete the affinity entries that point to an endpoint their frontend
   * no longer has, or belong to a frontend without affinity now: from
   * `entries` (a full sync's read-back), or, after a partial sync, from
   * the map as it is now (over netlink with the element reader, else
   * `nft -j`), for the frontends of `scope` (those that had affinity
   * before it). Best effort, in a transaction of its own: an entry
   * can expire meanwhile, and a failure is logged; the next full sync
   * looks again. Returns the entries deleted, and whether reading the map
   * or the deleting transaction failed (kube-proxy counts such a failed
   * clean-up transaction in `sync_proxy_rules_nftables_cleanup_failures_total`).
   */
  private async cleanAffinity(entries: ReadonlyMap<string, string> | undefined, scope: ReadonlySet<string> | undefined): Promise<AffinityCleanup> {
    if (entries === undefined) {
      try {
        const read = (await this.opts.elements?.read?.(AFFINITY_MAP)) ?? (await this.opts.nft.listSet(AFFINITY_MAP, 'map'))?.elements ?? new Map();
        entries = new Map([...read].filter((e): e is [string, string] => e[1] !== undefined));
      } catch (err) {
        this.opts.logger.warn({ err: (err as Error).message }, 'could not read the affinity map; stale entries stay until the next full sync');
        return { deleted: 0, failed: true };
      }
    }
    const stale: string[] = [];
    for (const [key, target] of entries) {
      const frontend = key.split(' . ').slice(1).join(' . ');
      if (scope && !scope.has(frontend)) continue;
      const f = this.frontendOf(frontend);
      if (f?.affinitySeconds === undefined || !(f.targets.includes(target) || f.local.includes(target))) stale.push(key);
    }
    if (stale.length === 0) return { deleted: 0, failed: false };
    try {
      await this.opts.nft.run(`${elementLines(stale.map((key) => ({ op: 'delete', set: AFFINITY_MAP, key })), this.frontends.family).join('\n')}\n`);
      return { deleted: stale.length, failed: false };
    } catch (err) {
      this.opts.logger.warn({ err: (err as Error).message, entries: stale.length }, 'could not delete stale affinity entries; the next full sync tries again');
      return { deleted: 0, failed: true };
    }
  }

  /** Hairpin entries whose use count goes from 0 to more, or back, when the service ports of `updates` get their new frontends. Costs O(the change). */
  private planHairpinChanges(updates: ReadonlyMap<string, readonly DesiredFrontend[]>, model: TableModel, ops: ElementOp[]): void {
    const delta = new Map<string, number>();
    const bump = (e: string, d: number): void => void delta.set(e, (delta.get(e) ?? 0) + d);
    for (const [key, after] of updates) {
      for (const f of this.applied.get(key) ?? []) for (const e of f.hairpin) bump(e, -1);
      for (const f of after) for (const e of f.hairpin) bump(e, +1);
    }
    for (const [e, d] of delta) {
      const has = model.has(HAIRPIN, e);
      const used = (this.hairpinRefs.get(e) ?? 0) + d > 0;
      if (used && !has) ops.push({ op: 'add', set: HAIRPIN, key: e });
      if (!used && has) ops.push({ op: 'delete', set: HAIRPIN, key: e });
    }
  }

  /**
   * The live table: with an element reader, its structure from the reader's
   * netlink dumps (or `nft -j -t` when it reads no structure) and each set's
   * elements from the reader, else all of it from `nft -j` (which at 10,000
   * services takes seconds and hundreds of megabytes of JSON).
   */
  private async readLive(): Promise<LiveTable> {
    const reader = this.opts.elements;
    if (!reader?.read) return this.opts.nft.list();
    const live = await liveStructure(reader, this.opts.nft, this.opts.logger, tableRef(this.frontends.family));
    const sets = new Map<string, LiveSet>();
    for (const [name, set] of live.sets) {
      const elements = (await reader.read(name)) ?? (await this.opts.nft.listSet(name, set.mapType !== undefined ? 'map' : 'set'))?.elements ?? new Map();
      sets.set(name, { ...set, elements });
    }
    return { ...live, sets };
  }

  /**
   * Put the elements of `sets` back as the last syncs left them (the model),
   * after another program added or deleted some (repair-watch.ts): each set
   * read over netlink and compared with the model, the difference written in
   * one netlink transaction. The `affinity` map is skipped (its entries come
   * from packets). Costs O(the sets' elements), not a full read-back.
   * @returns the elements written, or undefined when this cannot be done so
   *   (nothing known yet, a set the model or the netlink reader does not
   *   know, the writer not taking them, or the read failed): a full sync is needed.
   * @throws what the netlink transaction threw.
   */
  async repairElements(sets: ReadonlySet<string>): Promise<number | undefined> {
    const model = this.model;
    const writer = this.opts.elements;
    if (model === null || writer?.read === undefined) return undefined;
    const ops: ElementOp[] = [];
    for (const name of sets) {
      if (name === AFFINITY_MAP) continue;
      if (!model.types.has(name)) return undefined;
      let live: Map<string, string | undefined> | undefined;
      try {
        live = await writer.read(name);
      } catch (err) {
        if (!(err instanceof NftRequestError || err instanceof NftDecodeError)) throw err;
        return undefined;
      }
      if (live === undefined) return undefined;
      const want = model.elementsOf(name);
      for (const [key, value] of want) {
        const add: ElementOp = { op: 'add', set: name, key, ...(value !== undefined ? { value } : {}) };
        if (!live.has(key)) ops.push(add);
        else if (live.get(key) !== value) ops.push({ op: 'delete', set: name, key }, add);
      }
      for (const key of live.keys()) if (!want.has(key)) ops.push({ op: 'delete', set: name, key });
    }
    if (ops.length === 0) return 0;
    if (!(writer.accepts?.(ops) ?? true)) return undefined;
    await writer.commit(orderOps(ops));
    return ops.length;
  }

  /**
   * The cheap drift check between full syncs: the ruleset's generation id
   * (any committed transaction in this namespace, drover's or another
   * program's, changes it) against the one after drover's last write.
   */
  async driftCheck(): Promise<string | undefined> {
    if (this.model === null) return 'nothing is known to be programmed';
    const generation = this.opts.elements?.generation;
    if (!generation) return 'no generation id to compare (nft only)';
    const now = await generation.call(this.opts.elements);
    return now === this.generation ? undefined : `the nf_tables generation moved from ${this.generation} to ${now}: a transaction other than drover's`;
  }

  /**
   * Write the sync: elements alone through the element writer when nothing structural changes (one transaction),
   * else one nft script (and, after it, the rules nft cannot write, over netlink: NftExec.addRules). A table
   * created from nothing (first sync from empty, or after `cleanup`) with an element writer is written in two
   * steps instead: the script holds its structure and the elements the writer does not take, then the other
   * elements follow over netlink in as few batches as the socket takes, in fill order (batches.ts), so that nft
   * parses no more than the structure. With `full` (a full sync, whose read-back and plan are garbage by now), the
   * heap's growth is collected as the transaction goes out (util/gc.ts collectWhenGrown); never on a partial sync,
   * whose clock a full collection of a large heap would dominate.
   * @returns the bytes sent, the transactions committed, the time and how; `picksReplaced` when pick rules the
   *   script wrote TCP-only were replaced over netlink (new UDP and SCTP flows were not DNATed in between).
   */
  private async write(
    structure: StructurePlan,
    want: Layout,
    model: TableModel,
    ops: readonly ElementOp[],
    full: boolean,
  ): Promise<{ bytes: number; transactions: number; applyMs: number; via: NftablesSyncDetail['via']; picksReplaced?: boolean }> {
    const t0 = performance.now();
    const writer = this.opts.elements;
    if (isEmptyStructure(structure)) {
      if (ops.length === 0) return { bytes: 0, transactions: 0, applyMs: 0, via: 'none' };
      if (writer && (writer.accepts?.(ops) ?? true)) {
        try {
          const committing = writer.commit(ops);
          if (full) collectWhenGrown(SYNC_GROWTH_BOUND);
          const bytes = await committing;
          return { bytes, transactions: 1, applyMs: performance.now() - t0, via: 'netlink' };
        } catch (err) {
          // A batch too large for the socket's buffers is sent as a script instead; anything else is the kernel's answer.
          if (!(err instanceof NftBatchTooLargeError)) throw err;
          this.opts.logger.info({ elements: ops.length }, 'element batch too large for one netlink transaction; writing it with nft -f');
        }
      }
    }
    // A table created from nothing: the writer's elements go over netlink after the script, the others in it.
    const byNetlink: ElementOp[] = [];
    const kept: ElementOp[] = [];
    if (!model.exists && writer !== undefined) for (const op of ops) ((writer.accepts?.([op]) ?? true) ? byNetlink : kept).push(op);
    const byScript = byNetlink.length > 0 ? kept : ops;
    const script = transactionScript(structure, want, model, byScript, this.frontends.family);
    const running = this.opts.nft.run(script);
    if (full) collectWhenGrown(SYNC_GROWTH_BOUND);
    await running;
    let bytes = Buffer.byteLength(script);
    let transactions = 1;
    // The rules nft cannot write as meant follow in a netlink transaction of their own (netlink-rules.ts): the IPv6
    // affinity record rules appended (until it commits no new IPv6 affinity entries), the pick rules put in place of
    // the script's TCP-only ones (until it commits new UDP and SCTP flows through a chain just written are not
    // DNATed). When it fails the sync fails, and the next full sync finds those chains' comments other than the
    // layout's and writes them again.
    const extra = netlinkRulesOf(structure.rebuild ? want.chains : structure.writeChains);
    if (extra.length > 0) {
      const added = await this.opts.nft.addRules(extra);
      bytes += added.bytes;
      transactions += added.transactions;
    }
    if (byNetlink.length > 0) {
      // A failed batch fails the sync: the model is forgotten, and the next full sync reads the table back and mends it.
      const filled = await commitInBatches((batch) => writer!.commit(batch), fillOrder(byNetlink));
      bytes += filled.bytes;
      transactions += filled.transactions;
      this.opts.logger.debug({ elements: byNetlink.length, batches: filled.transactions, batchOps: filled.batchOps }, 'table filled over netlink');
    }
    const picksReplaced = extra.some((r) => r.rule.netlink?.kind === 'pick');
    return { bytes, transactions, applyMs: performance.now() - t0, via: byNetlink.length > 0 ? 'nft+netlink' : 'nft', picksReplaced };
  }

  /** Take `next` as every service port's frontends (a full sync); rebuilds the owner and hairpin indexes. Costs O(service ports). */
  private remember(next: Map<string, readonly DesiredFrontend[]>): void {
    this.applied = new Map();
    this.owner = new Map();
    this.hairpinRefs = new Map();
    this.update(next);
  }

  /** Give the service ports of `updates` their new frontends ([]: gone), keeping the indexes. Costs O(the change). */
  private update(updates: ReadonlyMap<string, readonly DesiredFrontend[]>): void {
    const bump = (e: string, d: number): void => {
      const n = (this.hairpinRefs.get(e) ?? 0) + d;
      if (n > 0) this.hairpinRefs.set(e, n);
      else this.hairpinRefs.delete(e);
    };
    for (const [key, after] of updates) {
      for (const f of this.applied.get(key) ?? []) {
        if (this.owner.get(f.frontend) === key) this.owner.delete(f.frontend);
        for (const e of f.hairpin) bump(e, -1);
      }
      for (const f of after) {
        this.owner.set(f.frontend, key);
        for (const e of f.hairpin) bump(e, +1);
      }
      if (after.length > 0) this.applied.set(key, after);
      else this.applied.delete(key);
    }
  }

  /** The programmed frontend `frontend`, through its owner. */
  private frontendOf(frontend: string): DesiredFrontend | undefined {
    const key = this.owner.get(frontend);
    return key === undefined ? undefined : this.applied.get(key)?.find((f) => f.frontend === frontend);
  }

  /** What a sync wrote and deleted, by kind; `affinityDeleted` stale affinity entries deleted after it. */
  private counts(structure: StructurePlan, ops: readonly ElementOp[], affinityDeleted: number): { written: ObjectCounts; deleted: ObjectCounts } {
    const adds = ops.filter((o) => o.op === 'add').length;
    return {
      written: { 'set entry': adds, set: structure.addSets.length, chain: structure.writeChains.length },
      deleted: { 'set entry': ops.length - adds + affinityDeleted, set: structure.deleteSets.length, chain: structure.deleteChains.length },
    };
  }

  /**
   * Take the ruleset's generation id as it is now as drover's own: the
   * other family's table was written after this one (dual-stack.ts), which
   * moved it. Nothing when this family's last sync failed or there is no
   * generation id to read.
   */
  async acknowledgeGeneration(): Promise<void> {
    if (this.model !== null && this.opts.elements?.generation) this.generation = await this.opts.elements.generation();
  }

  /** Close the element writer's socket (drover run stopping); the table stays as it is. */
  close(): void {
    this.opts.elements?.close?.();
  }

  /** Delete drover's table of the family, and nothing else; reports the chains and sets it held. */
  async cleanup(): Promise<CleanupResult> {
    const live = await this.opts.nft.list();
    this.model = null;
    if (!live.exists) return { removed: { chain: 0, set: 0 }, kept: [] };
    const table = tableRef(this.frontends.family);
    await this.opts.nft.run(`delete table ${table}\n`);
    const removed = { chain: live.chains.size, set: live.sets.size };
    this.opts.logger.info({ removed }, `deleted table ${table}`);
    return { removed, kept: [] };
  }
}
