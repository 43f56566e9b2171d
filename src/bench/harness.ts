/**
 * What `drover bench` needs of a proxy mode. The benchmark loop (run.ts) is
 * the same for every mode; a mode brings its backend, its kernel read-back
 * and its baselines, and run.ts's createHarness picks it. iptables mode is in
 * iptables-harness.ts.
 *
 * An IPVS harness plugs in the same way: the IPVS backend; a read-back such
 * as `ipvsadm -Sn` or a netlink dump of the virtual servers; `shows`
 * comparing one virtual server's real servers (and the ClusterIP on
 * kube-ipvs0); a raw baseline of the minimal netlink operations for the
 * change (one real server added or deleted, one virtual server with its
 * real servers added or deleted); and, as kube-proxy-style, kube-proxy's
 * IPVS sync (the same operations plus its full iptables-restore). One
 * difference: IPVS and rtnetlink sockets act on the namespace of the
 * process, so that harness must drive its backend from a worker process
 * started with `ip netns exec <node namespace>` (the clocks still agree:
 * process.hrtime is the machine's monotonic clock in every process).
 */
import type { Backend, ProxyMode } from '../backends/types.ts';
import type { Snapshot } from '../model/types.ts';
import type { BenchChange, ServiceChange } from './changes.ts';
import type { Method } from './types.ts';

/** A baseline's change, prepared off the clock. */
export interface PreparedApply {
  /** Size of what `apply` sends to the kernel, bytes. */
  readonly bytes: number;
  /** Send it; resolves when the kernel transaction returned. This is what is timed. */
  apply(): Promise<void>;
}

/** Another way of making the same change, to compare drover with. */
export interface Baseline {
  readonly method: Exclude<Method, 'drover'>;
  /** Prepare `change` (render, build the payload). Not timed. */
  prepare(change: BenchChange): PreparedApply;
}

/** One proxy mode under benchmark, programming one network namespace. */
export interface ModeHarness {
  readonly mode: ProxyMode;
  /** The mode's flavour for reports, e.g. `nft` or `legacy`. */
  readonly variant: string;
  /** The backend drover runs in this mode. */
  readonly backend: Backend;
  /** One read-back of the kernel state the mode programs (iptables: `iptables-save -t nat`). */
  readBack(): Promise<string>;
  /** True when `state` (a readBack) shows the service port as `change.after` (absent when undefined) and nothing left of `change.before`. */
  shows(state: string, change: ServiceChange): boolean;
  /** True when `state` shows every service port of `snapshot`. */
  showsAll(state: string, snapshot: Snapshot): boolean;
  /** The minimal change (the physical limit); also used to put a `whole` baseline's change back. */
  readonly raw: Baseline;
  /** Baselines measured on every change, like drover (iptables: the kube-proxy-style partial restore). */
  readonly perChange: readonly Baseline[];
  /** The whole ruleset re-sent, measured a few times per size and only up to a size cap, if the mode has one. */
  readonly whole?: Baseline;
}
