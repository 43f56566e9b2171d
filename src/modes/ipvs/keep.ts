/**
 * What a full IPVS sync on an incomplete source leaves in place: the virtual
 * servers drover owns that the snapshot does not list (they may belong to a
 * service port in the part of the source that could not be read), with the
 * KUBE-CLUSTER-IP and KUBE-LOOP-BACK entries and the kube-ipvs0 address that
 * go with them (and the address's KUBE-IPVS-IPS entry while it is bound).
 * Pure.
 *
 * A kept virtual server on one of the host's own addresses (a NodePort, or
 * an external or LoadBalancer IP the host has) keeps no address: as when it
 * is wanted (frontends.ts), the node's address is never bound to kube-ipvs0
 * nor put in KUBE-IPVS-IPS, where KUBE-IPVS-FILTER would reject every new
 * connection to the node at a port that is not a service's (ssh, kubelet).
 *
 * The rule is the proxier's (proxier.ts): never delete on an incomplete view
 * of desired state; virtual servers the snapshot lists are repaired in full.
 */
import type { VirtualServerKey } from '../../kernel/ipvs/codec.ts';
import { virtualServerKey, type DesiredIpvsState, type DesiredVirtualServer } from './desired.ts';
import { CLUSTER_IP_SET, clusterIPEntry, IPVS_IPS_SET, LOOP_BACK_SET, loopBackEntry, type DesiredSets } from './ipset.ts';
import type { KernelIpvsState } from './reconcile.ts';

/** The state kept for unlisted virtual servers; every list sorted and without duplicates. */
export interface KeptIpvsState {
  /** Virtual server keys ("TCP/10.96.0.10:80") left as the kernel has them. */
  readonly servers: readonly string[];
  /** Their addresses, kept bound to kube-ipvs0; none of the host's own. */
  readonly addresses: readonly string[];
  /** Their KUBE-CLUSTER-IP entries. */
  readonly clusterIP: readonly string[];
  /** The KUBE-LOOP-BACK entries of their real servers. */
  readonly loopBack: readonly string[];
}

/**
 * The kernel's owned virtual servers that `desired` does not list (by key), and the
 * set entries and addresses they need. A virtual server whose entries cannot
 * be written (a protocol or address drover never programs) is still kept,
 * without entries.
 * @param owned true for a virtual server drover would delete when unwanted (reconcile.ts).
 * @param host the host's own addresses (frontends.ts NodeAddresses.hostAddresses), never kept bound.
 */
export function keptIpvsState(
  kernel: KernelIpvsState,
  desired: Pick<ReadonlyMap<string, DesiredVirtualServer>, 'has'>,
  owned: (vs: VirtualServerKey) => boolean,
  host: ReadonlySet<string>,
): KeptIpvsState {
  const servers: string[] = [];
  const addresses = new Set<string>();
  const clusterIP = new Set<string>();
  const loopBack = new Set<string>();
  for (const [key, have] of kernel) {
    if (desired.has(key) || !owned(have.entry)) continue;
    const { protocol, address, port } = have.entry;
    servers.push(key);
    if (!host.has(address)) addresses.add(address);
    try {
      clusterIP.add(clusterIPEntry(address, protocol, port));
      for (const d of have.dests) loopBack.add(loopBackEntry(d.address, protocol, d.port));
    } catch {
      // Not an entry drover writes: the virtual server is kept, its entries are not invented.
    }
  }
  const sorted = (s: Iterable<string>) => [...s].sort();
  return { servers: sorted(servers), addresses: sorted(addresses), clusterIP: sorted(clusterIP), loopBack: sorted(loopBack) };
}

/** What a full sync (or `diff`, which shows what one would write) brings the kernel to. */
export interface FullSyncTargets {
  /** The wanted entries of drover's sets. */
  readonly sets: DesiredSets;
  /** The wanted kube-ipvs0 addresses. */
  readonly addresses: readonly string[];
  /** True for a virtual server that may be deleted when it is not wanted (on an incomplete source only a withheld one the snapshot lists). */
  readonly owned: (vs: VirtualServerKey) => boolean;
  /** What is kept for unlisted virtual servers (nothing on a whole source). */
  readonly kept: KeptIpvsState;
}

/** Nothing kept: a sync on a whole source. */
export const NOTHING_KEPT: KeptIpvsState = { servers: [], addresses: [], clusterIP: [], loopBack: [] };

/**
 * The targets of a full sync of `want` against `kernel`: on a whole source
 * `want` itself; on an incomplete one `want` plus what {@link keptIpvsState}
 * keeps, and nothing may be deleted.
 * @param bound the addresses on kube-ipvs0 now: a kept address among them keeps its KUBE-IPVS-IPS entry.
 * @param host the host's own addresses (frontends.ts NodeAddresses.hostAddresses): never kept bound nor in KUBE-IPVS-IPS.
 */
export function fullSyncTargets(
  want: DesiredIpvsState,
  kernel: KernelIpvsState,
  owned: (vs: VirtualServerKey) => boolean,
  incomplete: boolean,
  bound: ReadonlySet<string>,
  host: ReadonlySet<string>,
): FullSyncTargets {
  if (!incomplete) {
    return { sets: want.sets, addresses: want.addresses, owned, kept: NOTHING_KEPT };
  }
  // A withheld virtual server (desired.ts) is listed: not kept, and deleted or drained (reconcile.ts) as on a whole source.
  const listed = (key: string) => want.virtualServers.has(key) || want.withheld.has(key);
  const kept = keptIpvsState(kernel, { has: listed }, owned, host);
  const union = (a: ReadonlySet<string>, b: readonly string[]) => (b.length === 0 ? a : new Set([...a, ...b]));
  return {
    // The frontend sets (NodePort, external, LoadBalancer) get only what the
    // snapshot wants: a kept virtual server's entries there are not known.
    sets: {
      ...want.sets,
      [CLUSTER_IP_SET]: union(want.clusterIPSet, kept.clusterIP),
      [LOOP_BACK_SET]: union(want.loopBackSet, kept.loopBack),
      [IPVS_IPS_SET]: union(want.sets[IPVS_IPS_SET], kept.addresses.filter((a) => bound.has(a))),
    },
    addresses: [...want.addresses, ...kept.addresses],
    owned: (vs) => want.withheld.has(virtualServerKey(vs)) && owned(vs),
    kept,
  };
}
