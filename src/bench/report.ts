/**
 * The reports of `drover bench`, built from a BenchResult. Pure: the same
 * result gives the same bytes.
 *
 * - samplesToJSONL / samplesToCSV: every raw sample, one per line;
 * - statRows / ratioRows: order statistics (nearest rank) per group, and
 *   drover's agent clock over each baseline;
 * - buildSummary: summary.md, with the environment, an overview table, a
 *   section per mode and size, and how it was measured.
 */
import { defaultMode, modeDriver, modeNames } from '../modes/registry.ts';
import { modeBench } from './modes/registry.ts';
import type { ProxyMode } from '../proxier/backend.ts';
import { summarise, type Summary } from './stats.ts';
import { BENCH_CLUSTER_CIDR } from './synth.ts';
import { CHANGE_KINDS, CLOCKS, METHODS, type BenchResult, type ChangeKind, type Clock, type DroverRunFacts, type Method, type Sample, type SizeRun } from './types.ts';

/** Every change kind, in report order. */
export const KINDS: readonly ChangeKind[] = ['full-sync', ...CHANGE_KINDS];

/** How reports name a change kind. */
export const KIND_LABEL: Readonly<Record<ChangeKind, string>> = {
  'full-sync': 'full sync',
  'endpoint-removed': 'endpoint removed',
  'endpoint-added': 'endpoint added',
  'service-added': 'service added',
  'service-removed': 'service removed',
};

/** How reports name a method. */
export const METHOD_LABEL: Readonly<Record<Method, string>> = {
  drover: 'drover',
  raw: 'raw minimal',
  'minimal-script': 'minimal script',
  'kube-proxy': 'kube-proxy-style',
  'full-rerender': 'full re-render',
};

/** How reports name a clock. */
export const CLOCK_LABEL: Readonly<Record<Clock, string>> = { agent: 'agent', 'end-to-end': 'end to end', kernel: 'kernel', datapath: 'data path' };

/** A mode and its flavour for reports, e.g. "iptables (nft)". */
export function modeLabel(mode: ProxyMode, variant: string): string {
  return variant ? `${mode} (${variant})` : mode;
}

/** The columns of samples.csv, in order. */
export const CSV_COLUMNS = ['mode', 'variant', 'services', 'endpoints', 'kind', 'method', 'clock', 'iteration', 'ms', 'tries', 'readback_ms', 'bytes', 'rss_kb', 'kernel_method'] as const;

function csvCell(v: string | number | undefined): string {
  if (v === undefined) return '';
  const s = String(v);
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** samples.csv: a header line, then one line per sample; a field a sample lacks is empty. */
export function samplesToCSV(samples: readonly Sample[]): string {
  const lines = [CSV_COLUMNS.join(',')];
  for (const s of samples) {
    lines.push(
      [s.mode, s.variant, s.services, s.endpoints, s.kind, s.method, s.clock, s.iteration, s.ms, s.tries, s.readbackMs, s.bytes, s.rssKb, s.kernelMethod].map(csvCell).join(','),
    );
  }
  return `${lines.join('\n')}\n`;
}

/** samples.jsonl: one JSON object per sample and line, keys in a fixed order, absent fields left out. */
export function samplesToJSONL(samples: readonly Sample[]): string {
  return samples
    .map((s) => {
      const o: Record<string, unknown> = {
        mode: s.mode,
        variant: s.variant,
        services: s.services,
        endpoints: s.endpoints,
        kind: s.kind,
        method: s.method,
        clock: s.clock,
        iteration: s.iteration,
        ms: s.ms,
      };
      if (s.tries !== undefined) o.tries = s.tries;
      if (s.readbackMs !== undefined) o.readbackMs = s.readbackMs;
      if (s.bytes !== undefined) o.bytes = s.bytes;
      if (s.rssKb !== undefined) o.rssKb = s.rssKb;
      if (s.kernelMethod !== undefined) o.kernelMethod = s.kernelMethod;
      return `${JSON.stringify(o)}\n`;
    })
    .join('');
}

/** Order statistics of one group of samples (ms). */
export interface StatRow {
  readonly mode: ProxyMode;
  readonly variant: string;
  readonly services: number;
  readonly kind: ChangeKind;
  readonly method: Method;
  readonly clock: Clock;
  readonly summary: Summary;
}

const groupKey = (s: { mode: string; variant: string; services: number; kind: string; method: string; clock: string }): string =>
  `${s.mode}|${s.variant}|${s.services}|${s.kind}|${s.method}|${s.clock}`;

/**
 * One row per (mode, variant, services, kind, method, clock) that has
 * samples, ordered by the runs' order, then kind, method and clock in report
 * order.
 */
export function statRows(runs: readonly SizeRun[], samples: readonly Sample[]): StatRow[] {
  const groups = new Map<string, number[]>();
  for (const s of samples) {
    const k = groupKey(s);
    const list = groups.get(k);
    if (list) list.push(s.ms);
    else groups.set(k, [s.ms]);
  }
  const rows: StatRow[] = [];
  for (const r of runs) {
    for (const kind of KINDS) {
      for (const method of METHODS) {
        for (const clock of CLOCKS) {
          const ms = groups.get(groupKey({ ...r, kind, method, clock }));
          if (ms) rows.push({ mode: r.mode, variant: r.variant, services: r.services, kind, method, clock, summary: summarise(ms) });
        }
      }
    }
  }
  return rows;
}

/** drover's agent clock against one baseline, for one kind of change. */
export interface Ratio {
  readonly method: Exclude<Method, 'drover'>;
  /** The baseline's p50 and p95, ms. */
  readonly p50: number;
  readonly p95: number;
  /** drover's p50 over the baseline's p50. */
  readonly ratioP50: number;
  /** drover's p95 over the baseline's p95. */
  readonly ratioP95: number;
}

/** drover's agent clock and its ratios to every baseline measured for one mode, size and kind of change. */
export interface RatioRow {
  readonly mode: ProxyMode;
  readonly variant: string;
  readonly services: number;
  readonly kind: ChangeKind;
  /** drover's agent clock. */
  readonly drover: Summary;
  /** drover's end-to-end, kernel and data-path clocks, when measured. */
  readonly endToEnd?: Summary;
  readonly kernel?: Summary;
  readonly datapath?: Summary;
  /** One per baseline measured, in report order. */
  readonly ratios: readonly Ratio[];
}

/** One row per mode, size and single change kind that drover measured. */
export function ratioRows(rows: readonly StatRow[]): RatioRow[] {
  const find = (r: StatRow, method: Method, clock: Clock): Summary | undefined =>
    rows.find((x) => x.mode === r.mode && x.variant === r.variant && x.services === r.services && x.kind === r.kind && x.method === method && x.clock === clock)
      ?.summary;
  const out: RatioRow[] = [];
  for (const r of rows) {
    if (r.method !== 'drover' || r.clock !== 'agent' || r.kind === 'full-sync') continue;
    const ratios: Ratio[] = [];
    for (const method of METHODS) {
      if (method === 'drover') continue;
      const b = find(r, method, 'agent');
      if (b) ratios.push({ method, p50: b.p50, p95: b.p95, ratioP50: r.summary.p50 / b.p50, ratioP95: r.summary.p95 / b.p95 });
    }
    const endToEnd = find(r, 'drover', 'end-to-end');
    const kernel = find(r, 'drover', 'kernel');
    const datapath = find(r, 'drover', 'datapath');
    out.push({
      mode: r.mode,
      variant: r.variant,
      services: r.services,
      kind: r.kind,
      drover: r.summary,
      ...(endToEnd ? { endToEnd } : {}),
      ...(kernel ? { kernel } : {}),
      ...(datapath ? { datapath } : {}),
      ratios,
    });
  }
  return out;
}

/** A time in ms as reports print it: one decimal. */
export function fmtMs(ms: number): string {
  return ms.toFixed(1);
}

/** A ratio as reports print it: two decimals, or two significant digits below 0.1 (e.g. 0.0035). */
export function fmtRatio(x: number): string {
  return x !== 0 && Math.abs(x) < 0.095 ? x.toPrecision(2) : x.toFixed(2);
}

const thousands = (n: number): string => String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');

function table(header: readonly string[], align: readonly ('l' | 'r')[], rows: readonly (readonly string[])[]): string[] {
  return [`| ${header.join(' | ')} |`, `|${align.map((a) => (a === 'r' ? '---:' : '---')).join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)];
}

/** The overview table: p50 per clock (the end-to-end clock next to the agent's) and baseline, and drover/raw and drover/kube-proxy at p50, per mode, size and change. */
export function overviewTable(ratios: readonly RatioRow[]): string[] {
  const dash = '–';
  const base = (r: RatioRow, m: Method): Ratio | undefined => r.ratios.find((x) => x.method === m);
  return table(
    ['mode', 'services', 'change', 'agent', 'end to end', 'kernel', 'data path', 'raw', 'kube-proxy-style', 'drover/raw', 'drover/kube-proxy'],
    ['l', 'r', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
    ratios.map((r) => [
      modeLabel(r.mode, r.variant),
      String(r.services),
      KIND_LABEL[r.kind],
      fmtMs(r.drover.p50),
      r.endToEnd ? fmtMs(r.endToEnd.p50) : dash,
      r.kernel ? fmtMs(r.kernel.p50) : dash,
      r.datapath ? fmtMs(r.datapath.p50) : dash,
      base(r, 'raw') ? fmtMs(base(r, 'raw')!.p50) : dash,
      base(r, 'kube-proxy') ? fmtMs(base(r, 'kube-proxy')!.p50) : dash,
      base(r, 'raw') ? fmtRatio(base(r, 'raw')!.ratioP50) : dash,
      base(r, 'kube-proxy') ? fmtRatio(base(r, 'kube-proxy')!.ratioP50) : dash,
    ]),
  );
}

/** The statistics table of one mode and size: every change, method and clock. */
export function sizeTable(rows: readonly StatRow[]): string[] {
  return table(
    ['change', 'method', 'clock', 'n', 'p50', 'p95', 'p99', 'max'],
    ['l', 'l', 'l', 'r', 'r', 'r', 'r', 'r'],
    rows.map((r) => [
      KIND_LABEL[r.kind],
      METHOD_LABEL[r.method],
      CLOCK_LABEL[r.clock],
      String(r.summary.n),
      fmtMs(r.summary.p50),
      fmtMs(r.summary.p95),
      fmtMs(r.summary.p99),
      fmtMs(r.summary.max),
    ]),
  );
}

/** The ratio table of one mode and size: drover's agent clock over each baseline, at p50 and p95. */
export function ratioTable(ratios: readonly RatioRow[]): string[] {
  const methods = METHODS.filter((m) => m !== 'drover' && ratios.some((r) => r.ratios.some((x) => x.method === m)));
  const header = ['change', ...methods.flatMap((m) => [`drover/${METHOD_LABEL[m]} p50`, 'p95'])];
  return table(
    header,
    header.map((_, i) => (i === 0 ? 'l' : 'r')),
    ratios.map((r) => [
      KIND_LABEL[r.kind],
      ...methods.flatMap((m) => {
        const x = r.ratios.find((y) => y.method === m);
        return x ? [fmtRatio(x.ratioP50), fmtRatio(x.ratioP95)] : ['–', '–'];
      }),
    ]),
  );
}

/** One mode set against another for one size and kind of change: drover's agent clock in each, at p50 and p99. */
export interface ModeComparison {
  readonly services: number;
  readonly kind: ChangeKind;
  /** The compared mode and the reference mode (the registry's first), e.g. "ipvs" and "iptables". */
  readonly aMode: ProxyMode;
  readonly bMode: ProxyMode;
  /** Mode labels (modeLabel), e.g. "ipvs (nft)" and "iptables (nft)". */
  readonly a: string;
  readonly b: string;
  readonly aSummary: Summary;
  readonly bSummary: Summary;
  /** a's p50 over b's p50. */
  readonly ratioP50: number;
  /** a's p99 over b's p99. */
  readonly ratioP99: number;
}

/**
 * drover's agent clock of every other mode against the reference mode (the
 * registry's first, iptables), for every size and kind of change (the full
 * sync included) that both measured in the run; empty unless two modes ran.
 * With several iptables variants, the same variant as the other mode's
 * iptables rules is used (the first one for a mode without iptables rules). Sorted by mode (registry order), size and kind.
 */
export function modeComparisons(rows: readonly StatRow[]): ModeComparison[] {
  const reference = defaultMode();
  const order = modeNames();
  const agent = rows.filter((r) => r.method === 'drover' && r.clock === 'agent');
  const out: ModeComparison[] = [];
  for (const a of agent.filter((r) => r.mode !== reference)) {
    const same = (r: StatRow): boolean => r.mode === reference && r.services === a.services && r.kind === a.kind;
    // A mode without iptables rules (nftables) has a variant of its own: then the reference's first variant.
    const b = agent.find((r) => same(r) && r.variant === a.variant) ?? agent.find(same);
    if (!b) continue;
    out.push({
      services: a.services,
      kind: a.kind,
      aMode: a.mode,
      bMode: b.mode,
      a: modeLabel(a.mode, a.variant),
      b: modeLabel(b.mode, b.variant),
      aSummary: a.summary,
      bSummary: b.summary,
      ratioP50: a.summary.p50 / b.summary.p50,
      ratioP99: a.summary.p99 / b.summary.p99,
    });
  }
  return out.sort((x, y) => order.indexOf(x.aMode) - order.indexOf(y.aMode) || x.services - y.services || KINDS.indexOf(x.kind) - KINDS.indexOf(y.kind));
}

/** The comparisons of {@link modeComparisons} grouped by compared mode, in registry order. */
export function modePairs(rows: readonly ModeComparison[]): Array<{ readonly mode: ProxyMode; readonly reference: ProxyMode; readonly rows: ModeComparison[] }> {
  const modes = [...new Set(rows.map((r) => r.aMode))];
  return modes.map((mode) => {
    const mine = rows.filter((r) => r.aMode === mode);
    return { mode, reference: mine[0]!.bMode, rows: mine };
  });
}

/** "IPVS mode against iptables mode" (the drivers' titles). */
export function pairTitle(mode: ProxyMode, reference: ProxyMode): string {
  return `${modeDriver(mode).title} mode against ${modeDriver(reference).title} mode`;
}

/** The table of one compared mode's {@link modeComparisons}: p50 and p99 of each mode, and the ratios. */
export function modeTable(rows: readonly ModeComparison[]): string[] {
  const a = rows[0]?.aMode ?? '';
  const b = rows[0]?.bMode ?? '';
  return table(
    ['services', 'change', `${a} p50`, `${b} p50`, `${a}/${b} p50`, `${a} p99`, `${b} p99`, `${a}/${b} p99`],
    ['r', 'l', 'r', 'r', 'r', 'r', 'r', 'r'],
    rows.map((r) => [
      String(r.services),
      KIND_LABEL[r.kind],
      fmtMs(r.aSummary.p50),
      fmtMs(r.bSummary.p50),
      fmtRatio(r.ratioP50),
      fmtMs(r.aSummary.p99),
      fmtMs(r.bSummary.p99),
      fmtRatio(r.ratioP99),
    ]),
  );
}

/** The "how it was measured" section of summary.md. */
export function methodText(result: BenchResult): string[] {
  const s = result.settings;
  // The modes whose agent runs in a worker inside the node namespace (their netlink sockets act on the namespace of their process).
  const workers = modeNames().filter((m) => modeBench(m).placement === 'namespace').map((m) => `${modeDriver(m).title} mode`).join(' and ');
  return [
    '## How it was measured',
    '',
    `Each size runs in a fresh set of network namespaces: a node namespace that drover programs, a client namespace (192.168.100.2, outside the cluster CIDR ${BENCH_CLUSTER_CIDR}), and two backend namespaces with HTTP echo servers on four ports each. Of the service ports, ${s.clockServices} are clock services with two real endpoints each; the others have ${s.endpoints} fake endpoints each. Every change is made on a clock service or on a new service port with real endpoints, so that its effect can be seen by real connections.`,
    '',
    'Each iteration makes four single changes, through drover\'s partial sync (Backend.sync): one endpoint removed from a clock service (2 → 1 endpoints), the same endpoint added back, one service port added (2 real endpoints), and the same port removed. Times are in ms, from the moment the change is seen, on the machine\'s monotonic clock:',
    '',
    `- **agent**: until drover's sync returned: the snapshot diff, the rendering and the kernel transaction, in-process (${workers}: in a worker process inside the node namespace, because their netlink sockets act on the namespace of their process; all processes share the machine's monotonic clock).`,
    "- **end to end**: the same changes made to the manifest files that a real `drover run` process watches (started in the node namespace after the other clocks, on the starting state written as files: the synthetic services in one `services.json`, each clock service and each added service in a file of its own; `--min-sync-period 0s`, so that a change is not held back by the previous one's sync). From just before the file is written (a temporary file renamed over it) or removed, until a read-back of the kernel, as on the kernel clock, shows the change; the read-backs start once drover run logged its next sync done. It adds to the agent clock the file watch and its 60 ms debounce, reading and normalising the file, building the desired state and a process of its own.",
    "- **kernel**, by commit notification (nftables mode, iptables-nft; `kernel_method` `notification` in the samples): a listener process in the node namespace is a member of netfilter's NFNLGRP_NFTABLES group, where nf_tables announces every committed transaction, each object it changed and then one NFT_MSG_NEWGEN with the new generation id; it stamps each NEWGEN when it reads it. Once the agent returned, the namespace's generation id (NFT_MSG_GETGEN) names the transaction that ended the change; the time is that transaction's stamp. No read-back is in it. A change whose notification was dropped (the listener's receive buffer overflowed: ENOBUFS) has no kernel sample; the size's section lists such changes. While the listener runs, the kernel builds a notification for every object a transaction changes, which the agent clock pays too (it is closed before the final full sync and drover run).",
    "- **kernel**, by read-back (iptables-legacy and IPVS mode, whose kernels announce nothing; `kernel_method` `read-back`): read-backs run back to back from when the agent returned; the time is when the first read-back that shows the change was parsed. iptables mode reads `iptables-save -t nat` in the node namespace (the service port's chains exactly as rendered, or their absence), so the time includes one whole read-back, whose own duration is `readback_ms` in the samples. IPVS mode reads the changed virtual server and its real servers over netlink (GET_SERVICE and a dump of its destinations) and, when a service comes or goes, the addresses of kube-ipvs0 (which holds every ClusterIP).",
    `- **data path**: new TCP connections from the client namespace run back to back from when the agent returned, by one long-lived prober process; the time is when the first connection that shows the change was opened. Endpoint added: the first connection answered by the new endpoint (each connection has a 1/2 chance, so the time is late by one connection on average, by k or more with probability 2^-k; never early, since only the new rules reach that endpoint). Endpoint removed: the first of ${s.removalConfirm} connections in a row answered by the surviving endpoint (with the old rules still in place this happens by chance with probability 2^-${s.removalConfirm}, the false-positive bound). Service added: the first connection answered at the new ClusterIP (without the rules nothing answers there, so no false positive). Service removed: the first of ${s.failConfirm} connections in a row that got no answer (refused, unreachable, or nothing within 1 s); the old rules would have answered.`,
    '',
    'The kernel and data-path polling start when the agent has returned (the transaction has committed by then) and run at the same time, so neither slows the agent down; they compete with each other for the CPU.',
    ...(result.runs.some((r) => r.detailSkipped)
      ? ['', "At the sizes whose section says so (`--detail-max`), the kernel clock by read-back, the end-to-end clock and the kube-proxy-style baseline were not measured: only drover's agent and data-path clocks, the kernel clock by commit notification, the raw baseline, and drover run's first sync and RSS."]
      : []),
    '',
    'Baselines make the same changes on the same kernel state, taking turns with drover within each iteration, with their payloads and desired state built beforehand, off the clock.',
    ...s.modes.flatMap((m) => modeBench(m).methodText(s)),
    '',
    "`bytes` in the samples is the text drover or the baseline handed to iptables-restore, ipset restore or nft, or the nf_tables netlink datagram; IPVS netlink messages are not counted.",
    '',
    `Percentiles are nearest-rank (with fewer than 100 samples, p99 is the largest). Ratios are drover's agent clock over the baseline's time at the same percentile: a ratio near 1 means drover adds little to the kernel's own cost. Peak RSS is that of the process that runs drover's agent (process.resourceUsage().maxRSS): the benchmark process in iptables mode, whose peak only grows, so sizes run in ascending order; a fresh worker per size in ${workers}. The RSS of drover run is that of a real proxy process at that size, from its /proc/PID/status: VmRSS 5 s after its first sync was logged, once it has collected that sync's garbage (and after each change, \`rss_kb\` in the end-to-end samples), and VmHWM, its peak, after the last change.`,
  ];
}

/**
 * The table of the `drover run` processes of the end-to-end clock: per mode
 * and size, its build, its first sync after start, its RSS then and its
 * peak. Empty (no lines at all) when no run has one (reports from before it
 * was measured).
 */
export function droverRunTable(runs: readonly SizeRun[]): string[] {
  const measured = runs.filter((r) => r.droverRun);
  if (measured.length === 0) return [];
  return table(
    ['mode', 'services', 'build', 'first sync after start', 'RSS after the first sync', 'peak RSS'],
    ['l', 'r', 'l', 'r', 'r', 'r'],
    measured.map((r) => {
      const f = r.droverRun!;
      return [modeLabel(r.mode, r.variant), String(r.services), f.entry, `${fmtMs(f.firstSyncMs)} ms`, `${thousands(f.rssKb)} kB`, `${thousands(f.peakRssKb)} kB`];
    }),
  );
}

/** The line of a size's section about the `drover run` process of the end-to-end clock. */
export function droverRunLine(facts: DroverRunFacts): string {
  const build = facts.entry === 'dist' ? 'the compiled build' : 'the TypeScript sources through tsx';
  return `- drover run (end-to-end clock, ${build}): first sync ${fmtMs(facts.firstSyncMs)} ms after start; RSS ${thousands(facts.rssKb)} kB after the first sync, peak ${thousands(facts.peakRssKb)} kB.`;
}

/** "N changes of each kind", or per size when the sizes (merged from several runs) differ. */
function changesText(result: BenchResult): string {
  const counts = [...new Set(result.runs.map((r) => r.changes))];
  if (counts.length <= 1) return `${counts[0] ?? result.settings.changes} changes of each kind`;
  return `changes of each kind: ${result.runs.map((r) => `${r.services} services (${r.mode}) ${r.changes}`).join(', ')}`;
}

/** summary.md: see the module comment. */
export function buildSummary(result: BenchResult): string {
  const env = result.environment;
  const s = result.settings;
  const rows = statRows(result.runs, result.samples);
  const ratios = ratioRows(rows);
  const where = env.guest ? `emulated guest (${env.guestReason}): **ratios only**` : 'host (no emulated guest detected)';
  // The sizes asked for that no run covers: a report written while the run goes on, or left by one that failed.
  const pending = s.modes.flatMap((m) => s.services.filter((n) => !result.runs.some((r) => r.mode === m && r.services === n)).map((n) => `${m} at ${n}`));
  const out: string[] = [
    '# drover bench: rule-update latency',
    '',
    ...table(
      ['', 'environment'],
      ['l', 'l'],
      [
        ['date', env.date],
        ['machine', where],
        ['kernel', `Linux ${env.kernel}`],
        ...Object.entries(env.iptables).map(([v, version]) => [`iptables-${v}`, version]),
        ['CPUs', `${env.cpus} × ${env.cpuModel}`],
        ['load average (1 min) at start', env.loadAverage.toFixed(2)],
        ['software', `drover ${env.drover}, Node.js ${env.node}`],
        [
          'run',
          `modes ${s.modes.join(', ')}; ${s.services.join(', ')} service ports (${s.clockServices} of them clock services); ${s.endpoints} endpoints per synthetic service; ${changesText(result)}`,
        ],
        ...(pending.length > 0 ? [['not measured yet', pending.join(', ')]] : []),
      ],
    ),
    '',
  ];
  if (env.guest) {
    out.push(
      `> **Ratios only.** This run was made in an emulated guest (${env.guestReason}). Its absolute times say little about a real node; compare the ratios, which set drover against baselines measured in the same run.`,
      '',
    );
  }
  out.push(
    '## Overview',
    '',
    'p50 in ms for each clock and baseline; the ratios are drover\'s agent clock over the baseline\'s kernel transaction, at p50.',
    '',
    ...overviewTable(ratios),
    '',
    ...(result.runs.some((r) => r.droverRun)
      ? ['The `drover run` process of the end-to-end clock (RSS from /proc/PID/status: VmRSS, and VmHWM for the peak):', '', ...droverRunTable(result.runs), '']
      : []),
  );
  for (const pair of modePairs(modeComparisons(rows))) {
    out.push(
      `## ${pairTitle(pair.mode, pair.reference)}`,
      '',
      `drover's agent clock in each mode, measured on the same kernel; below 1, ${modeDriver(pair.mode).title} mode is faster.`,
      '',
      ...modeTable(pair.rows),
      '',
    );
  }
  for (const run of result.runs) {
    const mine = rows.filter((r) => r.mode === run.mode && r.variant === run.variant && r.services === run.services);
    const fullRow = (clock: Clock, method: Method = 'drover'): StatRow | undefined => mine.find((x) => x.kind === 'full-sync' && x.method === method && x.clock === clock);
    const full = (clock: Clock): string => {
      const r = fullRow(clock);
      return r ? `${fmtMs(r.summary.p50)} ms` : '–';
    };
    const tool = fullRow('agent', 'full-rerender');
    const drover = fullRow('agent');
    const toolLine = tool && drover ? [`- The same ruleset written into empty tables by one transaction of the mode's tool (full sync baseline): ${fmtMs(tool.summary.p50)} ms; drover's full sync over it: ${fmtRatio(drover.summary.p50 / tool.summary.p50)}.`] : [];
    const kernelLine = run.kernelClock
      ? [`- Kernel clock: ${run.kernelClock === 'notification' ? 'nf_tables commit notifications (NFT_MSG_NEWGEN)' : 'read-backs of the kernel'}${run.kernelLost?.length ? `; no sample for ${run.kernelLost.length} change(s): ${run.kernelLost.join('; ')}` : ''}.`]
      : [];
    // Older reports did not time the final full sync.
    const resync = run.resyncMs === undefined ? '' : `: agent ${fmtMs(run.resyncMs)} ms, what a restart or a periodic resync costs (read back, compare, write nothing)`;
    out.push(
      `## ${modeLabel(run.mode, run.variant)}, ${run.services} services`,
      '',
      `- ${run.changes} changes of each kind.`,
      `- Full sync from empty tables: agent ${full('agent')}, kernel ${full('kernel')}, data path ${full('datapath')} (${run.fullSyncTransactions} transaction${run.fullSyncTransactions === 1 ? '' : 's'}).`,
      ...toolLine,
      ...kernelLine,
      `- Peak RSS of the process that runs drover's agent: ${thousands(run.peakRssKb)} kB.`,
      ...(run.droverRun ? [droverRunLine(run.droverRun)] : []),
      ...(run.droverRunFailed ? [`- The \`drover run\` of the end-to-end clock failed: ${run.droverRunFailed}.`] : []),
      `- Full re-render: ${run.fullRerenderSkipped ?? 'measured on "service added"; it stands for every change'}.`,
      ...(run.detailSkipped ? [`- Kernel clock by read-back, end-to-end clock and kube-proxy-style baseline: ${run.detailSkipped}.`] : []),
      run.consistent
        ? `- After the run, a full sync of the starting state found nothing to repair${resync}.`
        : '- **After the run, a full sync of the starting state had to repair the kernel**: a baseline did not put its change back exactly.',
      '',
      ...sizeTable(mine.filter((r) => r.kind !== 'full-sync')),
      '',
      'drover\'s agent clock over each baseline:',
      '',
      ...ratioTable(ratios.filter((r) => r.mode === run.mode && r.variant === run.variant && r.services === run.services)),
      '',
    );
  }
  out.push(...methodText(result), '');
  return out.join('\n');
}
