/** The bench's size loop: each finished size is written out before the next starts, so a later failure keeps it. */
import test from 'ava';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readResult } from '../../src/bench/merge.ts';
import { writeReport } from '../../src/bench/output.ts';
import { runSizes } from '../../src/bench/run.ts';
import type { BenchEnvironment, BenchResult, Sample, SizeRun } from '../../src/bench/types.ts';
import type { ProxyMode } from '../../src/proxier/backend.ts';
import { SETTINGS } from '../support/bench.ts';

const ENV: BenchEnvironment = { date: 'D1', guest: false, guestReason: '', kernel: '6.1', iptables: { nft: 'v1.8.9' }, cpus: 2, cpuModel: 'test', loadAverage: 1, node: 'v22', drover: '0.1.0' };
const { clockServices: _, ...settings } = SETTINGS;
const OPTS = { ...settings, modes: ['nftables'] as ProxyMode[], services: [30_000, 1000, 10_000] };

const run = (mode: ProxyMode, n: number): SizeRun => ({ mode, variant: 'netlink', services: n, endpoints: 10, changes: 4, fullSyncTransactions: 1, consistent: true, resyncMs: 10, peakRssKb: 1000 });
const sample = (mode: ProxyMode, n: number, ms: number): Sample => ({ mode, variant: 'netlink', services: n, endpoints: 10, kind: 'endpoint-added', method: 'drover', clock: 'agent', iteration: 0, ms });

/** A size runner that measures one sample per size and fails at `failAt`. */
const runner = (failAt: number) => async (mode: ProxyMode, n: number, samples: Sample[]): Promise<SizeRun> => {
  samples.push(sample(mode, n, n / 100));
  if (n === failAt) throw new Error(`nft -f exited with a signal at ${n}`);
  return run(mode, n);
};

test('each size is handed over as soon as it is done, with everything finished before it', async (t) => {
  const seen: BenchResult[] = [];
  const result = await runSizes({ ...OPTS, onSizeDone: async (r) => void seen.push(r) }, ENV, runner(-1));
  t.deepEqual(seen.map((r) => r.runs.map((x) => x.services)), [[1000], [1000, 10_000], [1000, 10_000, 30_000]]);
  t.deepEqual(seen.map((r) => r.samples.map((x) => x.services)), [[1000], [1000, 10_000], [1000, 10_000, 30_000]]);
  t.deepEqual(seen.map((r) => r.settings.services), [[1000, 10_000, 30_000], [1000, 10_000, 30_000], [1000, 10_000, 30_000]]);
  t.deepEqual(result, seen[2]);
});

test('a failure at the largest size keeps the report of the smaller ones on disk, consistent', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-bench-run-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await t.throwsAsync(runSizes({ ...OPTS, onSizeDone: (r) => writeReport(dir, r).then(() => undefined) }, ENV, runner(30_000)), { message: /exited with a signal at 30000/ });
  const back = await readResult(dir);
  t.deepEqual(back.runs, [run('nftables', 1000), run('nftables', 10_000)]);
  t.deepEqual(back.samples, [sample('nftables', 1000, 10), sample('nftables', 10_000, 100)]);
  t.is((await readFile(join(dir, 'samples.csv'), 'utf8')).trimEnd().split('\n').length, 3, 'a header and two samples');
  const summary = await readFile(join(dir, 'summary.md'), 'utf8');
  t.regex(summary, /10,?000/);
  t.regex(summary, /\| not measured yet \| nftables at 30000 \|/);
  t.notRegex(summary.replace(/^\| (run|not measured yet) .*$/gm, ''), /30,?000/, 'no results at 30,000');
});
