/**
 * nftables mode for both IP families (shared/dual-stack.ts): one
 * NftablesBackend per family, each fed its family's view of the snapshot
 * (model/family.ts), the IPv4 one programming `table ip drover`, the IPv6
 * one `table ip6 drover` with the same sets, maps and chains (layout.ts),
 * as kube-proxy's nftables proxier keeps one table per family
 * (pkg/proxy/nftables: `ip kube-proxy`, `ip6 kube-proxy`). Each family has
 * its own nft and element writer, so each table is written in
 * transactions of its own: a failure in one family never stops the other
 * (kube-proxy issue 73157). The IPv6 family wakes up for IPv6 service
 * ports, or for a `table ip6 drover` found in the kernel (left by an
 * earlier run, to be repaired or removed).
 *
 * Both tables' transactions move the namespace's one generation id, so
 * after each sync each family that synced takes the generation id as it
 * then is (NftablesBackend.acknowledgeGeneration): the cheap drift check
 * then sees only other programs' transactions.
 */
import { familyView } from '../../model/family.ts';
import { refusalText, settleView } from '../../model/frontend-index.ts';
import type { IPFamily, Snapshot } from '../../model/types.ts';
import type { Logger } from '../../util/log.ts';
import type { RenderOptions } from '../../config/render.ts';
import { DualStackBackend } from '../shared/dual-stack.ts';
import type { ModeSyncDetail } from '../../proxier/backend.ts';
import { liveStructure, NftablesBackend, planFullSync, type NftablesBackendOptions } from './backend.ts';
import { conflictText } from './desired.ts';
import { tableRef } from './layout.ts';
import { TableModel } from './model.ts';
import { orderOps } from './plan.ts';
import { transactionScript } from './script.ts';
import { isNftablesDetail, type NftablesSyncDetail } from './sync-detail.ts';

/** One family's part: its nft, element writer, render options (`family` set for IPv6) and NodePort addresses. */
export type NftFamilyPart = Omit<NftablesBackendOptions, 'logger'>;

/** Options of {@link DualStackNftablesBackend}. */
export interface DualStackNftOptions {
  readonly IPv4: NftFamilyPart;
  readonly IPv6: NftFamilyPart;
  readonly logger: Logger;
}

/** nftables mode's Backend for both families (see the module comment). */
export class DualStackNftablesBackend extends DualStackBackend {
  constructor(opts: DualStackNftOptions) {
    const backends: Record<IPFamily, NftablesBackend> = {
      IPv4: new NftablesBackend({ ...opts.IPv4, logger: opts.logger }),
      IPv6: new NftablesBackend({ ...opts.IPv6, render: { ...opts.IPv6.render, family: 'IPv6' }, logger: opts.logger }),
    };
    super({
      mode: 'nftables',
      backends,
      logger: opts.logger,
      // Over netlink with the IPv6 element writer, else with nft -j -t.
      ipv6HasState: async () => (await liveStructure(opts.IPv6.elements, opts.IPv6.nft, opts.logger, tableRef('IPv6'))).exists,
      mergeDetail: mergeNftDetail,
      afterSync: async (synced) => {
        if (synced.length < 2) return;
        for (const family of synced) await backends[family].acknowledgeGeneration();
      },
    });
  }
}

/**
 * Both families' nftables details: the way that wrote the most of the two (`nft+netlink`, a table created from
 * nothing, over `nft`, a script, over `netlink`, elements alone, over `none`); structural when either was.
 */
export function mergeNftDetail(a: ModeSyncDetail | undefined, b: ModeSyncDetail | undefined): ModeSyncDetail | undefined {
  if (!isNftablesDetail(a) || !isNftablesDetail(b)) return a;
  const rank: readonly NftablesSyncDetail['via'][] = ['none', 'netlink', 'nft', 'nft+netlink'];
  const via = rank[Math.max(rank.indexOf(a.via), rank.indexOf(b.via))]!;
  const merged: NftablesSyncDetail = { mode: 'nftables', via, structural: a.structural || b.structural, ...(a.cleanupFailed || b.cleanupFailed ? { cleanupFailed: true } : {}) };
  return merged;
}

/** What {@link renderFamilies} renders one family's table with: its render options (`family` set for IPv6) and NodePort addresses. */
export interface RenderFamily {
  readonly render: RenderOptions;
  readonly nodePortIPs: readonly string[];
}

/**
 * The nft script a first full sync of `snapshot` writes onto an empty node
 * (`drover render --mode nftables`): `table ip drover`, then, when the
 * snapshot has IPv6 service ports, `table ip6 drover` under a comment
 * line, each from its family's view; and the frontends refused
 * (model/frontend-index.ts) and service ports left out (desired.ts
 * conflicts). Pure.
 */
export function renderFamilies(snapshot: Snapshot, families: Readonly<Record<IPFamily, RenderFamily>>): { text: string; leftOut: string[] } {
  let text = '';
  const leftOut: string[] = [];
  for (const family of ['IPv4', 'IPv6'] as const) {
    const view = familyView(snapshot, family);
    if (family === 'IPv6' && view.services.size === 0) continue;
    const { render, nodePortIPs } = families[family];
    const empty = new TableModel();
    const plan = planFullSync(empty, view, { ...render, ...(family === 'IPv6' ? { family } : {}) }, { nodePortIPs, family }, false);
    if (family === 'IPv6') text += `# table ${tableRef(family)}: the IPv6 view of the source\n`;
    text += transactionScript(plan.structure, plan.want, empty, orderOps(plan.ops), family);
    // The frontends the model's index refuses (the same lines in every mode), then those left out here besides.
    leftOut.push(...settleView(view, family).refusals.map((r) => refusalText(r, family)), ...plan.conflicts.map(conflictText));
  }
  return { text, leftOut };
}
