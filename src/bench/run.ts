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
 *    baselines put everything back).
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
import type { ProxyMode } from '../backends/types.ts';
import { changedServicePorts } from '../proxier/changes.ts';
import { createTopology, type BackendSpec, type Topology } from '../testbed/topology.ts';
import { iterationChanges, type BenchChange, type ClockService } from './changes.ts';
import { Prober, type ProbeTiming } from './datapath.ts';
import type { ModeHarness } from './harness.ts';
import { iptablesHarness } from './iptables-harness.ts';
import { BENCH_CLUSTER_CIDR, benchSnapshot, clockServicePort, type RealEndpoint } from './synth.ts';
import type { BenchEnvironment, BenchResult, BenchSettings, ChangeKind, Clock, Method, Sample, SizeRun } from './types.ts';

/** Clock services (real endpoints) in every size. */
export const CLOCK_SERVICES = 4;

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

/** Steps of one size with `perChange` per-change baselines and a `whole` baseline measured `wholeRepeats` times. */
export function stepsPerSize(changes: number, perChange: number, wholeRepeats: number): number {
  return 1 + changes * 4 * (2 + perChange) + wholeRepeats + 1;
}

/**
 * The harness of `mode` programming `netns`.
 * @throws Error for a mode that has no harness yet (IPVS).
 */
export function createHarness(mode: ProxyMode, netns: string, opts: Pick<BenchOptions, 'iptablesVariant'>): ModeHarness {
  if (mode === 'iptables') {
    const variant = opts.iptablesVariant;
    if (variant !== 'nft' && variant !== 'legacy') throw new Error(`unknown iptables variant ${variant}`);
    return iptablesHarness({ netns, variant, render: { clusterCIDR: BENCH_CLUSTER_CIDR, masqueradeAll: false } });
  }
  throw new Error(`${mode} mode cannot be benchmarked yet: it has no backend`);
}

const nowNs = (): bigint => process.hrtime.bigint();
const msSince = (t0: bigint, t: bigint = nowNs()): number => Number(t - t0) / 1e6;
const round3 = (ms: number): number => Math.round(ms * 1000) / 1000;

/**
 * Run the benchmark; see the module comment. Needs root. Every namespace it
 * creates is deleted at the end, on failure, and on SIGINT/SIGTERM.
 */
export async function runBench(opts: BenchOptions, environment: BenchEnvironment): Promise<BenchResult> {
  const sizes = [...opts.services].sort((a, b) => a - b);
  const samples: Sample[] = [];
  const runs: SizeRun[] = [];
  const wholeRepeats = (n: number): number => (n <= opts.fullBaselineMax ? Math.min(opts.fullBaselineRepeats, 1_000) : 0);
  const total = opts.modes.length * sizes.reduce((sum, n) => sum + stepsPerSize(opts.changes, 1, wholeRepeats(n)), 0);
  let done = 0;
  const progress = (phase: string, step: boolean, note?: string): void => {
    if (step) done++;
    opts.onProgress?.({ done, total, phase, ...(note ? { note } : {}) });
  };
  for (const mode of opts.modes) {
    for (const n of sizes) {
      runs.push(await runSize(mode, n, opts, wholeRepeats(n), samples, progress));
    }
  }
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
      removalConfirm: opts.removalConfirm,
      failConfirm: opts.failConfirm,
      clockServices: CLOCK_SERVICES,
    },
    runs,
    samples,
  };
}

async function runSize(
  mode: ProxyMode,
  n: number,
  opts: BenchOptions,
  wholeRepeats: number,
  samples: Sample[],
  progress: (phase: string, step: boolean, note?: string) => void,
): Promise<SizeRun> {
  progress(`${mode} ${n} services: building the testbed`, false);
  const topo: Topology = await createTopology({ backends: BACKENDS });
  try {
    // The service-removed check counts refused/unreachable connections: let
    // the node namespace send every ICMP error (it rate-limits them by default).
    await topo.exec(topo.node, 'sysctl', ['-q', '-w', 'net.ipv4.icmp_ratelimit=0']);
    const h = createHarness(mode, topo.node, opts);
    const label = `${h.mode}/${h.variant} ${n} services`;
    const prober = await Prober.start(topo.client().netns);
    try {
      return await measureSize(h, prober, topo, n, opts, wholeRepeats, samples, label, progress);
    } finally {
      await prober.close();
    }
  } finally {
    await topo.destroy();
  }
}

async function measureSize(
  h: ModeHarness,
  prober: Prober,
  topo: Topology,
  n: number,
  opts: BenchOptions,
  wholeRepeats: number,
  samples: Sample[],
  label: string,
  progress: (phase: string, step: boolean, note?: string) => void,
): Promise<SizeRun> {
  const real = (backend: string, port: number): RealEndpoint => ({ backend, ip: topo.backend(backend).ip, port });
  const clocks: ClockService[] = Array.from({ length: CLOCK_SERVICES }, (_, c) => {
    const keep = real('b1', 8080 + c);
    const toggle = real('b2', 8080 + c);
    return { port: clockServicePort(c, [keep, toggle]), keep, toggle };
  });
  const addedEndpoints = [real('b1', 8080), real('b2', 8080)];
  const counts = { removalConfirm: opts.removalConfirm, failConfirm: opts.failConfirm };
  const base = benchSnapshot(n, opts.endpoints, clocks.map((c) => c.port));
  const push = (kind: ChangeKind, method: Method, clock: Clock, iteration: number, ms: number, extra: Partial<Sample> = {}): void => {
    samples.push({ mode: h.mode, variant: h.variant, services: n, endpoints: opts.endpoints, kind, method, clock, iteration, ms: round3(ms), ...extra });
  };

  /** Poll the kernel from now on until `shows`; times from t0. */
  const kernelClock = async (t0: bigint, shows: (state: string) => boolean): Promise<{ ms: number; tries: number; readbackMs: number }> => {
    for (let tries = 1; ; tries++) {
      const start = nowNs();
      const state = await h.readBack();
      const readbackMs = msSince(start);
      if (shows(state)) return { ms: msSince(t0), tries, readbackMs: round3(readbackMs) };
      if (msSince(t0) > opts.kernelDeadlineMs) throw new Error(`${label}: the kernel did not show the change within ${opts.kernelDeadlineMs} ms`);
    }
  };

  // 1. Full sync from empty tables.
  progress(`${label}: full sync`, false);
  const t0 = nowNs();
  const full = await h.backend.sync(base, { full: true, changed: new Set() });
  const agentMs = msSince(t0);
  // The prober's command goes out first: spawning the read-back blocks this process for a moment.
  const [dFull, kFull] = await Promise.all([
    prober.until({ until: 'answers', host: clocks[0]!.port.clusterIP, port: clocks[0]!.port.port }, opts.timing),
    kernelClock(t0, (s) => h.showsAll(s, base)),
  ]);
  push('full-sync', 'drover', 'agent', 0, agentMs, { bytes: full.bytes });
  push('full-sync', 'drover', 'kernel', 0, kFull.ms, { tries: kFull.tries, readbackMs: kFull.readbackMs });
  push('full-sync', 'drover', 'datapath', 0, msSince(t0, dFull.atNs), { tries: dFull.tries });
  progress(`${label}: full sync`, true, `${label}: full sync ${agentMs.toFixed(0)} ms (${full.transactions} transaction(s))`);

  // 2. Single changes.
  const drover = async (c: BenchChange, i: number): Promise<void> => {
    const start = nowNs();
    const changed = changedServicePorts(c.from, c.to);
    const r = await h.backend.sync(c.to, { full: false, changed });
    const agent = msSince(start);
    if (r.full) throw new Error(`${label}: ${c.kind} made a full sync instead of a partial one`);
    const [d, k] = await Promise.all([prober.until(c.check, opts.timing), kernelClock(start, (s) => h.shows(s, c))]);
    push(c.kind, 'drover', 'agent', i, agent, { bytes: r.bytes });
    push(c.kind, 'drover', 'kernel', i, k.ms, { tries: k.tries, readbackMs: k.readbackMs });
    push(c.kind, 'drover', 'datapath', i, msSince(start, d.atNs), { tries: d.tries });
  };
  const baselines = [h.raw, ...h.perChange];
  for (let i = 0; i < opts.changes; i++) {
    const phase = `${label}: changes ${i + 1}/${opts.changes}`;
    const changes = iterationChanges(base, clocks, i, addedEndpoints, counts);
    // Pairs that put the state back: (endpoint removed, added), (service added, removed).
    for (const pair of [changes.slice(0, 2), changes.slice(2, 4)]) {
      for (const c of pair) {
        await drover(c, i);
        progress(phase, true);
      }
      for (const b of baselines) {
        for (const c of pair) {
          const prepared = b.prepare(c);
          const start = nowNs();
          await prepared.apply();
          push(c.kind, b.method, 'agent', i, msSince(start), { bytes: prepared.bytes });
          progress(phase, true);
        }
      }
    }
  }

  // 3. The whole ruleset re-sent, capped.
  let fullRerenderSkipped: string | undefined;
  if (!h.whole) fullRerenderSkipped = `${h.mode} mode has no full re-render baseline`;
  else if (wholeRepeats === 0) fullRerenderSkipped = `not measured above ${opts.fullBaselineMax} services (--full-baseline-max)`;
  for (let r = 0; h.whole && r < wholeRepeats; r++) {
    progress(`${label}: full re-render ${r + 1}/${wholeRepeats}`, false);
    const [, , add, remove] = iterationChanges(base, clocks, opts.changes + r, addedEndpoints, counts);
    const prepared = h.whole.prepare(add!);
    const start = nowNs();
    await prepared.apply();
    const ms = msSince(start);
    push('service-added', 'full-rerender', 'agent', r, ms, { bytes: prepared.bytes });
    await h.raw.prepare(remove!).apply();
    progress(`${label}: full re-render ${r + 1}/${wholeRepeats}`, true, `${label}: full re-render ${ms.toFixed(0)} ms`);
  }

  // 4. The kernel must hold exactly drover's rules again.
  progress(`${label}: checking the kernel`, false);
  const check = await h.backend.sync(base, { full: true, changed: new Set() });
  const consistent = check.chainsWritten + check.chainsDeleted + check.rulesWritten + check.rulesDeleted === 0;
  progress(`${label}: done`, true, `${label}: done${consistent ? '' : '; the final full sync had to repair the kernel'}`);
  return {
    mode: h.mode,
    variant: h.variant,
    services: n,
    endpoints: opts.endpoints,
    changes: opts.changes,
    fullSyncTransactions: full.transactions,
    ...(fullRerenderSkipped ? { fullRerenderSkipped } : {}),
    consistent,
    peakRssKb: process.resourceUsage().maxRSS,
  };
}
