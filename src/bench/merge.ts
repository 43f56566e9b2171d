/**
 * Earlier `drover bench` runs read back from their output folders
 * (run.json and samples.jsonl) and put together into one result, so that
 * sizes measured in separate runs (for example 1,000 and 10,000 service
 * ports in an emulated guest, with different numbers of changes) share one
 * report: `drover bench --from DIR,DIR --out DIR`.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { modeNames } from '../modes/registry.ts';
import { METHODS, type BenchResult, type Method, type Sample } from './types.ts';

/** A mode of the registry. */
const modeName = z.string().refine((m) => modeNames().includes(m), { message: 'not a proxy mode of this drover' });

const Environment = z.looseObject({
  date: z.string(),
  guest: z.boolean(),
  guestReason: z.string(),
  kernel: z.string(),
  iptables: z.record(z.string(), z.string()),
  cpus: z.number(),
  cpuModel: z.string(),
  loadAverage: z.number(),
  node: z.string(),
  drover: z.string(),
});

const Settings = z.looseObject({
  modes: z.array(modeName),
  services: z.array(z.number().int().positive()),
  endpoints: z.number().int().positive(),
  changes: z.number().int().positive(),
  iptablesVariant: z.string(),
  fullBaselineMax: z.number().int().nonnegative(),
  fullBaselineRepeats: z.number().int().positive(),
  // Runs written before --detail-max existed measured every detail.
  detailMax: z.number().int().nonnegative().default(100_000),
  removalConfirm: z.number().int().positive(),
  failConfirm: z.number().int().positive(),
  clockServices: z.number().int().positive(),
});

const Run = z.looseObject({
  mode: modeName,
  variant: z.string(),
  services: z.number().int().positive(),
  endpoints: z.number().int().positive(),
  changes: z.number().int().positive(),
  fullSyncTransactions: z.number().int().nonnegative(),
  fullRerenderSkipped: z.string().optional(),
  detailSkipped: z.string().optional(),
  consistent: z.boolean(),
  resyncMs: z.number().nonnegative().optional(),
  kernelClock: z.enum(['notification', 'read-back']).optional(),
  kernelLost: z.array(z.string()).optional(),
  peakRssKb: z.number().nonnegative(),
  droverRun: z
    .object({ entry: z.enum(['dist', 'src']), firstSyncMs: z.number().nonnegative(), rssKb: z.number().nonnegative(), peakRssKb: z.number().nonnegative() })
    .optional(),
  droverRunFailed: z.string().optional(),
});

const RunFile = z.object({ environment: Environment, settings: Settings, runs: z.array(Run) });

const SampleLine = z.looseObject({
  mode: modeName,
  variant: z.string(),
  services: z.number().int().positive(),
  endpoints: z.number().int().positive(),
  kind: z.enum(['full-sync', 'endpoint-removed', 'endpoint-added', 'service-added', 'service-removed']),
  method: z.enum(METHODS as [Method, ...Method[]]),
  clock: z.enum(['agent', 'end-to-end', 'kernel', 'datapath']),
  iteration: z.number().int().nonnegative(),
  ms: z.number().nonnegative(),
  tries: z.number().optional(),
  readbackMs: z.number().optional(),
  kernelMethod: z.enum(['notification', 'read-back']).optional(),
  rssKb: z.number().optional(),
  bytes: z.number().optional(),
});

/** JSON.parse with the place named in the error. */
function parseJson(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new Error(`${where}: not JSON: ${(err as Error).message}`);
  }
}

/**
 * Read one run's result from its output folder.
 * @throws Error naming the file (and the line of samples.jsonl) that is missing or not what `drover bench` writes.
 */
export async function readResult(dir: string): Promise<BenchResult> {
  const runPath = join(dir, 'run.json');
  const parsed = RunFile.safeParse(parseJson(await readFile(runPath, 'utf8'), runPath));
  if (!parsed.success) throw new Error(`${runPath}: ${parsed.error.issues[0]!.path.join('.')}: ${parsed.error.issues[0]!.message}`);
  const samplesPath = join(dir, 'samples.jsonl');
  const samples: Sample[] = [];
  const lines = (await readFile(samplesPath, 'utf8')).split('\n');
  lines.forEach((line, i) => {
    if (line.trim() === '') return;
    const s = SampleLine.safeParse(parseJson(line, `${samplesPath}:${i + 1}`));
    if (!s.success) throw new Error(`${samplesPath}:${i + 1}: ${s.error.issues[0]!.path.join('.')}: ${s.error.issues[0]!.message}`);
    samples.push(s.data as Sample);
  });
  const { environment, settings, runs } = parsed.data;
  const measured = new Set(runs.map((r) => `${r.mode}|${r.variant}|${r.services}|${r.endpoints}`));
  const stray = samples.find((x) => !measured.has(`${x.mode}|${x.variant}|${x.services}|${x.endpoints}`));
  if (stray) throw new Error(`${samplesPath}: a sample of ${stray.mode}/${stray.variant} ${stray.services} services, ${stray.endpoints} endpoints has no run in ${runPath}`);
  return { environment, settings, runs, samples } as BenchResult;
}

/**
 * Several results as one: the environment of the first (every date is kept
 * in the order given), the sizes and modes of all, and each size's runs and
 * samples. A size and mode measured in more than one result is taken from
 * the last. Other settings that differ between results are taken from the
 * first, except `changes` and `detailMax` (the smallest); each size's run
 * keeps its own changes, skipped details and skipped full re-render. Pure.
 * @throws Error when `results` is empty, mixes guest and host runs or
 *   machines (kernel, CPU model or count), or used different endpoints per
 *   service, data-path confirmation counts or clock services.
 */
export function mergeResults(results: readonly BenchResult[]): BenchResult {
  const first = results[0];
  if (!first) throw new Error('no benchmark results to merge');
  for (const r of results) {
    if (r.settings.endpoints !== first.settings.endpoints) {
      throw new Error(`cannot merge runs with ${first.settings.endpoints} and ${r.settings.endpoints} endpoints per service`);
    }
    if (r.environment.guest !== first.environment.guest) throw new Error('cannot merge a run in an emulated guest with a run on a host: their times do not compare');
    for (const field of ['kernel', 'cpuModel', 'cpus'] as const) {
      if (r.environment[field] !== first.environment[field]) {
        throw new Error(`cannot merge runs made on different machines: environment.${field} ${JSON.stringify(first.environment[field])} and ${JSON.stringify(r.environment[field])}`);
      }
    }
    for (const field of ['removalConfirm', 'failConfirm', 'clockServices'] as const) {
      if (r.settings[field] !== first.settings[field]) {
        throw new Error(`cannot merge runs with different settings.${field} (${first.settings[field]} and ${r.settings[field]}): the data-path clock means something else`);
      }
    }
  }
  const key = (x: { mode: string; variant: string; services: number }): string => `${x.mode}|${x.variant}|${x.services}`;
  const owner = new Map<string, number>();
  results.forEach((r, i) => r.runs.forEach((run) => owner.set(key(run), i)));
  const runs = results.flatMap((r, i) => r.runs.filter((run) => owner.get(key(run)) === i));
  const samples = results.flatMap((r, i) => r.samples.filter((s) => owner.get(key(s)) === i));
  const modes = [...new Set(results.flatMap((r) => r.settings.modes))];
  const sortedRuns = [...runs].sort((a, b) => modes.indexOf(a.mode) - modes.indexOf(b.mode) || a.services - b.services);
  return {
    environment: { ...first.environment, date: results.map((r) => r.environment.date).join(', ') },
    settings: {
      ...first.settings,
      modes,
      services: [...new Set(runs.map((r) => r.services))].sort((a, b) => a - b),
      changes: Math.min(...results.map((r) => r.settings.changes)),
      detailMax: Math.min(...results.map((r) => r.settings.detailMax)),
    },
    runs: sortedRuns,
    samples,
  };
}
