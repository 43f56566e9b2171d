/**
 * IPVS mode for both IP families (shared/dual-stack.ts), as kube-proxy runs
 * an IPv4 and an IPv6 IPVS proxier side by side (pkg/proxy/ipvs/proxier.go
 * NewDualStackProxier): one IpvsBackend per family, each fed its family's
 * view of the snapshot (model/family.ts). They share the IPVS socket,
 * kube-ipvs0, ipset and the sysctls; each has its own virtual servers,
 * sets (KUBE-6-… for IPv6, ipset.ts familySetName), addresses on
 * kube-ipvs0 and rules (iptables-restore and ip6tables-restore, both
 * `--noflush`). A failure in one family never stops the other (kube-proxy
 * issue 73157). The IPv6 family wakes up for IPv6 service ports, or for its
 * set KUBE-6-CLUSTER-IP found in the kernel (left by an earlier run, to be
 * repaired or removed).
 */
import type { Logger } from '../../util/log.ts';
import { DualStackBackend } from '../shared/dual-stack.ts';
import type { ModeSyncDetail } from '../../proxier/backend.ts';
import { IpvsBackend, type IpvsBackendOptions } from './backend.ts';
import { CLUSTER_IP_SET, familySetName } from './ipset.ts';
import { isIpvsDetail, type IpvsSyncDetail } from './sync-detail.ts';

/** One family's part: what differs between the families' backends. */
export type IpvsFamilyPart = Pick<IpvsBackendOptions, 'iptables' | 'render' | 'serviceCIDR' | 'nodeAddresses' | 'statics'>;

/** Options of {@link DualStackIpvsBackend}: what both families share, and each family's part. */
export interface DualStackIpvsOptions {
  readonly shared: Omit<IpvsBackendOptions, keyof IpvsFamilyPart | 'family' | 'logger'>;
  readonly IPv4: IpvsFamilyPart;
  readonly IPv6: IpvsFamilyPart;
  readonly logger: Logger;
}

/** IPVS mode's Backend for both families (see the module comment). */
export class DualStackIpvsBackend extends DualStackBackend {
  /** Each family's backend (tests look at their pending removals). */
  readonly families: Readonly<Record<'IPv4' | 'IPv6', IpvsBackend>>;

  /** @throws as IpvsBackend's constructor, for either family. */
  constructor(opts: DualStackIpvsOptions) {
    const families = {
      IPv4: new IpvsBackend({ ...opts.shared, ...opts.IPv4, family: 'IPv4', logger: opts.logger }),
      IPv6: new IpvsBackend({ ...opts.shared, ...opts.IPv6, family: 'IPv6', logger: opts.logger }),
    };
    super({
      mode: 'ipvs',
      backends: families,
      logger: opts.logger,
      // True when the IPv6 ClusterIP set exists: an earlier run programmed IPv6.
      ipv6HasState: async () => (await opts.shared.ipset.entryCount(familySetName(CLUSTER_IP_SET, 'IPv6'))) !== undefined,
      mergeDetail: mergeIpvsDetail,
    });
    this.families = families;
  }
}

/** Both families' IPVS details: counts added, set names listed together. */
export function mergeIpvsDetail(a: ModeSyncDetail | undefined, b: ModeSyncDetail | undefined): ModeSyncDetail | undefined {
  if (!isIpvsDetail(a) || !isIpvsDetail(b)) return a;
  const x: IpvsSyncDetail = a;
  const y: IpvsSyncDetail = b;
  const ops = Object.fromEntries(Object.entries(x.ops).map(([k, n]) => [k, n + (y.ops[k as keyof typeof y.ops] ?? 0)])) as IpvsSyncDetail['ops'];
  const merged: IpvsSyncDetail = {
    mode: 'ipvs',
    ops,
    addressesAdded: x.addressesAdded + y.addressesAdded,
    addressesRemoved: x.addressesRemoved + y.addressesRemoved,
    ipsetAdded: x.ipsetAdded + y.ipsetAdded,
    ipsetDeleted: x.ipsetDeleted + y.ipsetDeleted,
    ipsetRebuilt: [...x.ipsetRebuilt, ...y.ipsetRebuilt],
    ipsetLeftovers: [...x.ipsetLeftovers, ...y.ipsetLeftovers],
    pending: x.pending + y.pending,
    ipvsReads: x.ipvsReads + y.ipvsReads,
  };
  return merged;
}
