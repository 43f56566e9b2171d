/**
 * `drover diff --mode nftables`: what the next full sync would write onto
 * the live table (backend.ts planFullSync), one line per difference.
 */
import type { FullSyncPlan } from './backend.ts';
import type { IPFamily } from '../../model/types.ts';
import { tableRef } from './layout.ts';
import type { TableModel } from './model.ts';
import { orderOps } from './plan.ts';

/** The number of differences in `plan`: element operations and structural changes. */
export function nftDriftCount(plan: FullSyncPlan): number {
  const s = plan.structure;
  if (s.rebuild) return 1 + plan.ops.length;
  return plan.ops.length + s.addSets.length + s.writeChains.length + s.deleteSets.length + s.deleteChains.length;
}

/**
 * The report: `+`/`-` for what the sync would add or delete, `~` for a
 * chain whose rules it would write again; "no differences" when none.
 * `model` is the live table of `family` (default IPv4) the plan was made against.
 */
export function formatNftDrift(plan: FullSyncPlan, model: TableModel, family: IPFamily = 'IPv4'): string {
  const s = plan.structure;
  const lines: string[] = [];
  const t = tableRef(family);
  if (s.rebuild) lines.push(model.exists ? `~ table ${t}: sets or base chains of another shape; written again whole` : `+ table ${t} (missing)`);
  for (const set of s.addSets) lines.push(`+ set ${set.name} (missing)`);
  for (const c of s.writeChains) lines.push(model.chains.has(c.name) ? `~ chain ${c.name}: other rules` : `+ chain ${c.name} (missing)`);
  for (const name of s.deleteChains) lines.push(`- chain ${name} (not drover's layout)`);
  for (const op of orderOps(plan.ops)) {
    lines.push(`${op.op === 'add' ? '+' : '-'} element ${op.set} ${op.key}${op.op === 'add' && op.value !== undefined ? ` : ${op.value}` : ''}`);
  }
  for (const name of s.deleteSets) lines.push(`- set ${name} (unused)`);
  return lines.length === 0 ? 'no differences\n' : `${lines.join('\n')}\n`;
}
