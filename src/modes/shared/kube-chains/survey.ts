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
import type { KernelOptions } from '../../../config/kernel.ts';
import { readTables } from '../../../kernel/iptables/live.ts';
import { SystemIptables } from '../../../kernel/iptables/exec.ts';
import { IP_FAMILIES } from '../../../model/family.ts';
import type { IPFamily } from '../../../model/types.ts';
import { createLogger } from '../../../util/log.ts';
import { createIptablesExec } from '../iptables-wiring.ts';

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

/**
 * A mode's survey of its iptables rules in the namespace of `opts.netns`:
 * for each family, {@link layoutSurveyLine} over the live filter and nat
 * tables, labelled "iptables-VARIANT FAMILY" and `suffix`: first in the
 * variant `run` would use (`--iptables-backend`, or the detected one), then
 * in the other one (`elsewhere`), because rules a kube-proxy left in the
 * other variant stay hooked in and are not what this mode's cleanup removes. A table
 * that cannot be read (a kernel without IPv6, a variant not installed) is
 * reported unread; only the IPv4 tables of the variant in use must read.
 * @param staticsOf the mode's static rules of a family.
 * @throws UsageError when not root or the namespace does not exist; CommandError when iptables-save fails for IPv4 in the variant in use.
 */
export async function surveyLayout(
  opts: KernelOptions,
  staticsOf: (family: IPFamily) => StaticRuleset | Promise<StaticRuleset>,
  isMarker: MarkerChain,
  suffix = '',
): Promise<{ found: string[]; unread: string[]; elsewhere: string[] }> {
  const logger = createLogger(opts.logLevel);
  const found: string[] = [];
  const unread: string[] = [];
  const elsewhere: string[] = [];
  const inUse = (await createIptablesExec(opts, logger)).variant;
  for (const variant of [inUse, inUse === 'nft' ? 'legacy' : 'nft'] as const) {
    for (const family of IP_FAMILIES) {
      const exec = new SystemIptables({ variant, family, ...(opts.netns !== undefined ? { netns: opts.netns } : {}) });
      let dump: ParsedDump;
      try {
        dump = await readTables(exec);
      } catch (err) {
        if (family === 'IPv4' && variant === inUse) throw err;
        unread.push(`iptables-${variant} ${family}: ${(err as Error).message}`);
        continue;
      }
      const line = layoutSurveyLine(`iptables-${variant} ${family}${suffix}`, await staticsOf(family), dump, isMarker);
      if (line !== undefined) (variant === inUse ? found : elsewhere).push(line);
    }
  }
  return { found, unread, elsewhere };
}
