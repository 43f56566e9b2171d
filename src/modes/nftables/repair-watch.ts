/**
 * Repairs from the kernel's own events: nftables mode's use of the
 * nf_tables notification watcher (kernel/nftables/watch.ts) on drover's
 * tables `ip drover` and `ip6 drover`.
 *
 * - A batch drover committed itself is recognised by its generation id:
 *   after each of its own transactions drover reads the ruleset generation
 *   (NFT_MSG_GETGEN, {@link RepairWatch.writing}) and keeps it; the batch
 *   whose NEWGEN carries that id is its own. Should another program commit
 *   between drover's transaction and that read, drover's batch is taken for
 *   a foreign one and repaired: a read-back more, never a change missed.
 *   Batches are judged only while no write of drover's is in flight.
 * - A batch that touches only other tables never reaches this module (the
 *   watcher drops it): no generation read, no read-back.
 * - A batch of someone else's on drover's tables asks for a repair after a
 *   short debounce ({@link REPAIR_DEBOUNCE_MS}), so that a burst of them is
 *   one repair; lost notifications (`overrun`) or an unreadable datagram
 *   (`unknown`) ask for one too, since what changed is unknown.
 *
 * When the foreign batches changed only elements of named sets, the repair
 * is of those sets alone: the listener is asked for a sync that is not full
 * (`full` false), during which the backend takes the sets
 * ({@link RepairWatch.takeElementRepairs}), reads each back and writes the
 * difference (backend.ts repairElements); when it cannot, it asks for a full
 * one ({@link RepairWatch.escalate}). Anything else (a set, chain, rule or
 * table added or deleted, lost notifications) is the proxier's full sync:
 * drover's tables read back whole and mended. The reason of a full repair
 * is also kept, until a full sync begins, for the periodic drift check
 * ({@link RepairWatch.drift}). Before {@link RepairWatch.start} (`drover
 * sync --once`, `cleanup`) nothing is watched; drover's writes are still
 * noted.
 */
import type { Logger } from '../../util/log.ts';
import type { NftCommittedBatch, NftObjectKind } from '../../kernel/nftables/batch-scan.ts';
import type { NftWatcher, NftWatchEvent } from '../../kernel/nftables/watch.ts';
import type { ElementWriter } from './backend.ts';
import type { NftExec } from './exec.ts';
import type { ElementOp } from './model.ts';

/** How long a batch waits before it is judged, ms: the rest of a burst joins it in one repair. */
export const REPAIR_DEBOUNCE_MS = 30;

/** How many of drover's own generation ids are remembered (a full sync from nothing commits a few dozen batches). */
const OWN_KEPT = 4096;

/** Options of a {@link RepairWatch}. */
export interface RepairWatchOptions {
  /**
   * Open the watcher of drover's tables (kernel/nftables/watch.ts
   * spawnNftWatcher), at {@link RepairWatch.start}: only `drover run` watches.
   * @throws when it cannot be opened.
   */
  readonly open: () => Promise<NftWatcher>;
  readonly logger: Logger;
  /** Debounce, ms (default {@link REPAIR_DEBOUNCE_MS}). */
  readonly debounceMs?: number;
}

/** See the module comment. */
export class RepairWatch {
  private readonly own = new Set<number>();
  private pending: NftCommittedBatch[] = [];
  /** Why everything must be read back (an overrun, an unreadable datagram), when so. */
  private unknown: string | undefined;
  /** Writes of drover's in flight. */
  private inFlight = 0;
  private timer: NodeJS.Timeout | undefined;
  /** The last reason found and not yet covered by a full sync. */
  private reason: string | undefined;
  private listener: ((reason: string, full: boolean) => void) | undefined;
  /** Sets whose elements another program changed, per table (`ip drover`), not yet repaired. */
  private elementRepairs = new Map<string, Set<string>>();
  private watcher: NftWatcher | undefined;
  private closed = false;
  /** Repairs asked for, foreign batches seen on drover's tables, own batches recognised. */
  readonly counts = { repairs: 0, foreign: 0, own: 0 };

  constructor(private readonly opts: RepairWatchOptions) {}

  /**
   * Open the watcher and ask `listener` for a repair whenever one is needed
   * from now on: a full sync (`full`), or a sync during which the backend
   * repairs the elements of {@link takeElementRepairs}.
   * @returns false, with a warning, when the watcher cannot be opened (then nothing is watched).
   */
  async start(listener: (reason: string, full: boolean) => void): Promise<boolean> {
    if (this.closed) return false;
    try {
      this.watcher = await this.opts.open();
    } catch (err) {
      this.opts.logger.warn({ err: (err as Error).message }, 'cannot watch nf_tables notifications; between full syncs, drift is found by comparing the generation id at each sync period');
      return false;
    }
    this.watcher.onEvent((e) => this.onEvent(e));
    this.listener = listener;
    this.opts.logger.info('watching nf_tables notifications: another program\'s change to drover\'s tables is repaired at once');
    return true;
  }

  /**
   * The reason for a full sync found since the last one began, or undefined:
   * the periodic drift check's answer while the watcher runs.
   */
  drift(): string | undefined {
    return this.reason;
  }

  /** A full sync begins: what was found before it is covered by its read-back. */
  covered(): void {
    this.reason = undefined;
    this.elementRepairs = new Map();
  }

  /** The sets whose elements another program changed, per table (`ip drover`), since the last call; they are the caller's to repair now. */
  takeElementRepairs(): Map<string, Set<string>> {
    const out = this.elementRepairs;
    this.elementRepairs = new Map();
    return out;
  }

  /** The elements could not be repaired alone (`why`): ask for a full sync. */
  escalate(why: string): void {
    this.reason = why;
    this.counts.repairs++;
    this.listener?.(why, true);
  }

  /**
   * Run `write`, one of drover's transactions, then read the generation id
   * with `generation` and take it as drover's own; no batch is judged
   * meanwhile. A failed generation read is logged (its batch will then be
   * repaired as someone else's).
   * @returns what `write` returned.
   * @throws what `write` threw.
   */
  async writing<T>(write: () => Promise<T>, generation: () => Promise<number>): Promise<T> {
    this.inFlight++;
    try {
      const out = await write();
      try {
        this.noteOwn(await generation());
      } catch (err) {
        this.opts.logger.warn({ err: (err as Error).message }, 'could not read the nf_tables generation after a write of drover\'s; its notification will be taken for another program\'s');
      }
      return out;
    } finally {
      // A failed write may still have committed nothing or part: what is pending is judged now, against what is known.
      this.inFlight--;
      if (this.inFlight === 0 && (this.pending.length > 0 || this.unknown !== undefined)) this.schedule();
    }
  }

  /** Stop watching and close the watcher's socket. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.watcher?.close();
  }

  private noteOwn(gen: number): void {
    this.own.add(gen);
    if (this.own.size > OWN_KEPT) this.own.delete(this.own.values().next().value!);
  }

  private onEvent(e: NftWatchEvent): void {
    if (this.closed) return;
    if (e.type === 'batch') this.pending.push(e.batch);
    else {
      this.unknown = e.type === 'overrun' ? `nf_tables notifications were lost (${e.detail})` : `an nf_tables notification could not be read (${e.reason})`;
      this.opts.logger.warn({ event: e.type, detail: e.type === 'overrun' ? e.detail : e.reason }, 'nf_tables notification watcher: reading drover\'s tables back in full');
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.timer !== undefined || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.judge();
    }, this.opts.debounceMs ?? REPAIR_DEBOUNCE_MS);
    this.timer.unref();
  }

  /** Judge the pending batches (unless a write is in flight: then when it ends). */
  private judge(): void {
    if (this.inFlight > 0 || this.closed) return;
    const foreign = this.pending.filter((b) => !this.own.has(b.gen));
    this.counts.own += this.pending.length - foreign.length;
    this.counts.foreign += foreign.length;
    this.pending = [];
    const unknown = this.unknown;
    this.unknown = undefined;
    if (foreign.length === 0 && unknown === undefined) return;
    const reason = unknown ?? describe(foreign);
    this.counts.repairs++;
    this.opts.logger.debug({ batches: foreign.length, generations: foreign.map((b) => b.gen) }, 'nf_tables notification: drover\'s tables changed by another program');
    const elementsOnly = unknown === undefined && foreign.every((b) => [...b.tables.values()].every((cs) => cs.every((c) => c.kind === 'element' && c.name !== undefined)));
    if (elementsOnly) {
      for (const b of foreign) {
        for (const [table, cs] of b.tables) {
          let sets = this.elementRepairs.get(table);
          if (sets === undefined) this.elementRepairs.set(table, (sets = new Set()));
          for (const c of cs) sets.add(c.name!);
        }
      }
    } else this.reason = reason;
    this.listener?.(reason, !elementsOnly);
  }
}

/** The order changes are named in: the largest objects first (a table's deletion announces its rules too). */
const KIND_ORDER: readonly NftObjectKind[] = ['table', 'chain', 'set', 'object', 'flowtable', 'rule', 'element'];

/** What foreign batches did, for the log: the first one's changes (tables first, then chains, sets, …; at most four) and committer, and how many more. */
export function describe(batches: readonly NftCommittedBatch[]): string {
  const b = batches[0]!;
  const changes = [...b.tables]
    .flatMap(([table, cs]) => cs.map((c) => ({ c, table })))
    .sort((x, y) => KIND_ORDER.indexOf(x.c.kind) - KIND_ORDER.indexOf(y.c.kind))
    .map(({ c, table }) => `${c.op === 'add' ? 'added' : 'deleted'} ${c.kind}${c.name !== undefined ? ` ${c.name}` : ''} of ${table}`);
  const shown = changes.slice(0, 4).join(', ') + (changes.length > 4 ? ` and ${changes.length - 4} more` : '');
  const who = b.name !== undefined ? `${b.name}${b.pid !== undefined ? ` (pid ${b.pid})` : ''}` : b.pid !== undefined ? `pid ${b.pid}` : 'another program';
  const more = batches.length > 1 ? `; ${batches.length - 1} more ${batches.length === 2 ? 'batch' : 'batches'}` : '';
  return `${who} committed generation ${b.gen}: ${shown}${more}`;
}

/**
 * `nft` and `elements` of one family with every write (NftExec.run and
 * addRules, ElementWriter.commit) made through `watch.writing`, so that the
 * generation it committed is taken as drover's own; reads pass through.
 * `elements` must read the generation (ElementWriter.generation).
 */
export function ownWrites(nft: NftExec, elements: ElementWriter & { generation(): Promise<number> }, watch: RepairWatch): { nft: NftExec; elements: ElementWriter } {
  const generation = () => elements.generation();
  return {
    nft: {
      run: (script) => watch.writing(() => nft.run(script), generation),
      list: (opts) => nft.list(opts),
      listSet: (name, kind) => nft.listSet(name, kind),
      addRules: (rules) => watch.writing(() => nft.addRules(rules), generation),
    },
    elements: {
      commit: (ops) => watch.writing(() => elements.commit(ops), generation),
      ...(elements.accepts ? { accepts: (ops: readonly ElementOp[]) => elements.accepts!(ops) } : {}),
      ...(elements.read ? { read: (set: string) => elements.read!(set) } : {}),
      ...(elements.structure ? { structure: () => elements.structure!() } : {}),
      generation,
      ...(elements.close ? { close: () => elements.close!() } : {}),
    },
  };
}
