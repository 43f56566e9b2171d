/** nftables mode's account of a sync, carried in SyncResult.detail (proxier/backend.ts). */
import type { ModeSyncDetail } from '../../proxier/backend.ts';

/** What nftables mode reports of a sync besides the counts by kind. */
export interface NftablesSyncDetail extends ModeSyncDetail {
  /** Tells this detail from other modes' (SyncResult.detail). */
  readonly mode: 'nftables';
  /**
   * How the sync went to the kernel: nf_tables netlink (elements only, one transaction), an `nft -f` script, a
   * table created from nothing as its structure by `nft -f` and its elements over netlink in batches
   * (`nft+netlink`), or nothing to write.
   */
  readonly via: 'netlink' | 'nft' | 'nft+netlink' | 'none';
  /** True when the sync changed the table's structure (sets, chains), not only elements. */
  readonly structural: boolean;
  /**
   * Present (true) when the clean-up after the sync, in a transaction of its
   * own, failed: the stale affinity entries were not deleted (the next full
   * sync tries again). kube-proxy's nftables proxier deletes stale chains
   * that way and counts a failure in
   * `sync_proxy_rules_nftables_cleanup_failures_total`; so does drover.
   */
  readonly cleanupFailed?: true;
}

/** Whether `detail` is nftables mode's (SyncResult.detail of an nftables backend). */
export function isNftablesDetail(detail: ModeSyncDetail | undefined): detail is NftablesSyncDetail {
  return detail?.mode === 'nftables';
}

/**
 * What the proxier's "sync done" log line adds for an nftables sync: whether
 * the elements went over nf_tables netlink or `nft -f` (`via`), and whether
 * the table's structure changed (`structural`); nothing for another mode's detail.
 */
export function nftablesSyncLogFields(detail: ModeSyncDetail | undefined): Readonly<Record<string, unknown>> {
  return isNftablesDetail(detail) ? { via: detail.via, structural: detail.structural } : {};
}
