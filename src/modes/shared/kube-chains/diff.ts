/**
 * Drift between the desired ruleset and the live kernel, as `drover diff`
 * and `drover status` report it.
 *
 * There is no diff logic of its own: the items are read off the plan a full
 * sync would apply (`fullPlan` with the kernel's read-back, ruleset.ts), so
 * `drover diff` lists exactly what the next full sync would write, and
 * "no differences" means a full sync would write nothing.
 */
import { canonicalRule } from '../../../kernel/iptables/canonical.ts';
import { TABLES, type ParsedDump, type TableName } from '../../../kernel/iptables/parse.ts';
import type { ShownTable } from '../../../kernel/iptables/parse.ts';
import type { ServiceRules } from './service-rules.ts';
import { fullPlan, type FullPlanOptions } from './ruleset.ts';
import type { StaticRuleset } from './static.ts';
import { chainLabel } from './chains.ts';

/** What kind of difference an item is. */
export type DriftKind = 'missing chain' | 'changed chain' | 'extra chain' | 'missing rule' | 'extra rule' | 'missing hook';

/** One line of a changed chain's rule diff: `-` only in the kernel, `+` only in desired state. */
export interface RuleChange {
  readonly sign: '-' | '+';
  /** The rule without `-A CHAIN `, as iptables-save prints it. */
  readonly rule: string;
}

/** One difference between desired state and the kernel. */
export interface DriftItem {
  readonly kind: DriftKind;
  /** The table; "nat (IPv6)" for the IPv6 ruleset's. */
  readonly table: ShownTable;
  readonly chain: string;
  /** For rule and hook items: the rule, without `-A CHAIN `. */
  readonly rule?: string;
  /** For chain items: "ns/svc:port[ -> ip:port]" from the chain's rules (chainLabel); undefined for static chains. */
  readonly label?: string;
  /** For a changed chain: the differing rules, in chain order. */
  readonly changes?: readonly RuleChange[];
}

/**
 * The rules that differ between two versions of a chain (longest common
 * subsequence, rules compared in iptables-save's form), in chain order.
 */
export function ruleChanges(kernel: readonly string[], desired: readonly string[]): RuleChange[] {
  const a = kernel.map(canonicalRule);
  const b = desired.map(canonicalRule);
  // lcs[i][j]: length of the LCS of a[i..] and b[j..].
  const lcs = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
    }
  }
  const out: RuleChange[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      i++;
      j++;
    } else if (j >= b.length || (i < a.length && lcs[i + 1]![j]! >= lcs[i]![j + 1]!)) {
      out.push({ sign: '-', rule: a[i++]! });
    } else {
      out.push({ sign: '+', rule: b[j++]! });
    }
  }
  return out;
}

/**
 * Every difference between the desired ruleset (static chains plus
 * `services`) and the kernel's owned chains and hooks, per table (in
 * TABLES order): missing and changed chains, extra and missing KUBE-SERVICES
 * rules, extra (stale) KUBE-SVC/KUBE-SEP chains, missing hook jumps.
 * Chains drover does not own are never reported. With `opts.incomplete`
 * (the source could not be read whole), the rules and chains of service
 * ports it does not list are not reported either, as a full sync then keeps
 * them. Pure.
 */
export function driftItems(statics: StaticRuleset, services: ReadonlyMap<string, ServiceRules>, kernel: ParsedDump, opts: FullPlanOptions = {}): DriftItem[] {
  const plan = fullPlan(statics, services, kernel, opts);
  const items: DriftItem[] = [];
  for (const table of TABLES) {
    const ops = plan[table];
    const live = kernel.get(table);
    const deleted = new Set(ops.deleteChains);
    const declared = new Set(ops.declare);
    for (const chain of ops.declare) {
      if (deleted.has(chain)) continue;
      const desired = ops.appendRules.filter((r) => r.chain === chain).map((r) => r.rule);
      const label = chainLabel(desired);
      const have = live?.get(chain)?.rules;
      if (!have) items.push({ kind: 'missing chain', table, chain, label });
      else items.push({ kind: 'changed chain', table, chain, label, changes: ruleChanges(have, desired) });
    }
    // A present hook that the plan deletes only to insert it again (fullPlan puts all of a
    // chain's hooks back in order when one is missing) is not a difference of its own.
    const moved = new Set(ops.insertRules.filter((h) => ops.deleteRules.some((d) => d.chain === h.chain && d.rule === h.rule)).map((h) => `${h.chain} ${h.rule}`));
    for (const { chain, rule } of ops.deleteRules) if (!moved.has(`${chain} ${rule}`)) items.push({ kind: 'extra rule', table, chain, rule });
    for (const { chain, rule } of ops.appendRules) {
      if (!declared.has(chain)) items.push({ kind: 'missing rule', table, chain, rule: canonicalRule(rule) });
    }
    for (const chain of ops.deleteChains) {
      items.push({ kind: 'extra chain', table, chain, label: chainLabel(live?.get(chain)?.rules ?? []) });
    }
    // The plan inserts hooks in reverse; list them in static.rules order.
    const order = (h: { chain: string; rule: string }) =>
      statics.hooks.findIndex((s) => s.table === table && s.chain === h.chain && s.rule === h.rule);
    for (const hook of [...ops.insertRules].filter((h) => !moved.has(`${h.chain} ${h.rule}`)).sort((x, y) => order(x) - order(y))) {
      items.push({ kind: 'missing hook', table, chain: hook.chain, rule: hook.rule });
    }
  }
  return items;
}

/** A drift item of the IPv6 tables (ip6tables), its table named "nat (IPv6)" or "filter (IPv6)". */
export function ipv6DriftItem(item: DriftItem): DriftItem {
  return { ...item, table: `${item.table as TableName} (IPv6)` };
}

/**
 * One line per item, `<kind> <table> <chain> (<label>)` for chains and
 * `<kind> <table> <chain>: <rule>` for rules and hooks; under a changed chain
 * its differing rules, `  - <rule>` (kernel) and `  + <rule>` (desired).
 * No item prints "no differences".
 */
export function formatDrift(items: readonly DriftItem[]): string {
  if (items.length === 0) return 'no differences\n';
  const lines = items.flatMap((item) => {
    const head = `${item.kind} ${item.table} ${item.chain}`;
    if (item.rule !== undefined) return [`${head}: ${item.rule}`];
    return [`${head}${item.label ? ` (${item.label})` : ''}`, ...(item.changes ?? []).map((c) => `  ${c.sign} ${c.rule}`)];
  });
  return `${lines.join('\n')}\n`;
}
