/**
 * The data of `drover bench`: samples, per-size run facts, the environment,
 * and the whole result the reports are built from. Types only.
 */
import type { ProxyMode } from '../proxier/backend.ts';

/** Clock services (real endpoints) in every size. */
export const CLOCK_SERVICES = 4;

/** What was changed: the first full sync from empty tables, or one single change. */
export type ChangeKind = 'full-sync' | 'endpoint-removed' | 'endpoint-added' | 'service-added' | 'service-removed';

/** The single changes, in the order a benchmark iteration makes them. */
export const CHANGE_KINDS = ['endpoint-removed', 'endpoint-added', 'service-added', 'service-removed'] as const;

/** One of the single changes. */
export type SingleChange = (typeof CHANGE_KINDS)[number];

/**
 * Who applied the change:
 * - `drover`: drover's backend (Backend.sync, the partial path for single changes);
 * - `raw`: a hand-built minimal payload for the same change (the physical limit);
 * - `kube-proxy`: a kube-proxy-style partial restore (the static chains and the
 *   whole KUBE-SERVICES chain rewritten, plus the changed chains);
 * - `minimal-script`: the raw change as a script of the mode's own tool
 *   (nftables mode: `nft -f`), where raw goes to the kernel directly;
 * - `full-rerender`: the whole ruleset re-sent, every chain declared.
 */
export type Method = 'drover' | 'raw' | 'minimal-script' | 'kube-proxy' | 'full-rerender';

/** Every method, in report order. */
export const METHODS: readonly Method[] = ['drover', 'raw', 'minimal-script', 'kube-proxy', 'full-rerender'];

/**
 * The clock a sample was taken on, each from the moment the change is seen:
 * - `agent`: until the kernel transaction returned (for a baseline: the
 *   transaction alone, from spawning iptables-restore to its exit);
 * - `kernel`: until a read-back of the kernel shows the change;
 * - `datapath`: until a new connection from the client namespace shows it;
 * - `end-to-end`: from the change written to a manifest file that a real
 *   `drover run` process watches, until a read-back of the kernel shows it
 *   (end-to-end.ts).
 */
export type Clock = 'agent' | 'end-to-end' | 'kernel' | 'datapath';

/** Every clock, in report order. */
export const CLOCKS: readonly Clock[] = ['agent', 'end-to-end', 'kernel', 'datapath'];

/**
 * How a kernel clock sample was taken:
 * - `notification`: the nf_tables commit notification (NFT_MSG_NEWGEN on
 *   the NFNLGRP_NFTABLES group) of the transaction that ended the change,
 *   stamped by a listener in the node namespace (kernel-events.ts);
 * - `read-back`: the first read-back of the kernel that shows the change
 *   (iptables-save, nft list, IPVS dumps), for the modes whose kernel
 *   announces nothing (iptables-legacy, IPVS).
 */
export type KernelMethod = 'notification' | 'read-back';

/** One measurement. Times in milliseconds. */
export interface Sample {
  readonly mode: ProxyMode;
  /** The mode's flavour: `nft` or `legacy` for iptables. */
  readonly variant: string;
  /** Service ports in the kernel when the change was made. */
  readonly services: number;
  /** Endpoints per synthetic service port. */
  readonly endpoints: number;
  readonly kind: ChangeKind;
  readonly method: Method;
  readonly clock: Clock;
  /** 0-based iteration (the n-th change of this kind). */
  readonly iteration: number;
  /** The measured time, ms. */
  readonly ms: number;
  /** kernel: read-backs made; datapath: connections made (both until the change showed). */
  readonly tries?: number;
  /** kernel: how long the read-back that showed the change took, ms. */
  readonly readbackMs?: number;
  /** kernel: how the sample was taken (absent in reports from before the notification clock: read-back). */
  readonly kernelMethod?: KernelMethod;
  /** agent: bytes of kernel transaction payload written. */
  readonly bytes?: number;
  /** end-to-end: VmRSS of the drover run process once the kernel showed the change, kB. */
  readonly rssKb?: number;
}

/** Facts about one mode and size of a run. */
export interface SizeRun {
  readonly mode: ProxyMode;
  readonly variant: string;
  readonly services: number;
  readonly endpoints: number;
  /** Changes of each kind made by drover and by each per-change baseline. */
  readonly changes: number;
  /** Kernel transactions of the full sync from empty tables. */
  readonly fullSyncTransactions: number;
  /** Why the full re-render baseline was not measured at this size, if it was not. */
  readonly fullRerenderSkipped?: string;
  /** Why the kernel clock and the kube-proxy-style baseline were not measured at this size, if they were not. */
  readonly detailSkipped?: string;
  /**
   * After all changes and baselines, a full sync of the starting state wrote
   * nothing: the kernel held exactly drover's rules (a check that the
   * baselines put every change back).
   */
  readonly consistent: boolean;
  /**
   * drover's agent clock of that final full sync, ms: when it wrote nothing
   * (`consistent`), the cost of a full resync that finds the kernel in order,
   * as a restart or a `--sync-period` resync does (read back, diff, nothing
   * to write). Absent in reports from before it was measured.
   */
  readonly resyncMs?: number;
  /** How this size's kernel clock was taken; absent when it was not measured. */
  readonly kernelClock?: KernelMethod;
  /** Changes whose kernel clock is missing and why (e.g. notifications dropped by an overflowing socket). */
  readonly kernelLost?: readonly string[];
  /** Peak resident set size of the benchmark process (which runs drover's agent in-process) after this size, kB. */
  readonly peakRssKb: number;
  /** The `drover run` process of the end-to-end clock at this size; absent in reports from before it was measured. */
  readonly droverRun?: DroverRunFacts;
  /** Why the `drover run` of this size gave no facts, when it failed above `--detail-max` (the run goes on without them). */
  readonly droverRunFailed?: string;
}

/** Facts about the real `drover run` process that the end-to-end clock watches (one per mode and size). */
export interface DroverRunFacts {
  /** The build it ran: `dist` (compiled, as on a node) or `src` (the TypeScript sources through tsx, slower to start and larger). */
  readonly entry: 'dist' | 'src';
  /** From spawning the process until it logged its first sync done, ms (start-up, reading the manifests, the full sync). */
  readonly firstSyncMs: number;
  /** VmRSS of the process (/proc/PID/status) once it has collected its first sync's garbage (drover-process.ts STEADY_AFTER_MS after that sync was logged), kB. */
  readonly rssKb: number;
  /** VmHWM of the process (its peak RSS) after every change of the end-to-end clock, kB. */
  readonly peakRssKb: number;
}

/** Where the benchmark ran. */
export interface BenchEnvironment {
  /** Start of the run, ISO 8601 (UTC). */
  readonly date: string;
  /** True inside an emulated guest, whose absolute times mean little: report ratios only. */
  readonly guest: boolean;
  /** Why the run counts as a guest run (or "none detected"). */
  readonly guestReason: string;
  /** `uname -r`. */
  readonly kernel: string;
  /** Version line of each iptables variant used, e.g. `{ nft: "iptables v1.8.9 (nf_tables)" }`. */
  readonly iptables: Readonly<Record<string, string>>;
  readonly cpus: number;
  readonly cpuModel: string;
  /** 1-minute load average at the start of the run. */
  readonly loadAverage: number;
  /** Node.js version. */
  readonly node: string;
  /** drover's version. */
  readonly drover: string;
}

/** The options a run was made with (also written to the report). */
export interface BenchSettings {
  readonly modes: readonly ProxyMode[];
  /** Sizes, number of service ports, ascending. */
  readonly services: readonly number[];
  readonly endpoints: number;
  readonly changes: number;
  /** iptables variant: nft or legacy. */
  readonly iptablesVariant: string;
  /** Largest size at which the full re-render baseline is measured. */
  readonly fullBaselineMax: number;
  /** Full re-render samples per size. */
  readonly fullBaselineRepeats: number;
  /**
   * Largest size at which the kernel clock and the per-change baselines
   * other than raw (kube-proxy-style) are measured; above it only drover's
   * agent and data-path clocks and the raw baseline are (for runs where
   * whole read-backs are too slow, such as an emulated guest at 10,000).
   */
  readonly detailMax: number;
  /** Consecutive connections on the surviving endpoint that count as "removed endpoint no longer reached". */
  readonly removalConfirm: number;
  /** Consecutive failed connections that count as "service gone". */
  readonly failConfirm: number;
  /** Clock services (real endpoints) among the services of each size. */
  readonly clockServices: number;
}

/** Everything a run produced. */
export interface BenchResult {
  readonly environment: BenchEnvironment;
  readonly settings: BenchSettings;
  readonly runs: readonly SizeRun[];
  readonly samples: readonly Sample[];
}
