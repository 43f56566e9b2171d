/**
 * One mode and size of `drover bench`: the full sync, the single changes by
 * drover and by each baseline, the capped full re-render, and the final
 * consistency check, then the end-to-end clock through a real `drover run`
 * (end-to-end.ts; see run.ts for the whole procedure and the clocks).
 * Runs where the harness's sockets act on the node namespace: in the bench
 * process for iptables mode, in a worker inside the node namespace for IPVS
 * mode (worker.ts).
 */
import { changedServicePorts } from '../proxier/changes.ts';
import { iterationChanges, type BenchChange, type ClockService, type ServiceChange } from './changes.ts';
import type { Prober, ProbeTiming } from './datapath.ts';
import type { ModeHarness } from './harness.ts';
import { measureEndToEnd } from './end-to-end.ts';
import { benchSnapshot, clockServicePort, type RealEndpoint } from './synth.ts';
import { KernelEvents } from './kernel-events.ts';
import type { BenchSettings, ChangeKind, Clock, DroverRunFacts, KernelMethod, Method, Sample, SizeRun } from './types.ts';
import { msSince, nowNs, round3 } from './timing.ts';
import { CLOCK_SERVICES } from './types.ts';

export { CLOCK_SERVICES };

/** The namespaces of a testbed that measuring needs, by name (serialisable for a worker). */
export interface TestbedView {
  /** The node namespace drover programs. */
  readonly node: string;
  /** The client namespace the data-path prober runs in. */
  readonly client: string;
  /** Backend namespaces: name and address (`b1`, `b2`, each serving ports 8080-8083). */
  readonly backends: readonly { readonly name: string; readonly ip: string }[];
}

/** What measuring one size needs besides the harness; serialisable (times in ms). */
export interface MeasureOptions extends Pick<BenchSettings, 'endpoints' | 'changes' | 'removalConfirm' | 'failConfirm'> {
  /** Data-path check timing. */
  readonly timing: ProbeTiming;
  /** Give up waiting for a read-back to show a change after this long. */
  readonly kernelDeadlineMs: number;
  /** Largest size with the kernel clock and the per-change baselines besides raw (BenchSettings.detailMax). */
  readonly detailMax: number;
  /** iptables variant of the `drover run` of the end-to-end clock (`--iptables-backend`). */
  readonly iptablesVariant: string;
}

/** Reports a step done (`step`) or a phase started, with an optional line worth keeping. */
export type StepReporter = (phase: string, step: boolean, note?: string) => void;

/**
 * Measure `n` service ports with harness `h` on testbed `view`; each sample
 * goes to `record` as it is taken.
 * @param wholeRepeats full re-render samples (0: skipped at this size).
 * @throws Error when a change is not seen within the deadlines, or drover
 *   made a full sync where a partial one was due.
 */
export async function measureSize<S>(
  h: ModeHarness<S>,
  prober: Prober,
  view: TestbedView,
  n: number,
  opts: MeasureOptions,
  wholeRepeats: number,
  fullBaselineMax: number,
  record: (sample: Sample) => void,
  progress: StepReporter,
): Promise<SizeRun> {
  const label = `${h.mode}/${h.variant} ${n} services`;
  const detailed = n <= opts.detailMax;
  const ip = (name: string): string => {
    const b = view.backends.find((x) => x.name === name);
    if (!b) throw new Error(`testbed has no backend ${name}`);
    return b.ip;
  };
  const real = (backend: string, port: number): RealEndpoint => ({ backend, ip: ip(backend), port });
  const clocks: ClockService[] = Array.from({ length: CLOCK_SERVICES }, (_, c) => {
    const keep = real('b1', 8080 + c);
    const toggle = real('b2', 8080 + c);
    return { port: clockServicePort(c, [keep, toggle]), keep, toggle };
  });
  const addedEndpoints = [real('b1', 8080), real('b2', 8080)];
  const counts = { removalConfirm: opts.removalConfirm, failConfirm: opts.failConfirm };
  const base = benchSnapshot(n, opts.endpoints, clocks.map((c) => c.port));
  const push = (kind: ChangeKind, method: Method, clock: Clock, iteration: number, ms: number, extra: Partial<Sample> = {}): void => {
    record({ mode: h.mode, variant: h.variant, services: n, endpoints: opts.endpoints, kind, method, clock, iteration, ...extra, ms: round3(ms) });
  };

  // The kernel clock: nf_tables commit notifications where the kernel sends them (at every size: they cost no
  // read-back), else read-backs up to --detail-max.
  const events = h.kernelNotifications ? await KernelEvents.start(view.node) : undefined;
  const kernelMethod: KernelMethod | undefined = events ? 'notification' : detailed ? 'read-back' : undefined;
  const kernelLost: string[] = [];
  /**
   * The kernel clock of a change started at t0, called once its writer returned: the commit notification, or
   * read-backs from now on until `shows`. Undefined when not measured, or when the notification was lost (noted).
   */
  const kernelClock = async (what: string, t0: bigint, shows: (state: S) => boolean, focus?: ServiceChange): Promise<Partial<Sample> & { ms: number } | undefined> => {
    if (events) {
      const stamp = await events.commitAfter(t0, opts.kernelDeadlineMs);
      if ('lost' in stamp) {
        kernelLost.push(`${what}: ${stamp.lost}`);
        return undefined;
      }
      return { ms: msSince(t0, stamp.atNs), kernelMethod: 'notification' };
    }
    if (!detailed) return undefined;
    for (let tries = 1; ; tries++) {
      const start = nowNs();
      const state = await h.readBack(focus);
      const readbackMs = msSince(start);
      if (shows(state)) return { ms: msSince(t0), tries, readbackMs: round3(readbackMs), kernelMethod: 'read-back' };
      if (msSince(t0) > opts.kernelDeadlineMs) throw new Error(`${label}: the kernel did not show the change within ${opts.kernelDeadlineMs} ms`);
    }
  };
  let fullTransactions = 0;
  let fullRerenderSkipped: string | undefined;
  try {
    // 1. Full sync from empty tables, after its baseline: the same ruleset written by the mode's own tool.
    if (h.fromEmpty) {
      progress(`${label}: full sync baseline`, false);
      const prepared = h.fromEmpty.prepare(base);
      const start = nowNs();
      await prepared.apply();
      const ms = msSince(start);
      const k = await kernelClock('full sync baseline', start, () => true);
      push('full-sync', 'full-rerender', 'agent', 0, ms, { bytes: prepared.bytes });
      if (k) push('full-sync', 'full-rerender', 'kernel', 0, k.ms, k);
      await h.fromEmpty.clear();
      progress(`${label}: full sync baseline`, false, `${label}: full sync baseline (the whole ruleset in one transaction of the mode's tool) ${ms.toFixed(0)} ms`);
    }
    progress(`${label}: full sync`, false);
    const t0 = nowNs();
    const full = await h.backend.sync(base, { full: true, changed: new Set() });
    const agentMs = msSince(t0);
    fullTransactions = full.transactions;
    // The prober's command goes out first: spawning the read-back blocks this process for a moment.
    const [dFull, kFull] = await Promise.all([
      prober.until({ until: 'answers', host: clocks[0]!.port.clusterIP, port: clocks[0]!.port.port }, opts.timing),
      kernelClock('full sync', t0, (s) => h.showsAll(s, base)),
    ]);
    push('full-sync', 'drover', 'agent', 0, agentMs, { bytes: full.bytes });
    if (kFull) push('full-sync', 'drover', 'kernel', 0, kFull.ms, kFull);
    push('full-sync', 'drover', 'datapath', 0, msSince(t0, dFull.atNs), { tries: dFull.tries });
    progress(`${label}: full sync`, true, `${label}: full sync ${agentMs.toFixed(0)} ms (${full.transactions} transaction(s))`);

    // What the baselines need besides drover's state, off the clock; only where they are measured (nftables mode:
    // kube-proxy's table, whose full write costs the kernel time quadratic in its size, modes/nftables/kube-proxy.ts).
    if (h.setUp && detailed) {
      progress(`${label}: setting up the baselines`, false);
      await h.setUp(base);
    }

    // 2. Single changes.
    const drover = async (c: BenchChange, i: number): Promise<void> => {
      // What changed, as a source reports it with its read (sources/decoder.ts), before the clock starts: comparing the
      // two whole snapshots costs O(service ports), which drover run does only for a source that cannot tell.
      const changed = changedServicePorts(c.from, c.to);
      const start = nowNs();
      const r = await h.backend.sync(c.to, { full: false, changed });
      const agent = msSince(start);
      if (r.full) throw new Error(`${label}: ${c.kind} made a full sync instead of a partial one`);
      const [d, k] = await Promise.all([prober.until(c.check, opts.timing), kernelClock(`${c.kind} ${i + 1}`, start, (s) => h.shows(s, c), c)]);
      push(c.kind, 'drover', 'agent', i, agent, { bytes: r.bytes });
      if (k) push(c.kind, 'drover', 'kernel', i, k.ms, k);
      push(c.kind, 'drover', 'datapath', i, msSince(start, d.atNs), { tries: d.tries });
    };
    const baselines = detailed ? [h.raw, ...h.perChange] : [h.raw];
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
    if (!h.whole) fullRerenderSkipped = `${h.mode} mode has no full re-render baseline`;
    else if (wholeRepeats === 0) fullRerenderSkipped = `not measured above ${fullBaselineMax} services (--full-baseline-max)`;
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

  } finally {
    // Closed before the rest: a member of the group makes every commit announce each element it changed.
    await events?.close();
  }

  // 4. The kernel must hold exactly drover's rules again.
  // Its time is what a full resync with nothing to write costs (a restart, a --sync-period resync).
  progress(`${label}: checking the kernel`, false);
  const tCheck = nowNs();
  const check = await h.backend.sync(base, { full: true, changed: new Set() });
  const resyncMs = round3(msSince(tCheck));
  const consistent = h.wroteNothing(check);
  progress(`${label}: checking the kernel`, true, `${label}: full resync ${resyncMs.toFixed(0)} ms${consistent ? '' : ', and it had to repair the kernel'}`);

  // 5. The end-to-end clock: the same changes through a real drover run watching manifest files.
  // It reads the kernel back like the kernel clock, so above --detail-max only drover run's first sync and RSS are measured.
  progress(`${label}: end to end, starting drover run`, false);
  const e2eIterations = detailed ? opts.changes : 0;
  const e2eChanges = Array.from({ length: e2eIterations }, (_, i) => iterationChanges(base, clocks, i, addedEndpoints, counts).map((change) => ({ iteration: i, change }))).flat();
  let droverRun: DroverRunFacts | undefined;
  let droverRunFailed: string | undefined;
  try {
    droverRun = await measureEndToEnd(
      h,
      { mode: h.mode, netns: view.node, iptablesVariant: opts.iptablesVariant, base, ownKeys: clocks.map((c) => c.port.key), changes: e2eChanges, deadlineMs: opts.kernelDeadlineMs },
      (x) => {
        push(x.kind, 'drover', 'end-to-end', x.iteration, x.ms, { tries: x.tries, readbackMs: x.readbackMs, rssKb: x.rssKb });
        progress(`${label}: end to end ${x.iteration + 1}/${opts.changes}`, true);
      },
    );
  } catch (err) {
    // With end-to-end changes their samples are part of the run; without them
    // (above --detail-max) a drover run that fails costs only its own facts.
    if (detailed) throw err;
    droverRunFailed = (err as Error).message;
  }
  progress(
    `${label}: done`,
    true,
    droverRun
      ? `${label}: done; drover run (${droverRun.entry}): first sync ${droverRun.firstSyncMs.toFixed(0)} ms after start, RSS ${droverRun.rssKb} kB, peak ${droverRun.peakRssKb} kB`
      : `${label}: done; drover run failed: ${droverRunFailed}`,
  );
  return {
    mode: h.mode,
    variant: h.variant,
    services: n,
    endpoints: opts.endpoints,
    changes: opts.changes,
    fullSyncTransactions: fullTransactions,
    ...(fullRerenderSkipped ? { fullRerenderSkipped } : {}),
    ...(detailed ? {} : { detailSkipped: `not measured above ${opts.detailMax} services (--detail-max)` }),
    consistent,
    resyncMs,
    ...(kernelMethod ? { kernelClock: kernelMethod } : {}),
    ...(kernelLost.length > 0 ? { kernelLost } : {}),
    peakRssKb: process.resourceUsage().maxRSS,
    ...(droverRun ? { droverRun } : { droverRunFailed: droverRunFailed! }),
  };
}
