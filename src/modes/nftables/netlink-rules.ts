/**
 * The rules of drover's table written over nf_tables netlink (layout.ts
 * RuleDecl `netlink`): the IPv6 ClientIP affinity record rules, which nft
 * 1.0.6 cannot compile (affinity-rule.ts), appended to their chains; and
 * the pick rules, which nft compiles for TCP only (pick-rule.ts), put in
 * place of the TCP-only rule the script wrote, found by its comment. All of
 * them in one netlink transaction when they fit one batch
 * (NftNetlinkClient.addRules), from this process or from the helper
 * process in a named namespace (rule-helper.ts).
 */
import { DroverError } from '../../errors.ts';
import type { IPFamily } from '../../model/types.ts';
import { affinityRecordExprs } from './affinity-rule.ts';
import { pickRuleExprs } from './pick-rule.ts';
import { UnsafeElementError } from './elements.ts';
import { nftFamily, type ChainDecl, type RuleDecl } from './layout.ts';
import type { NftNetlinkClient } from '../../kernel/nftables/client.ts';
import type { RuleAdd } from '../../kernel/nftables/rule-codec.ts';

/** A rule of the layout that goes over netlink, with its chain. */
export interface NetlinkRuleOf {
  readonly chain: string;
  readonly rule: RuleDecl;
}

/** The rules of `chains` written over netlink (RuleDecl `netlink`), in chain and rule order. */
export function netlinkRulesOf(chains: readonly ChainDecl[]): NetlinkRuleOf[] {
  return chains.flatMap((c) => c.rules.filter((r) => r.netlink !== undefined).map((rule) => ({ chain: c.name, rule })));
}

/**
 * The NEWRULE of rule `rule` (one with `netlink`) of chain `chain` of
 * drover's table of `family`: its expressions and its comment; for a pick
 * rule, `handle` is the rule it replaces (without one, it is appended).
 * @throws UnsafeElementError for a rule without `netlink`, or a bad timeout, protocol or count in it.
 */
export function netlinkRuleAdd(family: IPFamily, { chain, rule }: NetlinkRuleOf, handle?: number): RuleAdd {
  const spec = rule.netlink;
  const table = nftFamily(family).table;
  const base = { family: table.family, table: table.name, chain, comment: rule.comment };
  if (spec?.kind === 'affinity-record') return { ...base, exprs: affinityRecordExprs(family, spec.proto, spec.seconds) };
  if (spec?.kind === 'pick') return { ...base, exprs: pickRuleExprs(family, spec), ...(handle !== undefined ? { handle } : {}) };
  throw new UnsafeElementError('netlink rule', rule.comment);
}

/** A pick rule's TCP-only counterpart, which it replaces, is not in its chain (once, or more than once). */
export class ReplacedRuleError extends DroverError {
  constructor(
    readonly chain: string,
    readonly comment: string,
    readonly found: number,
  ) {
    super(`cannot replace rule "${comment}" of chain ${chain} over netlink: the chain has ${found} rules with that comment, not one`);
    this.name = 'ReplacedRuleError';
  }
}

/**
 * The NEWRULE messages of `rules` for drover's table of `family`, as it is
 * now: a pick rule replaces the one rule of its chain whose comment is its
 * `replaces` (its handle read over netlink, NftNetlinkClient.readStructure);
 * the others are appended. Encoded (so validated) before anything is read.
 * @throws UnsafeElementError for a bad rule; ReplacedRuleError when a rule to replace is missing or not unique;
 *   NftRequestError when the read fails.
 */
export async function resolveRuleAdds(client: Pick<NftNetlinkClient, 'readStructure'>, family: IPFamily, rules: readonly NetlinkRuleOf[]): Promise<RuleAdd[]> {
  const adds = rules.map((r) => netlinkRuleAdd(family, r));
  if (!rules.some((r) => r.rule.netlink?.kind === 'pick')) return adds;
  const table = nftFamily(family).table;
  const live = await client.readStructure(table.family, table.name);
  return rules.map((r, i) => {
    const spec = r.rule.netlink;
    if (spec?.kind !== 'pick') return adds[i]!;
    const found = live.rules.filter((x) => x.chain === r.chain && x.comment === spec.replaces);
    if (found.length !== 1) throw new ReplacedRuleError(r.chain, spec.replaces, found.length);
    return { ...adds[i]!, handle: found[0]!.handle };
  });
}

/**
 * Write `rules` to drover's table of `family` over `client`'s socket
 * ({@link resolveRuleAdds}, then one transaction when they fit one batch).
 * @returns the rules, bytes and transactions sent.
 * @throws as {@link resolveRuleAdds}; NftRequestError naming the rule the kernel refused.
 */
export async function writeNetlinkRules(
  client: Pick<NftNetlinkClient, 'readStructure' | 'addRules'>,
  family: IPFamily,
  rules: readonly NetlinkRuleOf[],
): Promise<{ readonly rules: number; readonly bytes: number; readonly transactions: number }> {
  if (rules.length === 0) return { rules: 0, bytes: 0, transactions: 0 };
  return client.addRules(await resolveRuleAdds(client, family, rules));
}
