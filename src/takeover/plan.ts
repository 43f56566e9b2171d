/**
 * `drover takeover`, the plan: from a survey (survey.ts) and the mode asked
 * for, what is adopted, what is removed after the check, and why a takeover
 * is refused before anything changes. Pure, with the text `takeover` prints
 * for the survey and the plan.
 */
import type { ModeFinding, NodeSurvey } from './survey.ts';

/** What `takeover --mode TARGET` will do on a surveyed namespace. */
export interface TakeoverPlan {
  /** The mode asked for. */
  readonly target: string;
  /** The target mode's own state already there (drover's, or kube-proxy's in the same layout): its full sync adopts it. */
  readonly adopt: readonly string[];
  /** The other modes whose state is there: checked against the target's, then removed by their own cleanup. */
  readonly remove: readonly ModeFinding[];
  /** kube-proxy's nftables tables to check against the target's state, then delete ("ip kube-proxy"). */
  readonly checkTables: readonly string[];
  /** kube-proxy's nftables tables to delete unchecked (with `force`). */
  readonly deleteTables: readonly string[];
  /** Why the takeover cannot go on; undefined when it can. One line. */
  readonly refusal?: string;
}

/**
 * The takeovers that are not built, as (from, to) mode pairs; `*` stands
 * for any mode. To IPVS mode: not built. From IPVS mode to iptables mode:
 * the two layouts share nat chains (KUBE-SERVICES, KUBE-POSTROUTING,
 * KUBE-MARK-MASQ…), so each one's full sync and cleanup would rewrite or
 * remove the other's.
 */
const NOT_BUILT: ReadonlyArray<readonly [string, string, string]> = [
  ['*', 'ipvs', 'a takeover to IPVS mode is not built yet'],
  ['ipvs', 'iptables', "a takeover from IPVS mode to iptables mode is not built yet (their layouts share nat chains, such as KUBE-SERVICES, so IPVS mode's cleanup would remove iptables mode's); move to nftables mode"],
];

/** Why moving from `from` to `target` is not built, or undefined when it is. */
function notBuilt(from: string, target: string): string | undefined {
  return NOT_BUILT.find(([f, t]) => (f === '*' || f === from) && t === target)?.[2];
}

/**
 * The plan of `takeover --mode target` for `survey`. Refused: when IPVS
 * mode is the target, or its state is there and the target is iptables
 * mode (not built); when a mode to remove says its state cannot be
 * checked and removed from here (ModeSurvey.cannotRemove). kube-proxy's
 * nftables tables are checked like another mode's state
 * (kube-proxy-nftables.ts), then deleted; with `force`, deleted unchecked.
 */
export function planTakeover(survey: NodeSurvey, target: string, force: boolean): TakeoverPlan {
  const own = survey.modes.find((m) => m.mode === target);
  const remove = survey.modes.filter((m) => m.mode !== target && m.found.length > 0);
  const base = { target, adopt: own?.found ?? [], remove, checkTables: force ? [] : survey.kubeProxyTables, deleteTables: force ? survey.kubeProxyTables : [] };
  const refused = [undefined, ...remove.map((m) => m.mode)].map((from) => notBuilt(from ?? '*', target)).find((r) => r !== undefined);
  if (refused !== undefined) return { ...base, refusal: `${refused}; nothing was changed` };
  const unreadable = remove.find((m) => m.cannotRemove !== undefined);
  if (unreadable !== undefined) return { ...base, refusal: `${unreadable.title} mode's state cannot be checked and removed from here: ${unreadable.cannotRemove}; nothing was changed` };
  const apart = survey.modes.find((m) => (m.elsewhere ?? []).length > 0);
  if (apart !== undefined) {
    return {
      ...base,
      refusal: `${apart.title} mode's layout is also in ${apart.elsewhere!.join('; ')}, which drover neither checks nor removes here: its hooks would keep sending connections where they sent them; remove it with that iptables variant's cleanup (drover cleanup --mode ${apart.mode} --iptables-backend <variant>) first; nothing was changed`,
    };
  }
  return base;
}

/** The survey as `takeover` prints it: one block per mode, then kube-proxy's nftables tables. */
export function formatSurvey(survey: NodeSurvey): string {
  let text = 'found:\n';
  for (const m of survey.modes) {
    text += `  ${m.title} mode: ${m.found.length === 0 ? 'nothing' : m.found.join('; ')}\n`;
    for (const u of m.unread) text += `    not read: ${u}\n`;
    for (const e of m.elsewhere ?? []) text += `    also, in the other iptables variant: ${e}\n`;
    for (const i of m.ignored ?? []) text += `    ${i}\n`;
  }
  text += `  kube-proxy nftables mode: ${survey.kubeProxyTables.length === 0 ? 'nothing' : survey.kubeProxyTables.map((t) => `table ${t}`).join('; ')}\n`;
  return text;
}

/** The plan as `takeover` prints it (before it acts, and alone with `--dry-run`). */
export function formatPlan(plan: TakeoverPlan, titleOf: (mode: string) => string): string {
  const target = `${titleOf(plan.target)} mode`;
  let text = 'plan:\n';
  text += plan.adopt.length > 0 ? `  1. full sync in ${target}, adopting what is there\n` : `  1. full sync in ${target}, from nothing\n`;
  const checked = [...plan.remove.map((m) => `${m.title} mode`), ...plan.checkTables.map((t) => `table ${t}`)];
  const old = [...checked, ...plan.deleteTables.map((t) => `table ${t}`)];
  if (old.length === 0) {
    text += '  2. nothing else to remove\n';
  } else {
    text += `  2. check every frontend: ${checked.length > 0 ? `${checked.join(', ')} must send it to the same endpoints as ${target}` : 'nothing to check'}\n`;
    if (plan.deleteTables.length > 0) text += `     (${plan.deleteTables.map((t) => `table ${t}`).join(', ')} unchecked: --force)\n`;
    text += `  3. remove ${old.join(', ')}\n`;
  }
  if (plan.refusal !== undefined) text += `refused: ${plan.refusal}\n`;
  return text;
}
