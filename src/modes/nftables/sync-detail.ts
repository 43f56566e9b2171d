/** nftables mode's account of a sync, carried in SyncResult.detail (types.ts). */

/** What nftables mode reports of a sync besides the counts by kind. */
export interface NftablesSyncDetail {
  /** Tells this detail from other modes' (SyncResult.detail). */
  readonly mode: 'nftables';
  /** How the transaction went to the kernel: nf_tables netlink (elements only), an `nft -f` script, or nothing to write. */
  readonly via: 'netlink' | 'nft' | 'none';
  /** True when the sync changed the table's structure (sets, chains), not only elements. */
  readonly structural: boolean;
}
