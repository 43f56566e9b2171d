/**
 * The benchmark loop of `drover bench`, the same for every proxy mode.
 *
 * For each mode and size, in a fresh testbed (node namespace, one client
 * namespace, two backend namespaces with echo servers on four ports each):
 *
 * 1. Full sync of the starting state from empty tables, timed on the three clocks.
 * 2. `changes` iterations of four single changes (changes.ts): endpoint
 *    removed, endpoint added, service added, service removed. Each change is
 *    made by drover through Backend.sync's partial path and timed on the
 *    three clocks, then by each baseline (raw, kube-proxy-style), timed as a
 *    kernel transaction. The methods take turns within an iteration, so
 *    that a slow phase of a busy machine hits them alike.
 * 3. The full re-render baseline, `fullBaselineRepeats` times on a "service
 *    added" change, only up to `fullBaselineMax` services; each is put back
 *    with the raw payload.
 * 4. A full sync of the starting state, which must write nothing (the
 *    baselines put everything back); its agent time is reported as the
 *    cost of a resync with nothing to write (SizeRun.resyncMs).
 * 5. The end-to-end clock (end-to-end.ts): a real `drover run` process in
 *    the node namespace, watching the starting state as manifest files,
 *    adopts the kernel; the same `changes` iterations are written to its
 *    files and timed until a read-back shows each; its RSS is read from
 *    /proc (SizeRun.droverRun). Above `detailMax`, where whole read-backs
 *    are too slow, only its first sync and RSS are measured.
 *
 * Clocks, all from the moment the change is seen (process.hrtime, the
 * machine's monotonic clock, which the prober in the client namespace
 * shares):
 * - agent: until Backend.sync returned (the snapshot diff, rendering and
 *   the kernel transaction);
 * - kernel: read-backs run back to back from when the agent returned; the
 *   time is when the first read-back that shows the change was parsed;
 * - data path: connections run back to back from when the agent returned
 *   (prober.mjs); the time is when the first qualifying connection was
 *   opened. Kernel and data-path polling run at the same time.
 * Both start once the agent returned: the transaction has committed by then,
 * so nothing is lost, and the polling does not slow the agent down.
 */
import type { ProxyMode } from '../proxier/backend.ts';
import { createTopology, type BackendSpec, type Topology } from '../testbed/topology.ts';
import { Prober, type ProbeTiming } from './datapath.ts';
import type { ModeHarness } from './harness.ts';
import { modeBench } from './modes/registry.ts';
import { CLOCK_SERVICES, measureSize, type MeasureOptions, type StepReporter, type TestbedView } from './measure.ts';
import { BENCH_CLUSTER_CIDR } from './synth.ts';
import type { BenchEnvironment, BenchResult, BenchSettings, Sample, SizeRun } from './types.ts';
import { runSizeInWorker } from './worker-client.ts';

export { CLOCK_SERVICES } from './measure.ts';

const BACKENDS: BackendSpec[] = [
  { name: 'b1', ip: '10.244.1.2', ports: [8080, 8081, 8082, 8083] },
  { name: 'b2', ip: '10.244.2.2', ports: [8080, 8081, 8082, 8083] },
];

/** Options of {@link runBench}; times in milliseconds. */
export interface BenchOptions extends Omit<BenchSettings, 'clockServices'> {
  /** Data-path check timing. */
  readonly timing: ProbeTiming;
  /** Give up waiting for a read-back to show a change after this long. */
  readonly kernelDeadlineMs: number;
  /** Progress and phase reports. */
  readonly onProgress?: (event: ProgressEvent) => void;
  /**
   * Called after each size of each mode, with the result of every size
   * finished so far (the settings as asked for, the runs and samples of the
   * finished sizes only), and awaited before the next size starts: a caller
   * writes it out, so that a failure at a later size loses only that size.
   */
  readonly onSizeDone?: (partial: BenchResult) => Promise<void>;
}

/** A step of the run done, or a phase finished. */
export interface ProgressEvent {
  /** Steps done (a step is one change by one method, or a sync). */
  readonly done: number;
  /** Steps planned. */
  readonly total: number;
  /** What runs now, e.g. "iptables/nft 1000 services: changes 3/50". */
  readonly phase: string;
  /** A line worth keeping in a log (a phase's result), if any. */
  readonly note?: string;
}

/**
 * Steps of one size with `perChange` per-change baselines and a `whole`
 * baseline measured `wholeRepeats` times: the full sync, each change by
 * drover, raw and the per-change baselines, the full re-renders, the final
 * check, each change on the end-to-end clock (when `endToEnd`), and the end
 * of the size.
 */
export function stepsPerSize(changes: number, perChange: number, wholeRepeats: number, endToEnd: boolean): number {
  return 1 + changes * 4 * (2 + perChange) + wholeRepeats + 1 + (endToEnd ? changes * 4 : 0) + 1;
}

/**
 * Run the benchmark; see the module comment. Needs root. Every namespace it
 * creates is deleted at the end, on failure, and on SIGINT/SIGTERM.
 */
export async function runBench(opts: BenchOptions, environment: BenchEnvironment): Promise<BenchResult> {
  const sizes = [...opts.services].sort((a, b) => a - b);
  const wholeRepeats = (n: number): number => (n <= opts.fullBaselineMax ? Math.min(opts.fullBaselineRepeats, 1_000) : 0);
  const perMode = (mode: ProxyMode): number => {
    const perChange = modeBench(mode).perChangeBaselines ?? 1;
    return sizes.reduce((sum, n) => sum + stepsPerSize(opts.changes, n <= opts.detailMax ? perChange : 0, wholeRepeats(n), n <= opts.detailMax), 0);
  };
  const total = opts.modes.reduce((sum, mode) => sum + perMode(mode), 0);
  let done = 0;
  const progress = (phase: string, step: boolean, note?: string): void => {
    if (step) done++;
    opts.onProgress?.({ done, total, phase, ...(note ? { note } : {}) });
  };
  return runSizes(opts, environment, (mode, n, samples) => runSize(mode, n, opts, wholeRepeats(n), samples, progress));
}

/**
 * Measure each size of each mode in turn with `runOne` (modes in the order
 * given, sizes ascending), which appends its samples to the array it is
 * given; after each, hand everything finished so far to
 * `opts.onSizeDone`. A failing size rejects at once, with what the
 * earlier sizes measured already handed over.
 */
export async function runSizes(
  opts: Omit<BenchOptions, 'timing' | 'kernelDeadlineMs' | 'onProgress'>,
  environment: BenchEnvironment,
  runOne: (mode: ProxyMode, n: number, samples: Sample[]) => Promise<SizeRun>,
): Promise<BenchResult> {
  const sizes = [...opts.services].sort((a, b) => a - b);
  const samples: Sample[] = [];
  const runs: SizeRun[] = [];
  const result = (): BenchResult => benchResult(opts, environment, sizes, runs, samples);
  for (const mode of opts.modes) {
    for (const n of sizes) {
      runs.push(await runOne(mode, n, samples));
      await opts.onSizeDone?.(result());
    }
  }
  return result();
}

/** The result of the sizes finished so far: copies of `runs` and `samples`, with the settings of `opts`. */
function benchResult(opts: Omit<BenchOptions, 'timing' | 'kernelDeadlineMs'>, environment: BenchEnvironment, sizes: number[], runs: readonly SizeRun[], samples: readonly Sample[]): BenchResult {
  return {
    environment,
    settings: {
      modes: opts.modes,
      services: sizes,
      endpoints: opts.endpoints,
      changes: opts.changes,
      iptablesVariant: opts.iptablesVariant,
      fullBaselineMax: opts.fullBaselineMax,
      fullBaselineRepeats: opts.fullBaselineRepeats,
      detailMax: opts.detailMax,
      removalConfirm: opts.removalConfirm,
      failConfirm: opts.failConfirm,
      clockServices: CLOCK_SERVICES,
    },
    runs: [...runs],
    samples: [...samples],
  };
}

async function runSize(
  mode: ProxyMode,
  n: number,
  opts: BenchOptions,
  wholeRepeats: number,
  samples: Sample[],
  progress: StepReporter,
): Promise<SizeRun> {
  progress(`${mode} ${n} services: building the testbed`, false);
  // Echo servers start slowly on a busy machine or in an emulated guest.
  const topo: Topology = await createTopology({ backends: BACKENDS, readyTimeoutMs: 120_000 });
  try {
    // The service-removed check counts refused/unreachable connections: let
    // the node namespace send every ICMP error (it rate-limits them by default).
    await topo.exec(topo.node, 'sysctl', ['-q', '-w', 'net.ipv4.icmp_ratelimit=0']);
    const view: TestbedView = { node: topo.node, client: topo.client().netns, backends: topo.backends.map((b) => ({ name: b.name, ip: b.ip })) };
    const measure: MeasureOptions = {
      endpoints: opts.endpoints,
      changes: opts.changes,
      removalConfirm: opts.removalConfirm,
      failConfirm: opts.failConfirm,
      timing: opts.timing,
      kernelDeadlineMs: opts.kernelDeadlineMs,
      detailMax: opts.detailMax,
      iptablesVariant: opts.iptablesVariant,
    };
    const bench = modeBench(mode);
    if (bench.placement === 'namespace') {
      // The mode's sockets act on the namespace of their process: measure in a worker inside the node namespace.
      return await runSizeInWorker({ mode, view, n, measure, wholeRepeats, fullBaselineMax: opts.fullBaselineMax, iptablesVariant: opts.iptablesVariant }, samples, progress);
    }
    const h = await bench.createHarness({ netns: topo.node, iptablesVariant: opts.iptablesVariant });
    const prober = await Prober.start(view.client);
    try {
      return await measureSize(h, prober, view, n, measure, wholeRepeats, opts.fullBaselineMax, (x) => samples.push(x), progress);
    } finally {
      h.close();
      await prober.close();
    }
  } finally {
    await topo.destroy();
  }
}
