/**
 * Diffing desired chains against current chains into the smallest
 * iptables-restore `--noflush` payload, and printing that payload.
 *
 * The same diff serves both kinds of sync:
 * - a full sync compares the whole desired ruleset with the kernel's
 *   read-back (iptables-save), so a restart or a periodic resync writes only
 *   the chains that really differ and never re-sends the whole table (with
 *   iptables-nft, a `--noflush` restore that rewrites every existing chain is
 *   superlinear in the table size);
 * - a partial sync compares the chains of the changed service ports with
 *   what drover last wrote for them.
 *
 * Per table the payload is one transaction: chain lines (create or flush),
 * then `-D` of rules to remove, `-I` of missing hooks, `-A` of rules, and
 * last `-X` of stale chains (iptables-restore(8)).
 */
import { canonicalRule } from './canonical.ts';
import { TABLES, type TableName } from './parse.ts';

/** A chain's rules, without the leading `-A CHAIN `. */
export type Chains = ReadonlyMap<string, readonly string[]>;

/** One table's view for the diff. */
export interface TableView {
  /** Chains compared as ordered lists and rewritten whole when they differ. */
  readonly chains: Chains;
  /**
   * Chains compared as sets (KUBE-SERVICES): a rule that differs is deleted
   * or appended on its own, so one service change does not rewrite the chain.
   */
  readonly sets: Chains;
}

/** The operations on one table. */
export interface TableOps {
  /** Chains to declare: created, or flushed if they exist. */
  readonly declare: string[];
  /** Rules to delete by specification. */
  readonly deleteRules: Array<{ chain: string; rule: string }>;
  /** Hook rules to insert at the top of a built-in chain. */
  readonly insertRules: Array<{ chain: string; rule: string }>;
  /** Rules to append. */
  readonly appendRules: Array<{ chain: string; rule: string }>;
  /** Chains to delete (they are declared first, which empties them). */
  readonly deleteChains: string[];
}

/** A restore payload: ops per table. */
export type Plan = Record<TableName, TableOps>;

/** Counts of what a plan writes, by kind (proxier/backend.ts ObjectKind). */
export interface PlanStats {
  /** `chain`: chains created or rewritten (not counting deleted ones); `rule`: rules appended or inserted. */
  readonly written: { readonly chain: number; readonly rule: number };
  /** `chain`: chains deleted; `rule`: rules deleted on their own. */
  readonly deleted: { readonly chain: number; readonly rule: number };
}


/** An empty plan. */
export function emptyPlan(): Plan {
  const ops = (): TableOps => ({ declare: [], deleteRules: [], insertRules: [], appendRules: [], deleteChains: [] });
  return { filter: ops(), nat: ops() };
}

/**
 * Append every item of `from` to `into`, in order. A plan at 30,000
 * services holds hundreds of thousands of operations, more than
 * `into.push(...from)` can pass as arguments (V8 throws "Maximum call stack
 * size exceeded" from about 120,000).
 */
export function appendAll<T>(into: T[], from: Iterable<T>): void {
  for (const x of from) into.push(x);
}

/** Append `from`'s operations to `into`'s, table by table, keeping their order. */
export function appendPlan(into: Plan, from: Plan): void {
  for (const t of TABLES) {
    const a = into[t];
    const b = from[t];
    appendAll(a.declare, b.declare);
    appendAll(a.deleteRules, b.deleteRules);
    appendAll(a.insertRules, b.insertRules);
    appendAll(a.appendRules, b.appendRules);
    appendAll(a.deleteChains, b.deleteChains);
  }
}

/** Concatenate plans table by table, in order, into a new plan. */
export function mergePlans(...plans: Plan[]): Plan {
  const out = emptyPlan();
  for (const p of plans) appendPlan(out, p);
  return out;
}

function sameRules(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((rule, i) => canonicalRule(rule) === canonicalRule(b[i]!));
}

/**
 * Add to `ops` what turns `current` into `desired` for one table.
 * @param isStale chains present in `current` but not in `desired` are deleted only when this returns true
 *   (drover never deletes a chain it does not own).
 * @param keepRule a rule of a set chain (KUBE-SERVICES) present in `current` but not in `desired` is left
 *   in place when this returns true (a full sync on an incomplete source keeps the entries of service
 *   ports it does not know); default: none is kept.
 */
export function diffTable(
  ops: TableOps,
  desired: TableView,
  current: TableView,
  isStale: (chain: string) => boolean,
  keepRule: (rule: string) => boolean = () => false,
): void {
  for (const [chain, rules] of desired.sets) {
    const have = current.sets.get(chain);
    if (!have) {
      ops.declare.push(chain);
      for (const rule of rules) ops.appendRules.push({ chain, rule });
      continue;
    }
    // A kernel rule that cannot be written back on one line (a comment with a
    // newline, added by someone else) cannot be deleted by specification:
    // rewrite the whole chain instead.
    if (have.some((rule) => /[\r\n]/.test(rule) && !rules.includes(rule) && !keepRule(rule))) {
      ops.declare.push(chain);
      for (const rule of rules) ops.appendRules.push({ chain, rule });
      continue;
    }
    // Multiset difference, so that a duplicated rule in the kernel is removed too.
    const wanted = new Map<string, number>();
    for (const rule of rules) wanted.set(canonicalRule(rule), (wanted.get(canonicalRule(rule)) ?? 0) + 1);
    const present = new Map<string, number>();
    for (const rule of have) {
      const c = canonicalRule(rule);
      const left = wanted.get(c) ?? 0;
      if (left > 0) {
        wanted.set(c, left - 1);
        present.set(c, (present.get(c) ?? 0) + 1);
      } else if (!keepRule(rule)) {
        ops.deleteRules.push({ chain, rule });
      }
    }
    for (const rule of rules) {
      const c = canonicalRule(rule);
      const already = present.get(c) ?? 0;
      if (already > 0) present.set(c, already - 1);
      else ops.appendRules.push({ chain, rule });
    }
  }
  for (const [chain, rules] of desired.chains) {
    const have = current.chains.get(chain);
    if (have && sameRules(rules, have)) continue;
    ops.declare.push(chain);
    for (const rule of rules) ops.appendRules.push({ chain, rule });
  }
  for (const chain of current.chains.keys()) {
    if (!desired.chains.has(chain) && isStale(chain)) {
      ops.declare.push(chain);
      ops.deleteChains.push(chain);
    }
  }
}

/** What a plan writes. */
export function planStats(plan: Plan): PlanStats {
  let chainsWritten = 0;
  let chainsDeleted = 0;
  let rulesWritten = 0;
  let rulesDeleted = 0;
  for (const table of TABLES) {
    const ops = plan[table];
    chainsDeleted += ops.deleteChains.length;
    chainsWritten += ops.declare.length - ops.deleteChains.length;
    rulesWritten += ops.appendRules.length + ops.insertRules.length;
    rulesDeleted += ops.deleteRules.length;
  }
  return { written: { chain: chainsWritten, rule: rulesWritten }, deleted: { chain: chainsDeleted, rule: rulesDeleted } };
}

/** Number of operations (restore lines) in one table's ops. */
export function opCount(o: TableOps): number {
  return o.declare.length + o.deleteRules.length + o.insertRules.length + o.appendRules.length + o.deleteChains.length;
}

/** True when the plan changes nothing. */
export function isEmptyPlan(plan: Plan): boolean {
  return TABLES.every((t) => opCount(plan[t]) === 0);
}

/**
 * Check that every chain name and rule of `plan` fits on one restore line.
 * @throws Error naming the first one that holds a line break.
 */
export function assertRestorable(plan: Plan): void {
  for (const table of TABLES) {
    const o = plan[table];
    const bad =
      [...o.declare, ...o.deleteChains].find(hasLineBreak) ??
      [...o.deleteRules, ...o.insertRules, ...o.appendRules].flatMap((r) => [r.chain, r.rule]).find(hasLineBreak);
    if (bad !== undefined) throw new Error(`refusing to write a restore line containing a line break: ${JSON.stringify(bad)}`);
  }
}

const hasLineBreak = (x: string): boolean => /[\r\n]/.test(x);

/**
 * Print a plan as iptables-restore input (for `--noflush`). Tables with no
 * operation are left out; an empty plan prints "".
 * @param header comment lines (without `# `) printed first.
 */
export function planToRestore(plan: Plan, header: readonly string[] = []): string {
  assertRestorable(plan);
  const out: string[] = header.map((line) => `# ${line}`);
  for (const table of TABLES) {
    const ops = plan[table];
    if (opCount(ops) === 0) continue;
    out.push(`*${table}`);
    for (const chain of ops.declare) out.push(`:${chain} - [0:0]`);
    for (const { chain, rule } of ops.deleteRules) out.push(`-D ${chain} ${rule}`);
    for (const { chain, rule } of ops.insertRules) out.push(`-I ${chain} 1 ${rule}`);
    for (const { chain, rule } of ops.appendRules) out.push(`-A ${chain} ${rule}`);
    for (const chain of ops.deleteChains) out.push(`-X ${chain}`);
    out.push('COMMIT');
  }
  return out.length === header.length ? '' : `${out.join('\n')}\n`;
}
