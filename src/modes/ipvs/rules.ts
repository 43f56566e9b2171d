/**
 * The iptables rules of IPVS mode: loaded from `rules/ipvs/static.rules`
 * with the one option-dependent match substituted, and planned with the
 * iptables backend's own machinery (fullPlan, diffTable, planToRestore,
 * cleanupPlan), so a full sync reads the tables back and writes only what
 * differs, exactly as in iptables mode. Pure, except for reading the file.
 *
 * IPVS mode has no per-service iptables rules, so its desired ruleset is the
 * static one alone: fullPlan with no service port. On top of that, a full
 * sync removes what only iptables mode has, so that a node switched from
 * iptables mode keeps nothing stale: fullPlan itself deletes the KUBE-SVC and
 * KUBE-SEP chains (stale service chains) and empties filter KUBE-SERVICES of
 * its REJECTs (IPVS mode declares that chain empty), and
 * {@link otherModeLeftovers} deletes iptables mode's hook jumps to it.
 *
 * The IPv6 family has its own file, rules/ipvs/static6.rules (the same
 * rules over the IPv6 sets, ipset.ts familySetName), written with
 * ip6tables-restore; its iptables-mode counterpart is rules/iptables/static6.rules.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { isCanonicalIPv4CIDR, parseCIDR } from '../../model/addr.ts';
import type { IPFamily } from '../../model/types.ts';
import { TABLES, type ParsedDump } from '../../kernel/iptables/parse.ts';
import { emptyPlan, mergePlans, type Plan } from '../../kernel/iptables/plan.ts';
import type { RenderOptions } from '../../config/render.ts';
import { builtinChainRules, fullPlan } from '../shared/kube-chains/ruleset.ts';
import { hookIdentities, loadStatic6Rules, loadStaticRules, parseStaticRules, withInvalidDrop, type StaticRuleset } from '../shared/kube-chains/static.ts';

/** Path of IPVS mode's rules file. */
export const IPVS_STATIC_RULES_PATH = fileURLToPath(new URL('../../../rules/ipvs/static.rules', import.meta.url));

/** Path of IPVS mode's rules file for the IPv6 family (ip6tables). */
export const IPVS_STATIC6_RULES_PATH = fileURLToPath(new URL('../../../rules/ipvs/static6.rules', import.meta.url));

/** True for a canonical CIDR of `family` ("10.244.0.0/16", "fd00:10:244::/64"). */
function isFamilyCIDR(text: string, family: IPFamily): boolean {
  if (family === 'IPv4') return isCanonicalIPv4CIDR(text);
  const parsed = parseCIDR(text);
  return parsed?.prefix.family === 6 && parsed.prefix.text === text;
}

/** The placeholder in the rules file for the source match of the ClusterIP masquerade rule. */
export const MASQUERADE_PLACEHOLDER = '{{MASQUERADE_MATCH}}';

/** The placeholder in the rules file for the source match that leaves out this node's pods: `! -s CIDR` with `--cluster-cidr`, else nothing. */
export const NOT_FROM_PODS_PLACEHOLDER = '{{NOT_FROM_PODS}}';

/**
 * Substitute the masquerade match into the rules text:
 * `--masquerade-all` → empty (all traffic); `--cluster-cidr` → `! -s CIDR`;
 * neither → the rule line is removed. {@link NOT_FROM_PODS_PLACEHOLDER} is
 * replaced on every rule line that has it.
 * @param family the family of the rules (default IPv4): `opts.clusterCIDR` must be a canonical CIDR of it
 * @throws Error when the placeholder is not on exactly one rule line, or the CIDR is not valid.
 */
export function substituteMasquerade(text: string, opts: RenderOptions, family: IPFamily = 'IPv4'): string {
  const lines = text.split('\n');
  const at = lines.flatMap((l, i) => (!l.startsWith('#') && l.includes(MASQUERADE_PLACEHOLDER) ? [i] : []));
  if (at.length !== 1) throw new Error(`IPVS rules: expected ${MASQUERADE_PLACEHOLDER} on exactly one rule line, found ${at.length}`);
  const i = at[0]!;
  let match: string | undefined;
  if (opts.masqueradeAll) match = '';
  else if (opts.clusterCIDR !== undefined) {
    if (!isFamilyCIDR(opts.clusterCIDR, family)) throw new Error(`refusing to render cluster CIDR ${JSON.stringify(opts.clusterCIDR)}: not a valid ${family} CIDR`);
    match = `! -s ${opts.clusterCIDR}`;
  }
  if (match === undefined) lines.splice(i, 1);
  else lines[i] = lines[i]!.replace(MASQUERADE_PLACEHOLDER, match).replace(/ {2,}/g, ' ');
  const notFromPods = opts.clusterCIDR !== undefined ? `! -s ${opts.clusterCIDR}` : '';
  if (notFromPods !== '' && !isFamilyCIDR(opts.clusterCIDR!, family)) throw new Error(`refusing to render cluster CIDR ${JSON.stringify(opts.clusterCIDR)}: not a valid ${family} CIDR`);
  return lines.map((l) => (!l.startsWith('#') && l.includes(NOT_FROM_PODS_PLACEHOLDER) ? l.replace(NOT_FROM_PODS_PLACEHOLDER, notFromPods).replace(/ {2,}/g, ' ') : l)).join('\n');
}

/**
 * IPVS mode's static ruleset for the given options (without the drop of
 * conntrack-INVALID packets when `opts.tcpBeLiberal`).
 * @param text the rules file's text (default: rules/ipvs/static.rules, or static6.rules for IPv6)
 * @param family the family of the rules (default IPv4); for IPv6, `opts.clusterCIDR` is the IPv6 cluster CIDR (or none)
 * @throws Error or IptablesParseError for a bad rules file or option
 */
export function ipvsStaticRules(opts: RenderOptions, text?: string, family: IPFamily = 'IPv4'): StaticRuleset {
  const source = text ?? readFileSync(family === 'IPv6' ? IPVS_STATIC6_RULES_PATH : IPVS_STATIC_RULES_PATH, 'utf8');
  return withInvalidDrop(parseStaticRules(substituteMasquerade(source, opts, family)), opts.tcpBeLiberal);
}

/**
 * iptables mode's static rules of `family` (rules/iptables/static.rules or
 * static6.rules): what {@link ipvsRulesPlan} removes the leftovers of.
 */
export function iptablesModeStatics(family: IPFamily): StaticRuleset {
  return family === 'IPv6' ? loadStatic6Rules() : loadStaticRules();
}

/**
 * The hook jumps of another mode's static rules (`other`) that `mine` lacks,
 * every copy and variant present in the kernel (by static.ts hookIdentity),
 * to be deleted by a full sync: for IPVS mode, iptables mode's jumps from
 * filter INPUT, FORWARD and OUTPUT to KUBE-SERVICES, KUBE-EXTERNAL-SERVICES,
 * KUBE-PROXY-FIREWALL and KUBE-NODEPORTS, and from nat PREROUTING and
 * OUTPUT to KUBE-NODEPORTS. (iptables mode's static chains that IPVS mode
 * lacks are deleted by fullPlan's `retired`.) Pure.
 */
export function otherModeLeftovers(mine: StaticRuleset, other: StaticRuleset, kernel: ParsedDump): Plan {
  const plan = emptyPlan();
  const theirs = hookIdentities(other);
  const ours = hookIdentities(mine);
  for (const table of TABLES) plan[table].deleteRules.push(...builtinChainRules(table, kernel, (id) => theirs.has(id) && !ours.has(id)));
  return plan;
}

/**
 * The full-sync plan of IPVS mode's iptables rules against the kernel's
 * read-back: fullPlan with IPVS mode's static rules and no service port,
 * plus the removal of iptables mode's leftovers. Against tables that already
 * match, the plan is empty. Pure.
 * @param iptablesMode iptables mode's static rules (default: rules/iptables/static.rules)
 */
export function ipvsRulesPlan(statics: StaticRuleset, kernel: ParsedDump, iptablesMode: StaticRuleset = loadStaticRules()): Plan {
  return mergePlans(fullPlan(statics, new Map(), kernel, { retired: iptablesMode }), otherModeLeftovers(statics, iptablesMode, kernel));
}
