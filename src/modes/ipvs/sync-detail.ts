/**
 * IPVS mode's account of a sync, carried in SyncResult.detail (proxier/backend.ts):
 * what the mode-neutral counts by kind do not tell.
 */
import type { ModeSyncDetail } from '../../proxier/backend.ts';
import type { IpvsOp } from './reconcile.ts';

/** What IPVS mode did besides iptables, for the log, the bench and tests. */
export interface IpvsSyncDetail extends ModeSyncDetail {
  /** Tells this detail from other modes' (SyncResult.detail). */
  readonly mode: 'ipvs';
  /** IPVS commands sent, by kind. */
  readonly ops: Readonly<Record<IpvsOp['kind'], number>>;
  /** ClusterIPs bound to kube-ipvs0 (also counted as written `address`). */
  readonly addressesAdded: number;
  /** ClusterIPs removed from kube-ipvs0 (also counted as deleted `address`). */
  readonly addressesRemoved: number;
  /** Set entries that became present (also written `set entry`; a rebuilt set counts only these, not every entry it rewrote). */
  readonly ipsetAdded: number;
  /** Set entries that went (also deleted `set entry`). */
  readonly ipsetDeleted: number;
  /** Sets rebuilt and swapped in because they held an entry drover never writes (ipset.ts). */
  readonly ipsetRebuilt: readonly string[];
  /** Scratch sets left over by an interrupted rebuild, destroyed. */
  readonly ipsetLeftovers: readonly string[];
  /** Real servers in graceful termination after the sync. */
  readonly pending: number;
  /** Netlink requests made to read IPVS state. */
  readonly ipvsReads: number;
}


/** IPVS mode's detail of `result`, or undefined when the result is another mode's. */
export function ipvsDetail(result: { readonly detail?: ModeSyncDetail }): IpvsSyncDetail | undefined {
  return isIpvsDetail(result.detail) ? result.detail : undefined;
}

/** Whether `detail` is IPVS mode's (SyncResult.detail of an IPVS backend). */
export function isIpvsDetail(detail: ModeSyncDetail | undefined): detail is IpvsSyncDetail {
  return detail?.mode === 'ipvs';
}
