/** Earlier runs read back from their folders and merged into one report's result. */
import test from 'ava';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mergeResults, readResult } from '../../src/bench/merge.ts';
import { samplesToJSONL } from '../../src/bench/report.ts';
import { SETTINGS } from '../support/bench.ts';
import type { BenchResult, Sample, SizeRun } from '../../src/bench/types.ts';

const RUN: SizeRun = { mode: 'iptables', variant: 'nft', services: 100, endpoints: 10, changes: 4, fullSyncTransactions: 1, consistent: true, resyncMs: 80.25, peakRssKb: 1000 };
const sample = (over: Partial<Sample> = {}): Sample => ({
  mode: 'iptables',
  variant: 'nft',
  services: 100,
  endpoints: 10,
  kind: 'endpoint-added',
  method: 'drover',
  clock: 'agent',
  iteration: 0,
  ms: 12.5,
  ...over,
});
const RESULT: BenchResult = {
  environment: { date: 'D1', guest: true, guestReason: 'DROVER_IN_GUEST=1', kernel: '6.1', iptables: { nft: 'v1.8.9' }, cpus: 1, cpuModel: 'QEMU', loadAverage: 1, node: 'v20', drover: '0.1.0' },
  settings: SETTINGS,
  runs: [RUN],
  samples: [sample()],
};

async function folder(t: { teardown: (f: () => Promise<void>) => void }, runJson: string, jsonl: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-merge-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'run.json'), runJson);
  await writeFile(join(dir, 'samples.jsonl'), jsonl);
  return dir;
}

const runJson = (r: BenchResult): string => JSON.stringify({ environment: r.environment, settings: r.settings, runs: r.runs, stats: [], ratios: [] });

test('a run folder reads back as the result that was written', async (t) => {
  const dir = await folder(t, runJson(RESULT), samplesToJSONL(RESULT.samples));
  t.deepEqual(await readResult(dir), RESULT);
});

test('a run folder with the end-to-end clock reads back with its samples and drover run facts', async (t) => {
  const withRun: BenchResult = {
    ...RESULT,
    runs: [{ ...RUN, droverRun: { entry: 'src', firstSyncMs: 1500.5, rssKb: 90_000, peakRssKb: 95_000 } }],
    samples: [sample(), sample({ clock: 'end-to-end', ms: 412.75, tries: 1, readbackMs: 50.5, rssKb: 91_000 })],
  };
  const dir = await folder(t, runJson(withRun), samplesToJSONL(withRun.samples));
  t.deepEqual(await readResult(dir), withRun);
});

test('a run folder without the final full sync time reads back without it', async (t) => {
  const { resyncMs: _, ...older } = RUN;
  const dir = await folder(t, runJson({ ...RESULT, runs: [older] }), samplesToJSONL(RESULT.samples));
  t.deepEqual((await readResult(dir)).runs, [older]);
});

test('bad folders give an error naming the file, line and field', async (t) => {
  const notJson = await folder(t, '{"environment": ', '');
  await t.throwsAsync(readResult(notJson), { message: new RegExp(`^${join(notJson, 'run.json')}: not JSON: `) });
  const badField = await folder(t, runJson({ ...RESULT, runs: [{ ...RUN, services: -1 }] }), '');
  await t.throwsAsync(readResult(badField), { message: new RegExp(`^${join(badField, 'run.json')}: runs.0.services: `) });
  const badResync = await folder(t, runJson({ ...RESULT, runs: [{ ...RUN, resyncMs: -1 }] }), '');
  await t.throwsAsync(readResult(badResync), { message: new RegExp(`^${join(badResync, 'run.json')}: runs.0.resyncMs: `) });
  const badLine = await folder(t, runJson(RESULT), `${samplesToJSONL(RESULT.samples)}{"mode":"nft"}\n`);
  await t.throwsAsync(readResult(badLine), { message: new RegExp(`^${join(badLine, 'samples.jsonl')}:2: mode: `) });
  const stray = await folder(t, runJson(RESULT), samplesToJSONL([sample({ services: 5000 })]));
  await t.throwsAsync(readResult(stray), { message: /a sample of iptables\/nft 5000 services, 10 endpoints has no run in / });
});

test('merging keeps each size from the last run that measured it, and every mode', (t) => {
  const ipvs: BenchResult = {
    ...RESULT,
    environment: { ...RESULT.environment, date: 'D2' },
    settings: { ...RESULT.settings, modes: ['ipvs', 'iptables'], services: [100, 10000], changes: 2, detailMax: 1000 },
    runs: [
      { ...RUN, mode: 'ipvs', changes: 2 },
      { ...RUN, services: 10000, changes: 2, detailSkipped: 'x' },
      { ...RUN, changes: 2 },
    ],
    samples: [sample({ mode: 'ipvs', ms: 1 }), sample({ services: 10000, ms: 2 }), sample({ ms: 3 })],
  };
  const merged = mergeResults([RESULT, ipvs]);
  t.is(merged.environment.date, 'D1, D2');
  t.deepEqual(merged.settings.modes, ['iptables', 'ipvs']);
  t.deepEqual(merged.settings.services, [100, 10000]);
  t.is(merged.settings.changes, 2);
  t.is(merged.settings.detailMax, 1000);
  t.deepEqual(
    merged.runs.map((r) => `${r.mode} ${r.services} ${r.changes}`),
    ['iptables 100 2', 'iptables 10000 2', 'ipvs 100 2'],
  );
  t.deepEqual(merged.samples.map((s) => s.ms), [1, 2, 3], 'the first run\'s iptables 100 sample is replaced');
});

test('runs from different machines, guest and host, or other data-path settings are not merged', (t) => {
  t.throws(() => mergeResults([]), { message: 'no benchmark results to merge' });
  t.throws(() => mergeResults([RESULT, { ...RESULT, environment: { ...RESULT.environment, guest: false } }]), { message: /emulated guest with a run on a host/ });
  t.throws(() => mergeResults([RESULT, { ...RESULT, environment: { ...RESULT.environment, kernel: '6.2' } }]), { message: /environment.kernel "6.1" and "6.2"/ });
  t.throws(() => mergeResults([RESULT, { ...RESULT, settings: { ...RESULT.settings, removalConfirm: 5 } }]), { message: /settings.removalConfirm \(10 and 5\)/ });
  t.throws(() => mergeResults([RESULT, { ...RESULT, settings: { ...RESULT.settings, endpoints: 3 } }]), { message: /10 and 3 endpoints per service/ });
});
