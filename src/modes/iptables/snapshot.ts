/**
 * A whole snapshot in iptables mode's rules: every service port rendered
 * (render.ts) and, for `drover render` and a first sync, the complete
 * iptables-restore payload onto empty tables (kube-proxy's layout,
 * modes/shared/kube-chains/ruleset.ts).
 */
import type { Snapshot } from '../../model/types.ts';
import { settleView } from '../../model/frontend-index.ts';
import { planToRestore } from '../../kernel/iptables/plan.ts';
import { fullPlan } from '../shared/kube-chains/ruleset.ts';
import { loadStaticRules, type StaticRuleset } from '../shared/kube-chains/static.ts';
import type { RenderOptions } from '../../config/render.ts';
import { renderServicePort } from './render.ts';
import type { ServiceRules } from '../shared/kube-chains/service-rules.ts';

/**
 * The payload a full sync writes onto empty tables: the complete ruleset, as
 * `drover render` prints it. Pure.
 * @param header comment lines printed first (without `# `).
 */
export function renderRestore(snapshot: Snapshot, opts: RenderOptions, header: readonly string[] = [], statics: StaticRuleset = loadStaticRules()): string {
  return planToRestore(fullPlan(statics, renderSnapshot(snapshot, opts), new Map()), header);
}

/**
 * Render every service port of a snapshot (of `opts.family`'s view), in
 * key order, each with the frontends it is served with
 * (model/frontend-index.ts settleView: a frontend two service ports want is
 * rendered for its owner only).
 */
export function renderSnapshot(snapshot: Snapshot, opts: RenderOptions): Map<string, ServiceRules> {
  const out = new Map<string, ServiceRules>();
  const served = settleView(snapshot, opts.family ?? 'IPv4').view;
  for (const [key, sp] of served.services) out.set(key, renderServicePort(sp, opts, served.node));
  return out;
}
