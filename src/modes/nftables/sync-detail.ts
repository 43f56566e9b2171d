/** nftables mode's account of a sync, carried in SyncResult.detail (types.ts). */

/** What nftables mode reports of a sync besides the counts by kind. */
export interface NftablesSyncDetail {
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
}
