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
 * then sees only other programs' transactions. With a notification watch
 * (repair-watch.ts) the drift check reads nothing: another program's batch
 * on either table asks for a repair at once, and its batches on other
 * tables cost nothing.
 */
import { familyView } from '../../model/family.ts';
import { refusalText, settleView } from '../../model/frontend-index.ts';
import type { IPFamily, Snapshot } from '../../model/types.ts';
import type { Logger } from '../../util/log.ts';
import type { RenderOptions } from '../../config/render.ts';
import { DualStackBackend } from '../shared/dual-stack.ts';
import type { ChangeSet, ModeSyncDetail, SyncResult } from '../../proxier/backend.ts';
import { liveStructure, NftablesBackend, planFullSync, type ElementWriter, type NftablesBackendOptions } from './backend.ts';
import { ownWrites, type RepairWatch } from './repair-watch.ts';
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
  /**
   * The watch of both tables' nf_tables notifications (repair-watch.ts);
   * used only when both families' element writers read the generation id.
   * Without it, or when its socket cannot be opened, the drift check between
   * full syncs compares the generation id.
   */
  readonly watch?: RepairWatch;
}

/** A family's part with its writes noted as drover's own by `watch` (repair-watch.ts ownWrites), when there is one. */
function watched(part: NftFamilyPart, watch: RepairWatch | undefined): NftFamilyPart {
  const elements = part.elements;
  if (watch === undefined || elements?.generation === undefined) return part;
  return { ...part, ...ownWrites(part.nft, elements as ElementWriter & { generation(): Promise<number> }, watch) };
}

/** nftables mode's Backend for both families (see the module comment). */
export class DualStackNftablesBackend extends DualStackBackend {
  /** The notification watch, when both families can tell their own writes (see {@link DualStackNftOptions.watch}). */
  private readonly watch: RepairWatch | undefined;
  /** Whether the watch runs (its socket opened at watchDrift). */
  private watching = false;
  /** Each family's backend, for the watch's element repairs. */
  private readonly families: Readonly<Record<IPFamily, NftablesBackend>>;
  private readonly log: Logger;

  constructor(opts: DualStackNftOptions) {
    const watch = opts.watch !== undefined && opts.IPv4.elements?.generation !== undefined && opts.IPv6.elements?.generation !== undefined ? opts.watch : undefined;
    if (opts.watch !== undefined && watch === undefined) opts.watch.close();
    const v4 = watched(opts.IPv4, watch);
    const v6 = watched(opts.IPv6, watch);
    const backends: Record<IPFamily, NftablesBackend> = {
      IPv4: new NftablesBackend({ ...v4, logger: opts.logger }),
      IPv6: new NftablesBackend({ ...v6, render: { ...v6.render, family: 'IPv6' }, logger: opts.logger }),
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
    this.watch = watch;
    this.families = backends;
    this.log = opts.logger;
  }

  /** With the watch: a repair as soon as another program's batch on drover's tables is seen (repair-watch.ts). */
  async watchDrift(repair: (reason: string, full: boolean) => void): Promise<void> {
    this.watching = (await this.watch?.start(repair)) ?? false;
  }

  /**
   * A full sync covers what the watch found before it began; any other sync
   * first puts back the elements another program changed (repairElements),
   * or asks for a full sync when it cannot.
   */
  override async sync(snapshot: Snapshot, changes: ChangeSet): Promise<SyncResult> {
    if (changes.full) this.watch?.covered();
    else await this.repairElements();
    return super.sync(snapshot, changes);
  }

  /** The watch's element repairs, table by table (see {@link sync}). */
  private async repairElements(): Promise<void> {
    const watch = this.watch;
    if (watch === undefined) return;
    for (const [table, sets] of watch.takeElementRepairs()) {
      const family = (['IPv4', 'IPv6'] as const).find((f) => tableRef(f) === table);
      let written: number | undefined;
      try {
        written = family === undefined ? undefined : await this.families[family].repairElements(sets);
      } catch (err) {
        this.log.warn({ table, sets: [...sets], err: (err as Error).message }, 'putting back the elements another program changed failed');
      }
      if (written === undefined) {
        watch.escalate(`the elements of ${[...sets].join(', ')} in table ${table} could not be put back alone: full sync`);
        return;
      }
      this.log.info({ table, sets: [...sets], elements: written }, 'put back the elements another program changed');
    }
  }

  /**
   * With the watch, what it found since the last full sync began (no kernel
   * read: another program's commits to other tables cost nothing); without
   * it, each family's generation id check (NftablesBackend.driftCheck).
   */
  override async driftCheck(): Promise<string | undefined> {
    if (this.watching) return this.watch!.drift();
    return super.driftCheck();
  }

  /** Close the watch, then both families' sockets. */
  override async close(): Promise<void> {
    this.watch?.close();
    await super.close();
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
