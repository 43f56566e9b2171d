/**
 * The iptables backend: renders a Snapshot into kube-proxy's nat/filter
 * layout and applies what changed with one `iptables-restore --noflush` per
 * sync.
 *
 * - Full sync (first sync, periodic resync, after a failure): read the kernel
 *   back with iptables-save, diff it against the whole desired ruleset and
 *   write only what differs. A restart therefore adopts live rules without
 *   flushing them, and drift is repaired.
 * - Partial sync: render only the changed service ports and write their
 *   chains and KUBE-SERVICES rules, from what was last applied.
 * - On an incomplete source (`changes.incomplete`) a full sync leaves the
 *   rules and chains of service ports it does not know as they are
 *   (ruleset.ts fullPlan).
 */
import { CANARY_CHAIN, CANARY_TABLES } from './canary.ts';
import { ownedRules, writtenRules } from './sync-detail.ts';
import type { Logger } from '../../util/log.ts';
import type { Snapshot } from '../../model/types.ts';
import type { Backend, ChangeSet, CleanupResult, SyncResult } from '../types.ts';
import type { IptablesExec } from './exec.ts';
import { parseSave, type ParsedDump, type TableName } from './parse.ts';
import { canonicalRule } from './canonical.ts';
import { isEmptyPlan, planStats, planToRestore, type Plan } from './plan.ts';
import { splitPlan } from './split.ts';
import { countServingEndpoints } from '../../model/policy.ts';
import { renderServicePort, type RenderOptions, type ServiceRules } from './render.ts';
import { isServiceChain } from './names.ts';
import { cleanupPlan, foreignReferences, fullPlan, partialPlan, renderSnapshot } from './ruleset.ts';
import { loadStaticRules, type StaticRuleset } from './static.ts';

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

/** iptables-mode Backend. */
export class IptablesBackend implements Backend {
  readonly mode = 'iptables' as const;
  private readonly statics: StaticRuleset;
  /** What drover last applied, per service port; null = unknown, so the next sync is full. */
  private applied: Map<string, ServiceRules> | null = null;
  /** The nf_tables generation after drover's last write (canary.ts); undefined when unknown or unreadable. */
  private generation: number | undefined;
  /** Why the kernel may have changed since the last full sync, noticed during a partial sync. */
  private suspect: string | undefined;

  constructor(private readonly opts: IptablesBackendOptions) {
    this.statics = opts.statics ?? loadStaticRules();
  }

  /** Read the live filter and nat tables. */
  async read(): Promise<ParsedDump> {
    const [filter, nat] = await Promise.all([this.opts.exec.save('filter'), this.opts.exec.save('nat')]);
    return parseSave(`${filter}\n${nat}`);
  }

  /** Write what differs (see the module comment); reports `chain` and `rule` written and deleted, and the rules per table (sync-detail.ts). */
  async sync(snapshot: Snapshot, changes: ChangeSet): Promise<SyncResult> {
    const start = performance.now();
    const full = changes.full || this.applied === null;
    let readMs = 0;
    let plan: Plan;
    let budgetScope: ReadonlyMap<string, ServiceRules>;
    let next: Map<string, ServiceRules>;
    try {
      if (full) {
        next = renderSnapshot(snapshot, this.opts.render);
        const readStart = performance.now();
        const kernel = await this.read();
        readMs = performance.now() - readStart;
        plan = fullPlan(this.statics, next, kernel, { incomplete: changes.incomplete === true });
        budgetScope = next;
        this.warnPinned(kernel, next);
      } else {
        const before = this.applied!;
        next = new Map(before);
        const after = new Map<string, ServiceRules>();
        for (const key of changes.changed) {
          const sp = snapshot.services.get(key);
          if (sp) {
            const rules = renderServicePort(sp, this.opts.render, snapshot.node);
            after.set(key, rules);
            next.set(key, rules);
          } else {
            next.delete(key);
          }
        }
        plan = partialPlan(changes.changed, before, after);
        budgetScope = after;
      }
      const payloads = splitPlan(plan, budgetScope, this.budget()).map((p) => planToRestore(p));
      if (!full && payloads.length > 0) await this.noticeForeignCommit();
      const applyStart = performance.now();
      for (const payload of payloads) await this.opts.exec.restore(payload);
      const applyMs = payloads.length > 0 ? performance.now() - applyStart : 0;
      this.applied = next;
      if (full) this.suspect = await this.ensureCanaries();
      if (full || payloads.length > 0) this.generation = await this.readGeneration();
      return {
        full,
        services: snapshot.services.size,
        endpoints: countServingEndpoints(snapshot),
        ...planStats(plan),
        bytes: payloads.reduce((sum, p) => sum + Buffer.byteLength(p), 0),
        transactions: payloads.length,
        readMs,
        applyMs,
        totalMs: performance.now() - start,
        detail: { mode: 'iptables', rules: ownedRules(this.statics, next.values()), written: writtenRules(plan) },
      };
    } catch (err) {
      this.applied = null;
      this.generation = undefined;
      throw err;
    }
  }

  /**
   * The cheap drift check (canary.ts): a canary chain missing from mangle,
   * nat or filter, or (iptables-nft in drover's own namespace) an nf_tables
   * commit since drover's last write.
   */
  async driftCheck(): Promise<string | undefined> {
    if (this.applied === null) return 'nothing is known to be programmed';
    if (this.suspect !== undefined) return this.suspect;
    const missing: string[] = [];
    for (const table of CANARY_TABLES) if ((await this.opts.exec.listChain(table, CANARY_CHAIN)) === undefined) missing.push(table);
    if (missing.length > 0) return `the ${CANARY_CHAIN} chain is gone from ${missing.join(', ')}`;
    const hooks = await missingHooks(this.opts.exec, this.statics);
    if (hooks.length > 0) return `hook rules are gone from ${hooks.join(', ')}`;
    await this.noticeForeignCommit();
    return this.suspect;
  }

  /**
   * Create the canary chains that are missing. A failure (the xtables lock
   * busy past its wait) is logged, not thrown: the rules are already
   * written; the returned reason makes the next check a full sync.
   */
  private async ensureCanaries(): Promise<string | undefined> {
    try {
      for (const table of CANARY_TABLES) await this.opts.exec.ensureChain(table, CANARY_CHAIN);
      return undefined;
    } catch (err) {
      this.opts.logger.warn({ err: (err as Error).message }, `could not create the ${CANARY_CHAIN} chains; the next periodic check reads the kernel back`);
      return `the ${CANARY_CHAIN} chains could not be created: ${(err as Error).message}`;
    }
  }

  /** The nf_tables generation, or undefined when it cannot be read (logged; the canaries still serve). */
  private async readGeneration(): Promise<number | undefined> {
    if (!this.opts.exec.generation) return undefined;
    try {
      return await this.opts.exec.generation();
    } catch (err) {
      this.opts.logger.warn({ err: (err as Error).message }, 'cannot read the nf_tables generation; drift is checked by the canary chains alone');
      return undefined;
    }
  }

  /** Before a write (or at a check): remember it when the nf_tables generation moved since drover's last write. */
  private async noticeForeignCommit(): Promise<void> {
    if (this.generation === undefined) return;
    const now = await this.readGeneration();
    if (now === undefined) return;
    if (now !== this.generation) this.suspect ??= `nf_tables generation ${now}, not ${this.generation} as drover left it: another program committed rules`;
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
    this.generation = undefined;
    const stats = planStats(plan).deleted;
    if (!isEmptyPlan(plan)) await this.opts.exec.restore(planToRestore(plan));
    let canaries = 0;
    for (const table of CANARY_TABLES) if (await this.opts.exec.deleteChain(table, CANARY_CHAIN)) canaries++;
    const removed = { ...stats, chain: stats.chain + canaries };
    if (!isEmptyPlan(plan) || canaries > 0) {
      this.opts.logger.info({ removed, chainsKept: kept.map((k) => `${k.table} ${k.chain}`) }, 'removed drover chains and hook rules');
    }
    return { removed, kept };
  }
}

/**
 * The built-in chains that lack one of drover's hook jumps (rules/iptables/
 * static.rules hooks), as "table CHAIN": `iptables -F` of a table empties
 * the built-in chains but keeps the (empty) canary chain, so the hooks are
 * checked too. One `iptables -S CHAIN` per built-in chain.
 * @throws CommandError when a chain cannot be listed.
 */
async function missingHooks(exec: IptablesExec, statics: StaticRuleset): Promise<string[]> {
  const byChain = new Map<string, { table: TableName; chain: string; rules: string[] }>();
  for (const h of statics.hooks) {
    const key = `${h.table} ${h.chain}`;
    const entry = byChain.get(key) ?? { table: h.table, chain: h.chain, rules: [] };
    entry.rules.push(canonicalRule(h.rule));
    byChain.set(key, entry);
  }
  const missing: string[] = [];
  for (const [key, { table, chain, rules }] of byChain) {
    const live = new Set((await exec.listChain(table, chain) ?? []).map((r) => canonicalRule(r)));
    if (rules.some((r) => !live.has(r))) missing.push(key);
  }
  return missing;
}
