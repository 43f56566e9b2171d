/**
 * How an IPVS virtual server picks a real server for a new connection, as
 * far as it can be told from the kernel's read-back, for `drover trace` in
 * IPVS mode. Pure.
 *
 * From the kernel's schedulers (net/netfilter/ipvs/ip_vs_rr.c, ip_vs_wrr.c):
 * - a real server with weight 0 is quiesced and gets no new connection;
 * - `rr` takes the others in turn, so over many connections each gets the
 *   same share;
 * - `wrr` gives each a share proportional to its weight.
 * Every other scheduler decides by state the read-back does not fully show
 * (connection counts at the instant of the connection, a hash of the
 * addresses, thresholds with hysteresis), so it is reported as not
 * evaluated, with its candidates, rather than guessed. A real server with a
 * connection threshold (`-x`/`-y`) can be overloaded, which the read-back
 * does not show either.
 */
import type { DestEntry, ServiceEntry } from '../../kernel/ipvs/codec.ts';
import { joinHostPort } from '../../model/addr.ts';

/** One real server a new connection can go to, with its probability (0-1). */
export interface ScheduledBranch {
  readonly dest: DestEntry;
  readonly probability: number;
}

/** The result of {@link ipvsSchedule}. */
export type IpvsSchedule =
  /** The candidates and their probabilities (they add up to 1). */
  | { readonly kind: 'split'; readonly branches: readonly ScheduledBranch[] }
  /** No real server takes new connections: IPVS refuses the connection (ICMP port unreachable). */
  | { readonly kind: 'refused'; readonly reason: string }
  /** The choice cannot be evaluated from the read-back; `reason` names the scheduler and the candidates. */
  | { readonly kind: 'unknown'; readonly reason: string };

/** What each scheduler that is not evaluated decides by (ipvsadm(8)). */
const DECIDES_BY: Readonly<Record<string, string>> = {
  lc: 'the connection counts at the time of the connection',
  wlc: 'the connection counts at the time of the connection',
  sed: 'the connection counts at the time of the connection',
  nq: 'the connection counts at the time of the connection',
  lblc: 'the destination address and the connection counts',
  lblcr: 'the destination address and the connection counts',
  dh: 'a hash of the destination address',
  sh: 'a hash of the source address',
  mh: 'a hash of the source address',
  fo: 'the highest weight among servers that are not overloaded',
  ovf: 'the connection counts against the weights',
  twos: 'two random picks compared by connection counts',
};

/** "10.244.1.2:8080 (weight 1)" ("[fd00:244:1::2]:8080 (weight 1)" for IPv6), comma-separated. */
function candidates(dests: readonly DestEntry[]): string {
  return dests.map((d) => `${joinHostPort(d.address, d.port)} (weight ${d.weight})`).join(', ');
}

/**
 * The real servers a new connection to `service` can reach and their
 * probabilities, assuming no persistence template and no existing
 * connection for it: a `split` for rr and wrr, `refused` when no real server
 * has a weight above 0, `unknown` otherwise (see the module comment).
 * `dests` are in the kernel's order; the branches keep it.
 */
export function ipvsSchedule(service: Pick<ServiceEntry, 'scheduler'>, dests: readonly DestEntry[]): IpvsSchedule {
  const live = dests.filter((d) => d.weight > 0);
  if (live.length === 0) {
    const why = dests.length === 0 ? 'it has no real server' : `all ${dests.length} of its real servers have weight 0 (quiesced)`;
    return { kind: 'refused', reason: `${why}: IPVS refuses the connection (ICMP port unreachable)` };
  }
  const thresholds = live.filter((d) => d.upperThreshold > 0);
  if (thresholds.length > 0) {
    return {
      kind: 'unknown',
      reason: `real server ${candidates(thresholds)} has a connection threshold (overload is not in the read-back); candidates: ${candidates(live)}`,
    };
  }
  if (service.scheduler === 'rr') return { kind: 'split', branches: live.map((dest) => ({ dest, probability: 1 / live.length })) };
  if (service.scheduler === 'wrr') {
    const total = live.reduce((sum, d) => sum + d.weight, 0);
    return { kind: 'split', branches: live.map((dest) => ({ dest, probability: dest.weight / total })) };
  }
  const by = DECIDES_BY[service.scheduler] ?? 'rules drover does not know';
  return { kind: 'unknown', reason: `scheduler ${service.scheduler} picks by ${by}; candidates: ${candidates(live)}` };
}
