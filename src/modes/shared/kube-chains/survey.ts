/**
 * What of one mode's iptables rules a table dump holds, for `drover
 * takeover`'s survey (ModeDriver.survey): iptables mode and IPVS mode both
 * write kube-proxy's chains, several of them of the same name
 * (KUBE-SERVICES, KUBE-MARK-MASQ, KUBE-POSTROUTING), so each mode is told
 * apart by chains only it has (its markers), and counted by what its
 * cleanup would remove (ruleset.ts cleanupPlan). Pure.
 */
import { TABLES, type ParsedDump, type TableName } from '../../../kernel/iptables/parse.ts';
import { cleanupPlan } from './ruleset.ts';
import type { StaticRuleset } from './static.ts';

/** Tells whether `chain` of `table` is one that only the surveyed mode writes. */
export type MarkerChain = (table: TableName, chain: string) => boolean;

/**
 * "LABEL: N chains, M hook rules" for the chains and hook rules of
 * `statics`' layout that a cleanup would remove from `dump`, or undefined
 * when `dump` holds no chain `isMarker` accepts (the mode's layout is then
 * not there, whatever shared chains another mode left).
 * @param label e.g. "iptables-nft IPv4".
 */
export function layoutSurveyLine(label: string, statics: StaticRuleset, dump: ParsedDump, isMarker: MarkerChain): string | undefined {
  const marked = TABLES.some((table) => [...(dump.get(table)?.keys() ?? [])].some((chain) => isMarker(table, chain)));
  if (!marked) return undefined;
  const { plan } = cleanupPlan(statics, dump);
  const chains = TABLES.reduce((n, t) => n + plan[t].declare.length, 0);
  const rules = TABLES.reduce((n, t) => n + plan[t].deleteRules.length, 0);
  return `${label}: ${chains} ${chains === 1 ? 'chain' : 'chains'}, ${rules} hook ${rules === 1 ? 'rule' : 'rules'}`;
}
