/** Writing a benchmark run's files into its output folder. */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/atomic-file.ts';
import { charts, svgRenderer } from './charts.ts';
import { buildSummary, ratioRows, samplesToCSV, samplesToJSONL, statRows } from './report.ts';
import type { BenchResult } from './types.ts';

/**
 * Write, into `dir` (created if needed): samples.jsonl and samples.csv (every
 * raw sample), summary.md, run.json (environment, settings, per-size facts,
 * statistics and ratios) and the SVG charts (left out, with one line on
 * stderr, when the chart packages are not installed: charts.ts svgRenderer). Each file is replaced
 * atomically (a reader sees the old or the new one, never half of one), so
 * that `drover bench` can call it again after each size with everything
 * finished so far, over what the last call wrote.
 * @returns the names of the files written, in that order.
 */
export async function writeReport(dir: string, result: BenchResult): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const rows = statRows(result.runs, result.samples);
  const files: Array<[string, string]> = [
    ['samples.jsonl', samplesToJSONL(result.samples)],
    ['samples.csv', samplesToCSV(result.samples)],
    ['summary.md', buildSummary(result)],
    [
      'run.json',
      `${JSON.stringify({ environment: result.environment, settings: result.settings, runs: result.runs, stats: rows, ratios: ratioRows(rows) }, null, 2)}\n`,
    ],
  ];
  const render = await svgRenderer();
  if (render) for (const chart of charts(result)) files.push([chart.file, await render(chart.spec)]);
  for (const [name, text] of files) await writeFileAtomic(join(dir, name), text);
  return files.map(([name]) => name);
}
