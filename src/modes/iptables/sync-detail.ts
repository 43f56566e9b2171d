/**
 * iptables mode's account of a sync, carried in SyncResult.detail
 * (proxier/backend.ts), for kube-proxy's `sync_proxy_rules_iptables_total` and
 * `sync_proxy_rules_iptables_last` (metrics.ts).
 */
import type { ModeSyncDetail } from '../../proxier/backend.ts';
import type { TableName } from '../../kernel/iptables/parse.ts';
import { TABLES } from '../../kernel/iptables/parse.ts';
import type { Plan } from '../../kernel/iptables/plan.ts';
import type { ServiceRules } from '../shared/kube-chains/service-rules.ts';
import type { StaticRuleset } from '../shared/kube-chains/static.ts';

/** Rule counts per table (filter, nat). */
export type RulesByTable = Readonly<Record<TableName, number>>;

/** What iptables mode reports of a sync besides the counts by kind. */
export interface IptablesSyncDetail extends ModeSyncDetail {
  /** Tells this detail from other modes' (SyncResult.detail). */
  readonly mode: 'iptables';
  /** Rules drover wants in each table after the sync: the static ones and every service port's. */
  readonly rules: RulesByTable;
  /** Rules the sync's restore payloads wrote (appended or inserted), per table. */
  readonly written: RulesByTable;
}

/** iptables mode's detail of a sync: `rules` and `written`, told apart by `mode: 'iptables'`. */
export function iptablesDetail(counts: Omit<IptablesSyncDetail, 'mode'>): IptablesSyncDetail {
  return { mode: 'iptables', rules: counts.rules, written: counts.written };
}

/** Whether `detail` is iptables mode's (SyncResult.detail of an iptables backend). */
export function isIptablesDetail(detail: ModeSyncDetail | undefined): detail is IptablesSyncDetail {
  return detail?.mode === 'iptables';
}

/** The rules of one rendered service port per table: its rules in the shared chains and its chains' rules. Costs O(its chains). */
export function ruleCounts(sr: ServiceRules): RulesByTable {
  const count = { filter: 0, nat: 0 };
  for (const r of sr.shared) count[r.table]++;
  for (const rules of sr.chains.values()) count.nat += rules.length;
  return count;
}

/** The rules of `statics` and of every service port (`services`: each one's {@link ruleCounts}), per table. Costs O(service ports). */
export function ownedRules(statics: StaticRuleset, services: Iterable<RulesByTable>): RulesByTable {
  const count = { filter: 0, nat: 0 };
  for (const [table, chains] of statics.chains) for (const rules of chains.values()) count[table] += rules.length;
  for (const hook of statics.hooks) count[hook.table]++;
  for (const sr of services) {
    count.nat += sr.nat;
    count.filter += sr.filter;
  }
  return count;
}

/** Rules a plan appends or inserts, per table. */
export function writtenRules(plan: Plan): RulesByTable {
  const count = { filter: 0, nat: 0 };
  for (const table of TABLES) count[table] = plan[table].appendRules.length + plan[table].insertRules.length;
  return count;
}
