/**
 * What `drover bench` needs of a proxy mode. The benchmark loop (run.ts) is
 * the same for every mode; a mode brings its backend, its kernel read-back
 * and its baselines, in modes/<mode>/ (found through modes/registry.ts).
 * IPVS, rtnetlink and nf_tables netlink sockets act on the
 * network namespace of the process, so that harness lives in a worker
 * process started with `ip netns exec <node namespace>` (worker.ts; the
 * clocks still agree: process.hrtime is the machine's monotonic clock in
 * every process).
 */
import type { Backend, ProxyMode, SyncResult } from '../proxier/backend.ts';
import type { Snapshot } from '../model/types.ts';
import type { BenchChange, ServiceChange } from './changes.ts';
import type { BenchSettings, Method } from './types.ts';

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

/**
 * One proxy mode under benchmark, programming one network namespace.
 * `S` is the mode's read-back of the kernel (iptables: the text of
 * `iptables-save -t nat`).
 */
export interface ModeHarness<S = unknown> {
  readonly mode: ProxyMode;
  /** The mode's flavour for reports, e.g. `nft` or `legacy`. */
  readonly variant: string;
  /** The backend drover runs in this mode. */
  readonly backend: Backend;
  /**
   * The mode writes through nf_tables transactions, whose commits the kernel
   * announces to the NFNLGRP_NFTABLES group (nftables mode, iptables-nft):
   * the kernel clock is then the commit notification (kernel-events.ts);
   * otherwise (iptables-legacy, IPVS) a read-back that shows the change.
   */
  readonly kernelNotifications: boolean;
  /**
   * One read-back of the kernel state the mode programs. With `focus`, the
   * mode may read only what that change touches (IPVS: one virtual server);
   * without, everything.
   * @throws what the kernel read throws (CommandError from iptables-save, IpvsRequestError or a netlink error).
   */
  readBack(focus?: ServiceChange): Promise<S>;
  /** True when `state` (a readBack) shows the service port as `change.after` (absent when undefined) and nothing left of `change.before`. */
  shows(state: S, change: ServiceChange): boolean;
  /** True when `state` shows every service port of `snapshot`. */
  showsAll(state: S, snapshot: Snapshot): boolean;
  /** True when a full sync's `result` wrote nothing to the kernel (it already held drover's state). */
  wroteNothing(result: SyncResult): boolean;
  /** Release sockets and timers. */
  close(): void;
  /**
   * Prepare what the baselines need besides drover's state, for starting
   * state `base` (nftables mode: kube-proxy's table at the same scale).
   * Called once after the full sync, off the clock, at the sizes that
   * measure the per-change baselines (up to --detail-max); absent when none.
   * @throws what the kernel transaction throws.
   */
  setUp?(base: Snapshot): Promise<void>;
  /** The minimal change (the physical limit); also used to put a `whole` baseline's change back. */
  readonly raw: Baseline;
  /** Baselines measured on every change, like drover (iptables: the kube-proxy-style partial restore). */
  readonly perChange: readonly Baseline[];
  /** The whole ruleset re-sent, measured a few times per size and only up to a size cap, if the mode has one. */
  readonly whole?: Baseline;
  /**
   * The full sync's baseline, if the mode has one: the starting state's
   * whole ruleset written into empty tables by the mode's own tool (nftables
   * mode: one `nft -f` transaction), measured before drover's full sync and
   * removed again by `clear`.
   */
  readonly fromEmpty?: {
    /** Build the payload for `snapshot` (not timed). */
    prepare(snapshot: Snapshot): PreparedApply;
    /** Remove what `apply` wrote, leaving the tables empty for drover's full sync. @throws what the kernel transaction throws. */
    clear(): Promise<void>;
  };
}

/** A mode's part of `drover bench`, found through the bench's registry (modes/registry.ts). */
export interface ModeBench {
  /**
   * Where the harness runs: `process` in the bench's own process (it
   * reaches the node namespace through `--netns`-style commands), or
   * `namespace` in a worker started inside the node namespace (netlink
   * sockets act on the namespace of the process that opened them).
   */
  readonly placement: 'process' | 'namespace';
  /**
   * The harness of one size. `netns` is the node namespace for
   * `process` placement; undefined inside the worker.
   * @throws Error for an unknown iptables variant; the kernel's errors.
   */
  createHarness(opts: { readonly netns?: string; readonly iptablesVariant: string }): Promise<ModeHarness>;
  /** The harness's per-change baselines besides raw (ModeHarness.perChange), for the progress count; default 1. */
  readonly perChangeBaselines?: number;
  /** Why the mode cannot be measured on this kernel, or undefined when it can. */
  unavailableReason(): Promise<string | undefined>;
  /** The mode's paragraphs of the report's "How it was measured" section (its baselines). */
  methodText(settings: BenchSettings): string[];
}
