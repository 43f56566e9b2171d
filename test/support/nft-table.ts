/**
 * The table nftables mode writes, without a kernel: a full sync planned
 * onto an empty table (backend.ts planFullSync) and the model after it
 * (modelAfterWrite), as `nft -j list` would read it back (TableModel.toLive).
 */
import type { Snapshot } from '../../src/model/types.ts';
import type { RenderOptions } from '../../src/config/render.ts';
import { modelAfterWrite, planFullSync } from '../../src/modes/nftables/backend.ts';
import type { LiveTable } from '../../src/modes/nftables/live.ts';
import { TableModel } from '../../src/modes/nftables/model.ts';
import { orderOps } from '../../src/modes/nftables/plan.ts';

/** The live table after a first full sync of `snapshot` with NodePorts on `nodePortIPs`. */
export function plannedTable(snapshot: Snapshot, render: RenderOptions, nodePortIPs: readonly string[]): LiveTable {
  const empty = new TableModel();
  const plan = planFullSync(empty, snapshot, render, { nodePortIPs }, false);
  return modelAfterWrite(empty, plan.structure, plan.want, orderOps(plan.ops)).toLive();
}
