/**
 * The peer bench's report: markdown tables (pure, {@link peerTables}), and
 * summary.md, results.json and latency.svg written to a folder
 * ({@link writePeerReport}).
 *
 * Latencies are network programming latency (just before the API write is sent → a new
 * connection from the proxy's client shows the change), ms, p50 unless
 * said. Ratios are drover's p50 over kube-proxy's in the same mode and size.
 * A churn change overtaken by the next change of its Service counts as
 * slower than every timed one ({@link churnSamples}): `superseded` where a
 * percentile falls on it.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TopLevelSpec } from 'vega-lite';
import { svgRenderer } from '../../../src/bench/charts.ts';
import { median, percentile } from '../../../src/bench/stats.ts';
import { CHANGE_KINDS, SUPERSEDED_AFTER_MS, type ProxyResult } from './run.ts';

/** How the run was made, for the report's head. */
export interface PeerRunMeta {
  readonly services: readonly number[];
  readonly endpoints: number;
  readonly changes: number;
  readonly churnRate: number;
  readonly churnSeconds: number;
  /** Quiet time after each single change, ms. */
  readonly gapMs: number;
  /** ISO time of the start. */
  readonly started: string;
  /** The command's arguments. */
  readonly command: string;
}

const ms = (x: number | undefined): string => (x === undefined ? '–' : x === Infinity ? 'superseded' : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const mb = (kb: number): string => (kb / 1024).toFixed(0);
const p50 = (xs: readonly number[]): number | undefined => (xs.length ? median(xs) : undefined);
const churnP50 = (r: ProxyResult): number | undefined => {
  const all = r.churn ? churnSamples(r.churn) : [];
  return all.length ? percentile(all, 50) : undefined;
};
const ratio = (a: number | undefined, b: number | undefined): string => (a === undefined || b === undefined || b === 0 || !Number.isFinite(a) || !Number.isFinite(b) ? '–' : (a / b).toFixed(a / b < 0.1 ? 3 : 2));

/**
 * The churn run's latencies with each superseded change as Infinity: it
 * showed later than the next change of its Service was written (2 s after
 * it), so it ranks above every change that was timed.
 */
export function churnSamples(c: NonNullable<ProxyResult['churn']>): number[] {
  return [...c.latenciesMs, ...Array.from({ length: c.superseded }, () => Number.POSITIVE_INFINITY)];
}

/** {@link ratio}, or an upper bound when kube-proxy's p50 is a superseded change (slower than {@link SUPERSEDED_AFTER_MS}) and drover's is not. */
function churnRatio(d: number | undefined, k: number | undefined): string {
  if (d !== undefined && Number.isFinite(d) && k === Number.POSITIVE_INFINITY) return `< ${(d / SUPERSEDED_AFTER_MS).toFixed(2)}`;
  return ratio(d, k);
}

/** Every single change of a result, pooled. */
const allChanges = (r: ProxyResult): number[] => CHANGE_KINDS.flatMap((k) => r.changes[k]);

/** The comparisons of the goals: drover against kube-proxy at its defaults and with minSyncPeriod 0, per mode; and both with 0. */
const PAIRS: ReadonlyArray<readonly [string, string]> = [
  ['drover-nftables', 'kube-proxy-nftables'],
  ['drover-nftables', 'kube-proxy-nftables-min0'],
  ['drover-nftables-min0', 'kube-proxy-nftables-min0'],
  ['drover-iptables', 'kube-proxy-iptables'],
  ['drover-iptables', 'kube-proxy-iptables-min0'],
  ['drover-iptables-min0', 'kube-proxy-iptables-min0'],
];

/** The markdown tables of `results`: one per size of every proxy, then the ratios. Pure. */
export function peerTables(results: readonly ProxyResult[]): string {
  const out: string[] = [];
  const sizes = [...new Set(results.map((r) => r.services))].sort((a, b) => a - b);
  for (const size of sizes) {
    const rows = results.filter((r) => r.services === size);
    out.push(`### ${size.toLocaleString('en-US')} Services`, '');
    out.push('| proxy | full sync from start, ms | endpoint swapped | service added | service removed | churn p50 | churn p95 | churn max | churn superseded / failed | RSS steady / peak, MB | CPU s (own + children) | load 1 min | API write p50 / p95 |');
    out.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const r of rows) {
      const c = r.churn;
      const all = c ? churnSamples(c) : [];
      const churn = all.length ? [percentile(all, 50), percentile(all, 95), percentile(all, 100)] : [undefined, undefined, undefined];
      out.push(
        `| ${r.label} | ${ms(r.fullSyncMs)} | ${CHANGE_KINDS.map((k) => ms(p50(r.changes[k]))).join(' | ')} | ${churn.map(ms).join(' | ')} | ${c ? `${c.superseded} / ${c.failed.length} of ${c.writes}` : '–'} | ${mb(r.rssSteadyKb)} / ${mb(r.rssPeakKb)} | ${r.cpuSelfS.toFixed(1)} + ${r.cpuChildrenS.toFixed(1)} | ${r.load[0].toFixed(1)}–${r.load[1].toFixed(1)} | ${r.apiWriteMs?.length ? `${ms(percentile(r.apiWriteMs, 50))} / ${ms(percentile(r.apiWriteMs, 95))}` : '–'} |`,
      );
    }
    out.push('');
    const by = new Map(rows.map((r) => [r.label, r]));
    const pairs = PAIRS.filter(([a, b]) => by.has(a) && by.has(b));
    if (pairs.length > 0) {
      out.push('| drover / kube-proxy | full sync | single changes (p50 of all) | churn p50 | RSS steady | RSS peak | CPU s (own + children) |');
      out.push('|---|---:|---:|---:|---:|---:|---:|');
      for (const [a, b] of pairs) {
        const d = by.get(a)!;
        const k = by.get(b)!;
        out.push(
          `| ${a} / ${b} | ${ratio(d.fullSyncMs, k.fullSyncMs)} | ${ratio(p50(allChanges(d)), p50(allChanges(k)))} | ${churnRatio(churnP50(d), churnP50(k))} | ${ratio(d.rssSteadyKb, k.rssSteadyKb)} | ${ratio(d.rssPeakKb, k.rssPeakKb)} | ${ratio(d.cpuSelfS + d.cpuChildrenS, k.cpuSelfS + k.cpuChildrenS)} |`,
        );
      }
      out.push('');
    }
    const errors = rows.filter((r) => r.errors.length > 0);
    for (const r of errors) out.push(`${r.label} logged ${r.errors.length} error line(s), the first: \`${r.errors[0]!.slice(0, 300).replace(/`/g, "'")}\``, '');
  }
  return out.join('\n');
}

/** A bar chart: p50 of each kind of change (and churn) per proxy, one panel per size, log scale. */
export function latencyChart(results: readonly ProxyResult[]): TopLevelSpec {
  const values = results.flatMap((r) => [
    ...CHANGE_KINDS.map((k) => ({ proxy: r.label, services: r.services, change: k, p50: p50(r.changes[k]) })),
    ...(r.churn && Number.isFinite(churnP50(r)) ? [{ proxy: r.label, services: r.services, change: 'churn', p50: churnP50(r) }] : []),
  ]);
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title: 'Network programming latency, p50 (API write → a new connection shows it)',
    data: { values: values.filter((v) => v.p50 !== undefined) },
    facet: { row: { field: 'services', type: 'ordinal', title: 'Services' } },
    spec: {
      width: 520,
      height: 180,
      mark: 'bar',
      encoding: {
        x: { field: 'change', type: 'nominal', title: null },
        xOffset: { field: 'proxy', type: 'nominal' },
        y: { field: 'p50', type: 'quantitative', scale: { type: 'log' }, title: 'ms (log)' },
        color: { field: 'proxy', type: 'nominal' },
      },
    },
  } as TopLevelSpec;
}

/**
 * Write summary.md (head + {@link peerTables}), results.json and, when vega
 * is installed, latency.svg to `dir`; returns summary.md's text.
 */
export async function writePeerReport(dir: string, meta: PeerRunMeta, results: readonly ProxyResult[]): Promise<string> {
  await mkdir(dir, { recursive: true });
  const head = [
    '# kube-proxy beside drover: one run',
    '',
    `\`tsx scripts/peers/bench.ts ${meta.command}\`, started ${meta.started}: ${meta.endpoints} endpoints per Service, ${meta.changes} single changes of each kind per proxy (${meta.gapMs} ms apart once shown), churn ${meta.churnRate} EndpointSlice changes/s for ${meta.churnSeconds} s. Latencies in ms, p50, from just before the API write is sent until a new connection from the proxy's client shows the change (probes paced every 10 ms, counted by send order); the last column is the API write's own round trip, part of every latency. See README.md here for how to read it.`,
    '',
  ];
  const text = `${head.join('\n')}\n${peerTables(results)}`;
  await writeFile(join(dir, 'summary.md'), text);
  await writeFile(join(dir, 'results.json'), `${JSON.stringify({ meta, results }, null, 1)}\n`);
  const render = await svgRenderer();
  if (render && results.length > 0) await writeFile(join(dir, 'latency.svg'), await render(latencyChart(results)));
  return text;
}
