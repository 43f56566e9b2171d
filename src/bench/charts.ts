/**
 * Charts of a benchmark run: vega-lite specifications (pure) rendered to SVG
 * headless by vega (no browser, no canvas).
 *
 * Per mode and variant:
 * - latency-<mode>-<variant>.svg: p50 against the number of service ports,
 *   both axes log scale, one panel per kind of change, one line per clock of
 *   drover and per baseline;
 * - distributions-<mode>-<variant>.svg: every sample of every single change
 *   as a box plot (whiskers at min and max) with the samples as ticks, one
 *   panel per kind of change and size, log scale.
 *
 * When another mode ran beside iptables mode (IPVS, nftables): modes.svg,
 * drover's agent clock (p50) of each mode against the number of service
 * ports, one panel per kind of change (the full sync included), log scales.
 *
 * vega and vega-lite are optional packages (optional.ts), loaded only when
 * charts are rendered.
 */
import type { TopLevelSpec } from 'vega-lite';
import { loadOptional } from './optional.ts';
import type { ProxyMode } from '../proxier/backend.ts';
import { CLOCK_LABEL, KIND_LABEL, KINDS, METHOD_LABEL, modeComparisons, modeLabel, modePairs, pairTitle, statRows } from './report.ts';
import type { BenchResult, Clock, Method, Sample } from './types.ts';

/** A chart to write: its file name and specification. */
export interface Chart {
  /** File name, e.g. `latency-iptables-nft.svg`. */
  readonly file: string;
  readonly spec: TopLevelSpec;
}

/** The name of one line or box: drover's clock, or a baseline. */
export function seriesLabel(method: Method, clock: Clock): string {
  return method === 'drover' ? `drover: ${CLOCK_LABEL[clock]}` : METHOD_LABEL[method];
}

/** Every series in legend order. */
export const SERIES: readonly string[] = [
  seriesLabel('drover', 'agent'),
  seriesLabel('drover', 'end-to-end'),
  seriesLabel('drover', 'kernel'),
  seriesLabel('drover', 'datapath'),
  seriesLabel('raw', 'agent'),
  seriesLabel('minimal-script', 'agent'),
  seriesLabel('kube-proxy', 'agent'),
  seriesLabel('full-rerender', 'agent'),
];

const PALETTE = ['#1f77b4', '#17becf', '#2ca02c', '#9467bd', '#7f7f7f', '#bcbd22', '#d62728', '#ff7f0e'];
const color = { field: 'series', type: 'nominal', title: null, scale: { domain: [...SERIES], range: PALETTE }, legend: { orient: 'bottom', columns: 3, labelLimit: 400 } } as const;

/** The runs of one mode and variant, in the result's order. */
function groups(result: BenchResult): Array<{ mode: ProxyMode; variant: string }> {
  const seen = new Map<string, { mode: ProxyMode; variant: string }>();
  for (const r of result.runs) seen.set(`${r.mode}-${r.variant}`, { mode: r.mode, variant: r.variant });
  return [...seen.values()];
}

/**
 * p50 against the number of service ports, log scales, one panel per kind
 * of change (`values` need `services`, `change` and `p50`), one line per
 * value of the `color` field.
 */
function p50LinesSpec(
  title: { text: string; subtitle: string },
  values: readonly Record<string, unknown>[],
  width: number,
  encoding: Record<string, unknown>,
): TopLevelSpec {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    data: { values: [...values] },
    facet: { column: { field: 'change', type: 'nominal', title: null, sort: KINDS.map((k) => KIND_LABEL[k]) } },
    spec: {
      width,
      height: 220,
      mark: { type: 'line', point: { size: 50 }, strokeWidth: 2 },
      encoding: {
        x: { field: 'services', type: 'quantitative', scale: { type: 'log' }, title: 'service ports', axis: { tickCount: 4 } },
        y: { field: 'p50', type: 'quantitative', scale: { type: 'log' }, title: 'p50 (ms)' },
        ...encoding,
      },
    },
    resolve: { scale: { y: 'shared' } },
    config: { font: 'sans-serif', view: { stroke: '#ddd' } },
  } as TopLevelSpec;
}

/** The latency-against-size chart of one mode and variant. */
export function latencySpec(result: BenchResult, mode: ProxyMode, variant: string): TopLevelSpec {
  const rows = statRows(result.runs, result.samples).filter((r) => r.mode === mode && r.variant === variant);
  const values = rows.map((r) => ({
    services: r.services,
    change: KIND_LABEL[r.kind],
    series: seriesLabel(r.method, r.clock),
    who: r.method === 'drover' ? 'drover' : 'baseline',
    p50: r.summary.p50,
    p95: r.summary.p95,
    n: r.summary.n,
  }));
  return p50LinesSpec(
    { text: `${modeLabel(mode, variant)}: p50 time of a change against the number of service ports`, subtitle: 'log scales; baselines are the kernel transaction alone' },
    values,
    170,
    { color, strokeDash: { field: 'who', type: 'nominal', legend: null, scale: { domain: ['drover', 'baseline'], range: [[1, 0], [5, 3]] } } },
  );
}

/** The per-change distribution chart of one mode and variant. */
export function distributionSpec(result: BenchResult, mode: ProxyMode, variant: string): TopLevelSpec {
  const values = result.samples
    .filter((s: Sample) => s.mode === mode && s.variant === variant && s.kind !== 'full-sync')
    .map((s) => ({ services: `${s.services} service ports`, size: s.services, change: KIND_LABEL[s.kind], series: seriesLabel(s.method, s.clock), ms: s.ms }));
  const y = { field: 'series', type: 'nominal', title: null, sort: [...SERIES], axis: { labelLimit: 300 } } as const;
  const x = { field: 'ms', type: 'quantitative', scale: { type: 'log' }, title: 'time (ms, log scale)' } as const;
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: {
      text: `${modeLabel(mode, variant)}: every single change`,
      subtitle: 'boxes: quartiles and median, whiskers: min and max; ticks: the samples; baselines are the kernel transaction alone',
    },
    data: { values },
    facet: {
      row: { field: 'change', type: 'nominal', title: null, sort: KINDS.map((k) => KIND_LABEL[k]) },
      column: { field: 'services', type: 'nominal', title: null, sort: { field: 'size', op: 'min' } },
    },
    spec: {
      width: 320,
      height: 120,
      layer: [
        { mark: { type: 'boxplot', extent: 'min-max', opacity: 0.45, size: 18, median: { color: 'black' } }, encoding: { x, y, color } },
        { mark: { type: 'tick', opacity: 0.35, thickness: 1, size: 8 }, encoding: { x, y, color } },
      ],
    },
    resolve: { scale: { x: 'shared', y: 'independent' } },
    config: { font: 'sans-serif', view: { stroke: '#ddd' } },
  };
}

/** The chart of the first compared mode against the reference mode (IPVS against iptables), or undefined unless two modes ran. */
export function modesSpec(result: BenchResult): TopLevelSpec | undefined {
  const pair = modePairs(modeComparisons(statRows(result.runs, result.samples)))[0];
  if (!pair) return undefined;
  const rows = pair.rows;
  const values = rows.flatMap((r) => [
    { services: r.services, change: KIND_LABEL[r.kind], mode: r.a, p50: r.aSummary.p50 },
    { services: r.services, change: KIND_LABEL[r.kind], mode: r.b, p50: r.bSummary.p50 },
  ]);
  return p50LinesSpec({ text: `${pairTitle(pair.mode, pair.reference)}: drover's agent clock (p50)`, subtitle: 'same kernel; log scales' }, values, 150, {
    color: { field: 'mode', type: 'nominal', title: null, scale: { range: ['#1f77b4', '#d62728'] }, legend: { orient: 'bottom' } },
  });
}

/** Every chart of a run: two per mode and variant, and modes.svg when another mode ran beside iptables mode. */
export function charts(result: BenchResult): Chart[] {
  const perMode = groups(result).flatMap(({ mode, variant }) => {
    const suffix = variant ? `${mode}-${variant}` : mode;
    return [
      { file: `latency-${suffix}.svg`, spec: latencySpec(result, mode, variant) },
      { file: `distributions-${suffix}.svg`, spec: distributionSpec(result, mode, variant) },
    ];
  });
  const modes = modesSpec(result);
  return modes ? [...perMode, { file: 'modes.svg', spec: modes }] : perMode;
}

/** Renders a vega-lite specification to an SVG document. */
export type SvgRenderer = (spec: TopLevelSpec) => Promise<string>;

/**
 * The SVG renderer, headless (vega's `none` renderer: no browser, no
 * canvas), or undefined when vega or vega-lite is not installed (then one
 * line on stderr says so and how to install them; see optional.ts).
 * @throws an error of loading vega or vega-lite other than their absence.
 */
export async function svgRenderer(): Promise<SvgRenderer | undefined> {
  const libs = await loadOptional(['vega', 'vega-lite'], 'SVG charts not written', () => Promise.all([import('vega'), import('vega-lite')]));
  if (!libs) return undefined;
  const [{ parse, View }, { compile }] = libs;
  return async (spec) => {
    const view = new View(parse(compile(spec).spec), { renderer: 'none' });
    try {
      return await view.toSVG();
    } finally {
      view.finalize();
    }
  };
}

/**
 * Compile a vega-lite specification and render it to an SVG document, headless.
 * @throws Error when vega or vega-lite is not installed.
 */
export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const render = await svgRenderer();
  if (!render) throw new Error('vega and vega-lite are needed to render charts (npm install vega vega-lite)');
  return render(spec);
}
