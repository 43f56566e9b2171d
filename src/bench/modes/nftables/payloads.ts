/**
 * Hand-built nftables-mode changes for the benchmark's baselines, one
 * service port changing from `before` to `after` (its frontends,
 * desired.ts; empty: absent). Pure; built off the clock, so that a
 * baseline's time is the kernel transaction alone.
 *
 * - minimalNftOps: only the element operations the change needs, as
 *   plan.ts plans them (planFrontend) for the table holding `before`: the
 *   physical limit of the change in drover's layout. Sent as one netlink
 *   batch (raw) or as `add/delete element` lines through `nft -f`.
 * - wholeTableScript: drover's whole table for a snapshot, deleted and
 *   written again in one `nft -f` transaction (script.ts transactionScript
 *   of a rebuild).
 */
import type { Snapshot } from '../../../model/types.ts';
import type { RenderOptions } from '../../../config/render.ts';
import { planFullSync } from '../../../modes/nftables/backend.ts';
import type { DesiredFrontend, DesiredOptions } from '../../../modes/nftables/desired.ts';
import { HAIRPIN } from '../../../modes/nftables/layout.ts';
import { TableModel, type ElementOp } from '../../../modes/nftables/model.ts';
import { orderOps, planFrontend } from '../../../modes/nftables/plan.ts';
import { transactionScript } from '../../../modes/nftables/script.ts';

/** The table model of a table that holds `frontends` and their hairpin entries, planned from an empty table (slots in the order of `targets`). */
export function modelOf(frontends: readonly DesiredFrontend[]): TableModel {
  const m = new TableModel();
  m.exists = true;
  const ops: ElementOp[] = [];
  for (const f of frontends) planFrontend(m, f.frontend, f, ops);
  for (const e of new Set(frontends.flatMap((f) => f.hairpin))) ops.push({ op: 'add', set: HAIRPIN, key: e });
  m.apply(ops);
  return m;
}

/**
 * The element operations, ordered (plan.ts orderOps), that take one
 * service port's frontends from `before` to `after`, in a table planned
 * from empty. Hairpin entries are per endpoint, so other service ports may
 * share them: an entry in `keep` (the entries of every other service port
 * after the change) is never deleted, nor added when already there.
 */
export function minimalNftOps(before: readonly DesiredFrontend[], after: readonly DesiredFrontend[], keep: ReadonlySet<string> = new Set()): ElementOp[] {
  const model = modelOf(before);
  const want = new Map(after.map((f) => [f.frontend, f] as const));
  const ops: ElementOp[] = [];
  for (const text of new Set([...before.map((f) => f.frontend), ...want.keys()])) planFrontend(model, text, want.get(text), ops);
  const had = new Set(before.flatMap((f) => f.hairpin));
  const has = new Set(after.flatMap((f) => f.hairpin));
  for (const e of had) if (!has.has(e) && !keep.has(e)) ops.push({ op: 'delete', set: HAIRPIN, key: e });
  for (const e of has) if (!had.has(e) && !keep.has(e)) ops.push({ op: 'add', set: HAIRPIN, key: e });
  return orderOps(ops);
}

/**
 * The `nft -f` script that writes drover's table whole, with every element
 * of `snapshot`, in one transaction: deleting the table first when
 * `replace` (the table exists), else into an empty kernel.
 */
export function wholeTableScript(snapshot: Snapshot, render: RenderOptions, frontends: DesiredOptions, replace = true): string {
  const empty = new TableModel();
  const plan = planFullSync(empty, snapshot, render, frontends, false);
  const live = new TableModel();
  live.exists = replace;
  return transactionScript(plan.structure, plan.want, live, orderOps(plan.ops));
}
