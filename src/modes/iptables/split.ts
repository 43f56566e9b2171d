/**
 * Splitting a large restore plan into several transactions.
 *
 * With iptables-nft 1.8.x, `iptables-restore --noflush` takes time that grows
 * faster than the payload: measured here, 50 services × 10 endpoints in one
 * payload took 0.10 s, 250 took 0.71 s, 1,000 took 7.6 s and 2,000 took 47 s,
 * even into an empty table. Below a few thousand lines it is close to linear.
 * A plan larger than the budget is therefore applied as a sequence of
 * transactions, each one whole service ports, in an order in which every
 * intermediate state is consistent:
 *
 * 1. static chains and hook jumps;
 * 2. per service port (in key order): its changed KUBE-SEP and KUBE-SVC
 *    chains together with its KUBE-SERVICES rule, so a service switches from
 *    its old rules to its new ones in one transaction;
 * 3. deletions of stale KUBE-SERVICES rules, then flushes of stale chains,
 *    then their deletion (a stale chain may jump to another stale chain, so
 *    all are emptied before any is deleted).
 *
 * iptables-legacy rewrites the whole table on every transaction, so for it
 * the budget is unlimited and a plan is always one transaction.
 */
import { canonicalRule } from '../../kernel/iptables/canonical.ts';
import { TABLES, type TableName } from '../../kernel/iptables/parse.ts';
import { appendAll, appendPlan, emptyPlan, isEmptyPlan, opCount, type Plan, type TableOps } from '../../kernel/iptables/plan.ts';
import type { ServiceRules } from '../shared/kube-chains/service-rules.ts';


/** Lines a plan puts in a restore payload (its size for the budget). */
export function planLines(plan: Plan): number {
  return TABLES.reduce((n, t) => n + opCount(plan[t]), 0);
}

/** Pack fragments into plans of at most `budget` lines (a fragment larger than the budget stays whole). */
function pack(fragments: Plan[], budget: number): Plan[] {
  const out: Plan[] = [];
  let current = emptyPlan();
  for (const f of fragments) {
    if (isEmptyPlan(f)) continue;
    if (!isEmptyPlan(current) && planLines(current) + planLines(f) > budget) {
      out.push(current);
      current = emptyPlan();
    }
    appendPlan(current, f);
  }
  if (!isEmptyPlan(current)) out.push(current);
  return out;
}

/** One fragment per item, built by `fill` on one table's ops. */
function fragments<T>(items: Iterable<T>, table: TableName, fill: (ops: TableOps, item: T) => void): Plan[] {
  return Array.from(items, (item) => {
    const p = emptyPlan();
    fill(p[table], item);
    return p;
  });
}

/**
 * Split `plan` (a full-sync plan for `services`) into transactions of at most
 * about `budget` lines. A plan within the budget is returned as it is.
 */
export function splitPlan(plan: Plan, services: ReadonlyMap<string, ServiceRules>, budget: number): Plan[] {
  if (planLines(plan) <= budget) return isEmptyPlan(plan) ? [] : [plan];

  const chainOwner = new Map<string, string>();
  const ruleOwner = new Map<string, string>();
  for (const [key, s] of services) {
    for (const chain of s.chains.keys()) chainOwner.set(chain, key);
    for (const r of s.shared) ruleOwner.set(`${r.table} ${canonicalRule(r.rule)}`, key);
  }

  const head = emptyPlan();
  const perKey = new Map<string, Plan>([...services.keys()].map((k) => [k, emptyPlan()]));
  const flushes: Plan[] = [];
  const removals: Plan[] = [];
  const deletions: Plan[] = [];
  for (const table of TABLES) {
    const ops = plan[table];
    const stale = new Set(ops.deleteChains);
    const unitOf = (key: string | undefined): TableOps => (key ? perKey.get(key)![table] : head[table]);
    for (const chain of ops.declare) if (!stale.has(chain)) unitOf(chainOwner.get(chain)).declare.push(chain);
    for (const r of ops.appendRules) {
      const owner = chainOwner.get(r.chain) ?? ruleOwner.get(`${table} ${canonicalRule(r.rule)}`);
      unitOf(owner).appendRules.push(r);
    }
    appendAll(head[table].insertRules, ops.insertRules);
    appendAll(removals, fragments(ops.deleteRules, table, (o, r) => o.deleteRules.push(r)));
    appendAll(flushes, fragments(stale, table, (o, c) => o.declare.push(c)));
    appendAll(deletions, fragments(stale, table, (o, c) => o.deleteChains.push(c)));
  }
  return [
    ...pack([head, ...perKey.values()], budget),
    ...pack(removals, budget),
    ...pack(flushes, budget),
    ...pack(deletions, budget),
  ];
}
