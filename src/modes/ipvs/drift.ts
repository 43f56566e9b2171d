/**
 * The cheap drift check of IPVS mode, run at each `--sync-period` between
 * full read-backs (a full read-back dumps the real servers of every virtual
 * server: one netlink request each, 10,000 at 10,000 services). Pure parts;
 * the backend (backend.ts driftCheck) does the reads:
 *
 * - IPVS mode's iptables rules: the canary chains and hook jumps of
 *   iptables mode (iptables/drift-watch.ts);
 * - every virtual server: one IPVS_CMD_GET_SERVICE dump, compared with what
 *   drover programmed (present, not extra in drover's ranges, same
 *   scheduler, persistence and netmask: {@link virtualServerDrift});
 * - kube-ipvs0: one rtnetlink address dump, compared with the ClusterIPs
 *   drover bound;
 * - the ipsets: the entry count of each (`ipset list -t`, which prints the
 *   header only), compared with what drover wrote;
 * - real servers: those of a rotating window of virtual servers
 *   ({@link checkWindow}: at least {@link MIN_REAL_SERVER_CHECKS}, and enough
 *   that every virtual server is looked at within about
 *   {@link REAL_SERVER_ROUNDS} checks, 10 minutes at 10,000 services and
 *   the default 30 s period; about, because services added or removed in
 *   between shift the window);
 * - the IPVS sysctls (four reads of /proc/sys).
 *
 * kube-proxy's IPVS proxier has no such check: it reads everything back
 * every sync period (pkg/proxy/ipvs/proxier.go syncProxyRules). What this
 * misses (a real server edited by hand outside the window) is repaired by
 * the next check that reaches it, or by the hourly full read-back
 * (`--full-sync-period`).
 */
import type { DestEntry, ServiceEntry, VirtualServerKey } from '../../kernel/ipvs/codec.ts';
import { realServerKey, virtualServerKey, type DesiredVirtualServer } from './desired.ts';
import { pendingKey, type PendingList } from './graceful.ts';
import { sameDest, sameService } from './reconcile.ts';

/** Fewest virtual servers whose real servers one check dumps. */
export const MIN_REAL_SERVER_CHECKS = 256;

/** Every virtual server's real servers are dumped at least once in this many checks. */
export const REAL_SERVER_ROUNDS = 20;

/** What drover programmed, as the check needs it (DesiredIndex). */
export interface ProgrammedServers {
  server(key: string): DesiredVirtualServer | undefined;
  readonly serverCount: number;
}

/**
 * Why one dump of every virtual server differs from what drover programmed:
 * a programmed one missing or with another scheduler, persistence or
 * netmask, or one drover owns (`owned`: in `--service-cidr` or bound to
 * kube-ipvs0) that it did not program and that is not `draining` (by key: a
 * withheld virtual server kept while its real servers drain, reconcile.ts);
 * undefined when they agree.
 */
export function virtualServerDrift(
  programmed: ProgrammedServers,
  dumped: readonly ServiceEntry[],
  owned: (vs: VirtualServerKey) => boolean,
  draining: (key: string) => boolean = () => false,
): string | undefined {
  let present = 0;
  for (const entry of dumped) {
    const key = virtualServerKey(entry);
    const want = programmed.server(key);
    if (!want) {
      if (owned(entry) && !draining(key)) return `virtual server ${key} is in the kernel, and drover did not program it`;
      continue;
    }
    present++;
    if (!sameService(want.vs, entry)) return `virtual server ${key} has another scheduler, persistence or netmask than drover programmed`;
  }
  const missing = programmed.serverCount - present;
  return missing > 0 ? `${missing} of ${programmed.serverCount} virtual servers drover programmed are gone from the kernel` : undefined;
}

/**
 * Why the real servers of one virtual server differ from what drover
 * programmed: one missing or with another weight, forwarding or
 * thresholds, or one drover did not program that is not draining
 * (`pending`: graceful termination, weight 0); undefined when they agree.
 */
export function realServerDrift(want: DesiredVirtualServer, dests: readonly DestEntry[], pending: PendingList): string | undefined {
  let present = 0;
  for (const dest of dests) {
    const key = realServerKey(dest);
    const rs = want.reals.get(key);
    if (!rs) {
      if (pending.has(pendingKey(want.vs, dest))) continue;
      return `real server ${key} of ${want.key} is in the kernel, and drover did not program it`;
    }
    present++;
    if (!sameDest(rs, dest)) return `real server ${key} of ${want.key} has another weight, forwarding or thresholds than drover programmed`;
  }
  const missing = want.reals.size - present;
  return missing > 0 ? `${missing} of ${want.reals.size} real servers of ${want.key} are gone from the kernel` : undefined;
}

/**
 * Why the addresses on kube-ipvs0 differ from the ClusterIPs drover bound
 * (each as /`full`: 32, or 128 for IPv6); undefined when they are the same.
 */
export function addressDrift(bound: ReadonlySet<string>, live: readonly { readonly address: string; readonly prefixLength: number }[], full = 32): string | undefined {
  const liveSet = new Set<string>();
  for (const { address, prefixLength } of live) {
    if (prefixLength !== full || !bound.has(address)) return `address ${address}/${prefixLength} on kube-ipvs0 was not bound by drover`;
    liveSet.add(address);
  }
  for (const address of bound) if (!liveSet.has(address)) return `ClusterIP ${address} is gone from kube-ipvs0`;
  return undefined;
}

/**
 * The window of `items` one check looks at, starting at `cursor` and
 * wrapping around: all of them when there are at most `size`. `next` is
 * the cursor of the following check.
 */
export function checkWindow<T>(items: readonly T[], cursor: number, size: number): { readonly picked: T[]; readonly next: number } {
  if (items.length <= size) return { picked: [...items], next: 0 };
  const start = cursor % items.length;
  const picked = items.slice(start, start + size);
  if (picked.length < size) picked.push(...items.slice(0, size - picked.length));
  return { picked, next: (start + size) % items.length };
}

/** How many virtual servers' real servers one check dumps, of `total`. */
export function realServerChecks(total: number): number {
  return Math.max(MIN_REAL_SERVER_CHECKS, Math.ceil(total / REAL_SERVER_ROUNDS));
}
