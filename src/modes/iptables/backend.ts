/**
 * The iptables backend: renders a Snapshot into kube-proxy's nat/filter
 * layout and applies what changed with one `iptables-restore --noflush` per
 * sync.
 *
 * - Full sync (first sync, periodic resync, after a failure): read the kernel
 *   back with iptables-save, diff it against the whole desired ruleset and
 *   write only what differs. A restart therefore adopts live rules without
 *   flushing them, and drift is repaired. A full sync that can be put off
 *   (ChangeSet.deferrable) gives its read-back a bound (shared/read-back.ts)
 *   and, past it, throws ReadBackTimeoutError having written nothing.
 * - Partial sync: render only the changed service ports and write their
 *   chains and KUBE-SERVICES rules, from what was last applied.
 * - On an incomplete source (`changes.incomplete`) a full sync leaves the
 *   rules and chains of service ports it does not know as they are
 *   (ruleset.ts fullPlan).
 */
import { IptablesDriftWatch } from '../shared/kube-chains/drift-watch.ts';
import { iptablesDetail, ownedRules, ruleCounts, writtenRules, type RulesByTable } from './sync-detail.ts';
import type { Logger } from '../../util/log.ts';
import type { NodeInfo, ServicePort, Snapshot } from '../../model/types.ts';
import type { Backend, ChangeSet, CleanupResult, SyncResult } from '../../proxier/backend.ts';
import { ServedFrontends } from '../shared/served-frontends.ts';
import type { IptablesExec } from '../../kernel/iptables/exec.ts';
import { parseSave, type ParsedDump } from '../../kernel/iptables/parse.ts';
import { assertRestorable, isEmptyPlan, planStats, planToRestore, type Plan } from '../../kernel/iptables/plan.ts';
import { splitPlan } from './split.ts';
import { countServingEndpoints } from '../../model/policy.ts';
import { renderServicePort } from './render.ts';
import type { ServiceRules } from '../shared/kube-chains/service-rules.ts';
import type { RenderOptions } from '../../config/render.ts';
import { isServiceChain } from '../shared/kube-chains/names.ts';
import { cleanupPlan, foreignReferences, fullPlan, partialPlan } from '../shared/kube-chains/ruleset.ts';
import { renderSnapshot } from './snapshot.ts';
import { loadStaticRules, type StaticRuleset } from '../shared/kube-chains/static.ts';
import { ReadBackTimeoutError } from '../../errors.ts';
import { ReadBackBudget } from '../shared/read-back.ts';
import { collectWhenGrown, SYNC_GROWTH_BOUND as GROWTH_BOUND } from '../../util/gc.ts';

/** Options of the iptables backend. */
export interface IptablesBackendOptions {
  readonly exec: IptablesExec;
  readonly render: RenderOptions;
  readonly logger: Logger;
  /**
   * Most lines in one iptables-restore transaction; a larger sync is split
   * (see split.ts). Default: 10 000 for iptables-nft, unlimited for legacy.
   */
  readonly maxLinesPerTransaction?: number;
  /** Static chains and hooks; default: rules/iptables/static.rules. */
  readonly statics?: StaticRuleset;
}

/**
 * What a sync programmed for one service port: the ServicePort and node it
 * was rendered from, and how many rules that gave per table. Rendering is
 * pure, so a partial sync renders the old rules again from these when the
 * port changes, instead of every port's rule text being kept (about 100 MB
 * at 10,000 service ports of 10 endpoints).
 */
interface AppliedPort {
  readonly sp: ServicePort;
  readonly node: NodeInfo | undefined;
  readonly rules: RulesByTable;
}

/** iptables-mode Backend. */
export class IptablesBackend implements Backend {
  readonly mode = 'iptables' as const;
  private readonly statics: StaticRuleset;
  /** What drover last applied, per service port; null = unknown, so the next sync is full. */
  private applied: Map<string, AppliedPort> | null = null;
  /** The cheap drift check between full syncs (drift-watch.ts). */
  private readonly watch: IptablesDriftWatch;
  /** The bound of a deferrable read-back, from the last one that finished. */
  private readonly readBudget = new ReadBackBudget();
  /** The frontends served, settled once for every mode (shared/served-frontends.ts). */
  private readonly served: ServedFrontends;

  constructor(private readonly opts: IptablesBackendOptions) {
    this.statics = opts.statics ?? loadStaticRules();
    this.served = new ServedFrontends(opts.render.family ?? 'IPv4', opts.logger);
    this.watch = new IptablesDriftWatch(opts.exec, this.statics, opts.logger);
  }

  /**
   * Read the live filter and nat tables.
   * @param opts.timeoutMs give up after this long (each table's dump).
   * @throws ReadBackTimeoutError past `opts.timeoutMs`; CommandError when iptables-save fails.
   */
  async read(opts: { readonly timeoutMs?: number } = {}): Promise<ParsedDump> {
    const [filter, nat] = await Promise.all([this.opts.exec.save('filter', opts), this.opts.exec.save('nat', opts)]);
    return parseSave(`${filter}\n${nat}`);
  }

  /** Write what differs (see the module comment); reports `chain` and `rule` written and deleted, and the rules per table (sync-detail.ts). */
  async sync(given: Snapshot, asked: ChangeSet): Promise<SyncResult> {
    const start = performance.now();
    const { view: snapshot, changes } = this.served.settle(given, asked);
    const full = changes.full || this.applied === null;
    let readMs = 0;
    let plan: Plan;
    let budgetScope: ReadonlyMap<string, ServiceRules>;
    let next: Map<string, AppliedPort>;
    try {
      if (full) {
        const desired = renderSnapshot(snapshot, this.opts.render);
        const readStart = performance.now();
        // A read-back that can be put off is bounded (read-back.ts); one that cannot takes as long as it takes.
        const reading = this.read(changes.deferrable === true && this.applied !== null ? { timeoutMs: this.readBudget.boundMs() } : {});
        // The rendering's garbage is collected while iptables-save runs.
        collectWhenGrown(GROWTH_BOUND);
        const kernel = await reading;
        readMs = performance.now() - readStart;
        this.readBudget.finished(readMs);
        plan = fullPlan(this.statics, desired, kernel, { incomplete: changes.incomplete === true });
        budgetScope = desired;
        this.warnPinned(kernel, desired);
        next = new Map();
        for (const [key, rules] of desired) next.set(key, { sp: snapshot.services.get(key)!, node: snapshot.node, rules: ruleCounts(rules) });
      } else {
        const applied = this.applied!;
        next = new Map(applied);
        const before = new Map<string, ServiceRules>();
        const after = new Map<string, ServiceRules>();
        for (const key of changes.changed) {
          const was = applied.get(key);
          if (was) before.set(key, renderServicePort(was.sp, this.opts.render, was.node));
          const sp = snapshot.services.get(key);
          if (sp) {
            const rules = renderServicePort(sp, this.opts.render, snapshot.node);
            after.set(key, rules);
            next.set(key, { sp, node: snapshot.node, rules: ruleCounts(rules) });
          } else {
            next.delete(key);
          }
        }
        plan = partialPlan(changes.changed, before, after);
        budgetScope = after;
      }
      const parts = splitPlan(plan, budgetScope, this.budget());
      // Every part is checked before the first is written; each payload's text is made only when it is written.
      for (const part of parts) assertRestorable(part);
      if (!full && parts.length > 0) await this.watch.beforeWrite();
      let applyMs = 0;
      let bytes = 0;
      for (const part of parts) {
        if (parts.length > 1) collectWhenGrown(GROWTH_BOUND);
        const payload = planToRestore(part);
        bytes += Buffer.byteLength(payload);
        const applyStart = performance.now();
        await this.opts.exec.restore(payload);
        applyMs += performance.now() - applyStart;
      }
      this.applied = next;
      if (full) await this.watch.afterFullSync();
      else if (parts.length > 0) await this.watch.afterWrite();
      return {
        full,
        services: snapshot.services.size,
        endpoints: countServingEndpoints(snapshot),
        ...planStats(plan),
        bytes,
        transactions: parts.length,
        readMs,
        applyMs,
        totalMs: performance.now() - start,
        detail: iptablesDetail({ rules: ownedRules(this.statics, [...next.values()].map((a) => a.rules)), written: writtenRules(plan) }),
      };
    } catch (err) {
      // A read-back past its bound wrote nothing: what was programmed is still known, and the drift still suspected.
      if (err instanceof ReadBackTimeoutError) throw err;
      this.applied = null;
      this.watch.forget();
      throw err;
    }
  }

  /**
   * The cheap drift check (drift-watch.ts): a canary chain missing from
   * mangle, nat or filter, a hook jump gone, or (iptables-nft in drover's
   * own namespace) an nf_tables commit since drover's last write.
   */
  async driftCheck(): Promise<string | undefined> {
    if (this.applied === null) return 'nothing is known to be programmed';
    return this.watch.check();
  }

  /** Warn about stale service chains that a foreign rule keeps alive (fullPlan empties them instead of deleting). */
  private warnPinned(kernel: ParsedDump, desired: ReadonlyMap<string, ServiceRules>): void {
    const wanted = new Set([...desired.values()].flatMap((s) => [...s.chains.keys()]));
    const pinned = [...foreignReferences(this.statics, 'nat', kernel).keys()].filter(
      (c) => isServiceChain(c) && !wanted.has(c) && kernel.get('nat')?.has(c),
    );
    if (pinned.length > 0) {
      this.opts.logger.warn({ chains: pinned }, 'stale chains are still referenced by rules drover does not own; emptied but not deleted');
    }
  }

  private budget(): number {
    return this.opts.maxLinesPerTransaction ?? (this.opts.exec.variant === 'nft' ? 10_000 : Number.POSITIVE_INFINITY);
  }

  /** Delete drover's chains and hook rules (cleanupPlan), then the canary chains; reports `chain` and `rule` removed. */
  async cleanup(): Promise<CleanupResult> {
    const { plan, kept } = cleanupPlan(this.statics, await this.read());
    this.applied = null;
    const stats = planStats(plan).deleted;
    if (!isEmptyPlan(plan)) await this.opts.exec.restore(planToRestore(plan));
    const canaries = await this.watch.removeCanaries();
    const removed = { ...stats, chain: stats.chain + canaries };
    if (!isEmptyPlan(plan) || canaries > 0) {
      this.opts.logger.info({ removed, chainsKept: kept.map((k) => `${k.table} ${k.chain}`) }, 'removed drover chains and hook rules');
    }
    return { removed, kept };
  }
}
