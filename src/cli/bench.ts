/**
 * `drover bench`: rule-update latency of drover's backend against baselines,
 * in throw-away network namespaces (src/bench/run.ts), with the reports and
 * charts written to `--out` (src/bench/output.ts).
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { defaultMode, modeNames } from '../modes/registry.ts';
import type { ProxyMode } from '../proxier/backend.ts';
import { CLOCK_SERVICES, type BenchResult } from '../bench/types.ts';
import { parseDuration } from './options.ts';
import { UsageError } from '../errors.ts';

/** Options of `drover bench` after parsing. Times in milliseconds. */
export interface BenchCliOptions {
  readonly modes: ProxyMode[];
  readonly services: number[];
  readonly endpoints: number;
  readonly changes: number;
  readonly out: string;
  readonly iptablesBackend: 'nft' | 'legacy';
  readonly fullBaselineMax: number;
  readonly fullBaselineRepeats: number;
  readonly detailMax: number;
  readonly removalConfirm: number;
  readonly failConfirm: number;
  readonly probeTimeout: number;
  /** Output folders of earlier runs to make the report from, instead of measuring. */
  readonly from?: string[];
}

/** A whole number within [min, max]. @throws InvalidArgumentError otherwise. */
function intArg(min: number, max: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || n < min || n > max) throw new InvalidArgumentError(`"${value}" is not a whole number from ${min} to ${max}`);
    return n;
  };
}

/**
 * An option `flags` taking a whole number within [min, max], `fallback` when absent.
 * @param shown how `--help` shows the default (default: the number)
 */
function intOption(flags: string, description: string, fallback: number, min: number, max: number, shown?: string): Option {
  return new Option(flags, description).default(fallback, shown).argParser(intArg(min, max));
}

/** A comma-separated list of sizes, each at least the number of clock services. @throws InvalidArgumentError otherwise. */
export function parseSizes(value: string): number[] {
  const one = intArg(CLOCK_SERVICES, 100_000);
  const sizes = value.split(',').map((v) => one(v.trim()));
  return [...new Set(sizes)].sort((a, b) => a - b);
}

/** A comma-separated list of proxy modes (modes/registry.ts), in the order given. @throws InvalidArgumentError otherwise. */
export function parseModes(value: string): ProxyMode[] {
  const modes = [...new Set(value.split(',').map((m) => m.trim()))];
  for (const m of modes) {
    if (!modeNames().includes(m)) throw new InvalidArgumentError(`unknown mode "${m}" (known: ${modeNames().join(', ')})`);
  }
  return modes;
}

/** The `bench` command. */
export function benchCommand(): Command {
  return new Command('bench')
    .description(
      'measure how fast a change of Services or endpoints reaches the kernel and the data path, against baselines, ' +
        'in throw-away network namespaces (root; the host\'s own rules are never touched)',
    )
    .addOption(new Option('--modes <list>', `proxy modes to measure, comma-separated: ${modeNames().join(', ')} (IPVS needs a kernel with ip_vs)`).default([defaultMode()], defaultMode()).argParser(parseModes))
    .addOption(new Option('--services <list>', 'sizes: service ports in the kernel, comma-separated').default([100, 1000], '100,1000').argParser(parseSizes))
    .addOption(intOption('--endpoints <n>', 'endpoints per synthetic service port', 10, 1, 100))
    .addOption(intOption('--changes <n>', 'changes of each kind (endpoint removed/added, service added/removed) per size', 50, 1, 10_000))
    .addOption(new Option('-o, --out <dir>', 'folder for samples.jsonl, samples.csv, summary.md, run.json and the SVG charts').makeOptionMandatory())
    .addOption(new Option('--iptables-backend <backend>', 'iptables variant').choices(['nft', 'legacy']).default('nft'))
    .addOption(
      intOption('--full-baseline-max <n>', 'measure the full re-render baseline only up to this many service ports (it takes minutes at 5,000 on iptables-nft)', 1000, 0, 100_000),
    )
    .addOption(intOption('--full-baseline-repeats <n>', 'full re-render samples per size', 1, 1, 100))
    .addOption(
      intOption(
        '--detail-max <n>',
        'measure the kernel clock by read-back (iptables-legacy, IPVS), the end-to-end clock and the kube-proxy-style baseline only up to this many service ports; above, only the agent and data-path clocks, the kernel clock by commit notification (nftables, iptables-nft), the raw baseline and the RSS of drover run (for slow machines such as an emulated guest)',
        100_000,
        0,
        100_000,
        'no limit',
      ),
    )
    .addOption(intOption('--removal-confirm <n>', 'connections in a row on the surviving endpoint that show an endpoint removed (false-positive bound 2^-n)', 10, 1, 100))
    .addOption(intOption('--fail-confirm <n>', 'failed connections in a row that show a service removed', 3, 1, 100))
    .addOption(
      new Option('--from <dirs>', "make the report from earlier runs' output folders (comma-separated; run.json and samples.jsonl) instead of measuring").argParser(
        (v: string) => v.split(',').map((d) => d.trim()).filter((d) => d !== ''),
      ),
    )
    .addOption(new Option('--probe-timeout <duration>', 'a data-path connection not answered within this counts as failed').default(1000, '1s').argParser(parseDuration))
    .addHelpText(
      'after',
      [
        '',
        'For each mode and size it builds a node namespace, a client namespace and two',
        'backend namespaces with echo servers, applies a synthetic state from empty',
        'tables (full sync), then makes --changes changes of each kind through',
        "drover's partial sync, each timed on three clocks: agent (until the kernel",
        'transaction returned), kernel (until nf_tables announces the commit of the',
        "change's last transaction (nftables, iptables-nft), or until a read-back",
        'shows the change (iptables-legacy, IPVS)) and data path (until a new',
        'connection from the client shows it). Hand-built payloads',
        'make the same changes as baselines: the minimal change (the physical limit),',
        'a kube-proxy-style restore (the whole KUBE-SERVICES chain rewritten) and, up',
        'to --full-baseline-max, a full re-render. A last full sync of the starting',
        'state must write nothing; its time is the cost of a restart or a periodic',
        'resync. Then a real `drover run` process watches the starting state as',
        'manifest files, and the same changes are written to its files, each timed',
        'from the write until a read-back of the kernel shows it (the end-to-end',
        'clock); the RSS of that process is reported at each size. summary.md gives',
        'p50, p95, p99 and max, and the ratios drover/raw and drover/kube-proxy per',
        'kind of change.',
        '',
        'With --modes iptables,ipvs (a kernel with ip_vs) or iptables,nftables, the modes',
        'are measured in one run and summary.md and modes.svg set the other mode against',
        'iptables mode. nftables mode adds a minimal script baseline (the raw element',
        'changes through nft -f) and measures kube-proxy\'s nftables layout beside drover\'s.',
        '',
        'Examples:',
        '  drover bench --services 100,1000 --changes 50 --out out/bench',
        '  drover bench --modes iptables,ipvs --services 1000 --changes 5 --out out/a',
        '  drover bench --modes iptables,nftables --services 100,1000 --changes 5 --out out/n',
        '  drover bench --from out/a,out/b --out out/both   # one report from two runs',
        '',
      ].join('\n'),
    )
    .action(async (opts: BenchCliOptions) => {
      if (opts.from) {
        const { mergeResults, readResult } = await import('../bench/merge.ts');
        const results = await Promise.all(opts.from.map((dir) => readResult(resolve(dir))));
        await report(mergeResults(results), opts.out);
        return;
      }
      // Loaded here, not at start: only bench uses them.
      const [{ testbedUnavailableReason }, { modeBench }, { detectEnvironment }, { progressSink }, { runBench }] = await Promise.all([
        import('../testbed/topology.ts'),
        import('../bench/modes/registry.ts'),
        import('../bench/environment.ts'),
        import('../bench/progress.ts'),
        import('../bench/run.ts'),
      ]);
      const unavailable = await testbedUnavailableReason();
      if (unavailable) throw new UsageError(`bench ${unavailable}`);
      for (const mode of opts.modes) {
        const why = await modeBench(mode).unavailableReason();
        if (why) throw new UsageError(`bench --modes ${mode}: ${why}`);
      }
      const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
      const environment = await detectEnvironment({ iptablesVariants: [opts.iptablesBackend], droverVersion: pkg.version });
      if (environment.guest) process.stderr.write(`drover: emulated guest detected (${environment.guestReason}): the report gives ratios only\n`);
      const sink = await progressSink();
      const out = resolve(opts.out);
      let written = 0;
      let result;
      try {
        result = await runBench(
          {
            modes: opts.modes,
            services: opts.services,
            endpoints: opts.endpoints,
            changes: opts.changes,
            iptablesVariant: opts.iptablesBackend,
            fullBaselineMax: opts.fullBaselineMax,
            fullBaselineRepeats: opts.fullBaselineRepeats,
            detailMax: opts.detailMax,
            removalConfirm: opts.removalConfirm,
            failConfirm: opts.failConfirm,
            timing: { attemptTimeoutMs: opts.probeTimeout, deadlineMs: Math.max(30_000, opts.probeTimeout * 10) },
            kernelDeadlineMs: 600_000,
            onProgress: (e) => sink.update(e),
            // Each size's results are on disk as soon as it is done: a failure at a later size keeps them.
            async onSizeDone(partial) {
              const { writeReport } = await import('../bench/output.ts');
              await writeReport(out, partial);
              written = partial.runs.length;
            },
          },
          environment,
        );
      } catch (err) {
        sink.stop();
        if (written > 0) process.stderr.write(`drover: bench failed; the ${written} size${written === 1 ? '' : 's'} finished before it ${written === 1 ? 'is' : 'are'} written to ${out}\n`);
        throw err;
      } finally {
        sink.stop();
      }
      await report(result, opts.out);
    });
}

/** Write the report files of `result` into `dir` and print the overview (and the IPVS/iptables table, when both modes ran). */
async function report(result: BenchResult, dir: string): Promise<void> {
  const out = resolve(dir);
  // Loaded here: the charting libraries would slow down every other command's start.
  const { writeReport } = await import('../bench/output.ts');
  const { droverRunTable, modeComparisons, modePairs, modeTable, overviewTable, pairTitle, ratioRows, statRows } = await import('../bench/report.ts');
  const files = await writeReport(out, result);
  const rows = statRows(result.runs, result.samples);
  const pairs = modePairs(modeComparisons(rows));
  process.stdout.write(
    [
      `p50 in ms${result.environment.guest ? ' (emulated guest: compare the ratios only)' : ''}; ratios: drover's agent clock over the baseline, at p50`,
      '',
      ...overviewTable(ratioRows(rows)),
      '',
      ...(result.runs.some((r) => r.droverRun) ? ['drover run of the end-to-end clock:', '', ...droverRunTable(result.runs), ''] : []),
      ...pairs.flatMap((p) => [`drover's agent clock, ${pairTitle(p.mode, p.reference)}:`, '', ...modeTable(p.rows), '']),
      `written to ${out}: ${files.join(', ')}`,
      '',
    ].join('\n'),
  );
}
