/** The benchmark's reports from fixed samples: exact CSV, JSONL and tables. */
import test from 'ava';
import { charts, renderSvg } from '../../src/bench/charts.ts';
import { buildSummary, droverRunTable, modeComparisons, modePairs, modeTable, overviewTable, ratioRows, ratioTable, samplesToCSV, samplesToJSONL, sizeTable, statRows } from '../../src/bench/report.ts';
import { SETTINGS } from '../support/bench.ts';
import type { BenchResult, ChangeKind, Clock, Method, Sample, SizeRun } from '../../src/bench/types.ts';

function samples(kind: ChangeKind, method: Method, clock: Clock, ms: number[], extra: Partial<Sample> = {}): Sample[] {
  return ms.map((v, iteration) => ({ mode: 'iptables', variant: 'nft', services: 100, endpoints: 10, kind, method, clock, iteration, ms: v, ...extra }));
}

const RUN: SizeRun = {
  mode: 'iptables',
  variant: 'nft',
  services: 100,
  endpoints: 10,
  changes: 4,
  fullSyncTransactions: 1,
  consistent: true,
  resyncMs: 180.456,
  peakRssKb: 123456,
  droverRun: { entry: 'dist', firstSyncMs: 1234.5678, rssKb: 98765, peakRssKb: 104857 },
};

const SAMPLES: Sample[] = [
  ...samples('full-sync', 'drover', 'agent', [250], { bytes: 456583 }),
  ...samples('full-sync', 'drover', 'kernel', [400], { tries: 1, readbackMs: 98.5, kernelMethod: 'read-back' }),
  ...samples('full-sync', 'drover', 'datapath', [251.25], { tries: 1 }),
  ...samples('endpoint-removed', 'drover', 'agent', [40, 10, 30, 20]),
  ...samples('endpoint-removed', 'drover', 'kernel', [110, 120, 130, 140]),
  ...samples('endpoint-removed', 'drover', 'datapath', [41, 11, 31, 21]),
  ...samples('endpoint-removed', 'drover', 'end-to-end', [300, 200, 500, 400], { tries: 1, readbackMs: 60, rssKb: 97000 }),
  ...samples('endpoint-removed', 'raw', 'agent', [8, 16, 24, 32]),
  ...samples('endpoint-removed', 'kube-proxy', 'agent', [50, 100, 150, 200]),
  ...samples('service-added', 'drover', 'agent', [12, 14, 16, 18]),
  ...samples('service-added', 'raw', 'agent', [12, 14, 16, 18]),
  ...samples('service-added', 'full-rerender', 'agent', [240]),
];

const RESULT: BenchResult = {
  environment: {
    date: '2026-01-02T03:04:05.000Z',
    guest: false,
    guestReason: 'none detected',
    kernel: '6.1.0-test',
    iptables: { nft: 'iptables v1.8.9 (nf_tables)' },
    cpus: 2,
    cpuModel: 'Test CPU',
    loadAverage: 0.5,
    node: 'v20.0.0',
    drover: '0.1.0',
  },
  settings: SETTINGS,
  runs: [RUN],
  samples: SAMPLES,
};

test('samples.csv: a header, then one line per sample with empty cells for absent fields', (t) => {
  const csv = samplesToCSV(SAMPLES.slice(0, 5));
  t.is(
    csv,
    [
      'mode,variant,services,endpoints,kind,method,clock,iteration,ms,tries,readback_ms,bytes,rss_kb,kernel_method',
      'iptables,nft,100,10,full-sync,drover,agent,0,250,,,456583,,',
      'iptables,nft,100,10,full-sync,drover,kernel,0,400,1,98.5,,,read-back',
      'iptables,nft,100,10,full-sync,drover,datapath,0,251.25,1,,,,',
      'iptables,nft,100,10,endpoint-removed,drover,agent,0,40,,,,,',
      'iptables,nft,100,10,endpoint-removed,drover,agent,1,10,,,,,',
      '',
    ].join('\n'),
  );
  t.is(samplesToCSV(SAMPLES.filter((s) => s.clock === 'end-to-end').slice(0, 1)).split('\n')[1], 'iptables,nft,100,10,endpoint-removed,drover,end-to-end,0,300,1,60,,97000,');
  t.is(samplesToCSV(SAMPLES).split('\n').length, SAMPLES.length + 2);
});

test('samples.jsonl: one object per line that parses back to the sample', (t) => {
  const jsonl = samplesToJSONL(SAMPLES);
  const lines = jsonl.trimEnd().split('\n');
  t.is(
    lines.find((l) => l.includes('"end-to-end"')),
    '{"mode":"iptables","variant":"nft","services":100,"endpoints":10,"kind":"endpoint-removed","method":"drover","clock":"end-to-end","iteration":0,"ms":300,"tries":1,"readbackMs":60,"rssKb":97000}',
  );
  t.is(lines[1], '{"mode":"iptables","variant":"nft","services":100,"endpoints":10,"kind":"full-sync","method":"drover","clock":"kernel","iteration":0,"ms":400,"tries":1,"readbackMs":98.5,"kernelMethod":"read-back"}');
  t.deepEqual(
    lines.map((l) => JSON.parse(l)),
    SAMPLES,
  );
});

test('statistics per group are nearest-rank, in report order', (t) => {
  const rows = statRows([RUN], SAMPLES);
  t.deepEqual(
    rows.map((r) => `${r.kind} ${r.method} ${r.clock} ${r.summary.n} ${r.summary.p50} ${r.summary.p95} ${r.summary.p99} ${r.summary.max}`),
    [
      'full-sync drover agent 1 250 250 250 250',
      'full-sync drover kernel 1 400 400 400 400',
      'full-sync drover datapath 1 251.25 251.25 251.25 251.25',
      'endpoint-removed drover agent 4 20 40 40 40',
      'endpoint-removed drover end-to-end 4 300 500 500 500',
      'endpoint-removed drover kernel 4 120 140 140 140',
      'endpoint-removed drover datapath 4 21 41 41 41',
      'endpoint-removed raw agent 4 16 32 32 32',
      'endpoint-removed kube-proxy agent 4 100 200 200 200',
      'service-added drover agent 4 14 18 18 18',
      'service-added raw agent 4 14 18 18 18',
      'service-added full-rerender agent 1 240 240 240 240',
    ],
  );
});

test('the overview, size and ratio tables, exactly', (t) => {
  const rows = statRows([RUN], SAMPLES);
  const ratios = ratioRows(rows);
  t.deepEqual(overviewTable(ratios), [
    '| mode | services | change | agent | end to end | kernel | data path | raw | kube-proxy-style | drover/raw | drover/kube-proxy |',
    '|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    '| iptables (nft) | 100 | endpoint removed | 20.0 | 300.0 | 120.0 | 21.0 | 16.0 | 100.0 | 1.25 | 0.20 |',
    '| iptables (nft) | 100 | service added | 14.0 | – | – | – | 14.0 | – | 1.00 | – |',
  ]);
  t.deepEqual(sizeTable(rows.filter((r) => r.kind === 'endpoint-removed')), [
    '| change | method | clock | n | p50 | p95 | p99 | max |',
    '|---|---|---|---:|---:|---:|---:|---:|',
    '| endpoint removed | drover | agent | 4 | 20.0 | 40.0 | 40.0 | 40.0 |',
    '| endpoint removed | drover | end to end | 4 | 300.0 | 500.0 | 500.0 | 500.0 |',
    '| endpoint removed | drover | kernel | 4 | 120.0 | 140.0 | 140.0 | 140.0 |',
    '| endpoint removed | drover | data path | 4 | 21.0 | 41.0 | 41.0 | 41.0 |',
    '| endpoint removed | raw minimal | agent | 4 | 16.0 | 32.0 | 32.0 | 32.0 |',
    '| endpoint removed | kube-proxy-style | agent | 4 | 100.0 | 200.0 | 200.0 | 200.0 |',
  ]);
  t.deepEqual(ratioTable(ratios), [
    '| change | drover/raw minimal p50 | p95 | drover/kube-proxy-style p50 | p95 | drover/full re-render p50 | p95 |',
    '|---|---:|---:|---:|---:|---:|---:|',
    '| endpoint removed | 1.25 | 1.25 | 0.20 | 0.20 | – | – |',
    '| service added | 1.00 | 1.00 | – | – | 0.058 | 0.075 |',
  ]);
});

test('summary.md: environment, overview, one section per size, the method', (t) => {
  const md = buildSummary(RESULT);
  const lines = md.split('\n');
  t.deepEqual(lines.slice(0, 13), [
    '# drover bench: rule-update latency',
    '',
    '|  | environment |',
    '|---|---|',
    '| date | 2026-01-02T03:04:05.000Z |',
    '| machine | host (no emulated guest detected) |',
    '| kernel | Linux 6.1.0-test |',
    '| iptables-nft | iptables v1.8.9 (nf_tables) |',
    '| CPUs | 2 × Test CPU |',
    '| load average (1 min) at start | 0.50 |',
    '| software | drover 0.1.0, Node.js v20.0.0 |',
    '| run | modes iptables; 100 service ports (4 of them clock services); 10 endpoints per synthetic service; 4 changes of each kind |',
    '',
  ]);
  t.true(md.includes('\n## Overview\n'));
  t.true(md.includes('\n## iptables (nft), 100 services\n'));
  t.true(md.includes('- Full sync from empty tables: agent 250.0 ms, kernel 400.0 ms, data path 251.3 ms (1 transaction).\n'));
  t.true(
    md.includes(
      [
        'The `drover run` process of the end-to-end clock (RSS from /proc/PID/status: VmRSS, and VmHWM for the peak):',
        '',
        '| mode | services | build | first sync after start | RSS after the first sync | peak RSS |',
        '|---|---:|---|---:|---:|---:|',
        '| iptables (nft) | 100 | dist | 1234.6 ms | 98,765 kB | 104,857 kB |',
        '',
      ].join('\n'),
    ),
  );
  t.true(md.includes("- Peak RSS of the process that runs drover's agent: 123,456 kB.\n- drover run (end-to-end clock, the compiled build): first sync 1234.6 ms after start; RSS 98,765 kB after the first sync, peak 104,857 kB.\n"));
  t.false(md.includes('## IPVS mode against iptables mode'), 'one mode: no comparison');
  t.false(md.includes('IPVS mode (each timed'), 'no IPVS baselines described for an iptables-only run');
  t.true(md.includes('- After the run, a full sync of the starting state found nothing to repair: agent 180.5 ms, what a restart or a periodic resync costs (read back, compare, write nothing).\n'));
  t.true(md.includes('\n## How it was measured\n'));
  t.true(md.includes('probability 2^-10, the false-positive bound'));
  t.false(md.includes('Ratios only'));
});

test('summary.md of a run read back without the final full sync time says only that it found nothing to repair', (t) => {
  const { resyncMs: _, ...older } = RUN;
  const { droverRun: __, ...oldest } = older;
  const md = buildSummary({ ...RESULT, runs: [oldest], samples: SAMPLES.filter((s) => s.clock !== 'end-to-end') });
  t.true(md.includes('- After the run, a full sync of the starting state found nothing to repair.\n'));
  t.false(md.includes('- drover run (end-to-end clock)'), 'no drover run line without its facts');
  t.false(md.includes('The `drover run` process of the end-to-end clock'), 'no drover run table without its facts');
  t.deepEqual(droverRunTable([oldest]), []);
  t.true(md.includes('| iptables (nft) | 100 | endpoint removed | 20.0 | – | 120.0 |'), 'no end-to-end clock: a dash');
});

test('summary.md names a drover run that failed above --detail-max, and the run goes on without its facts', (t) => {
  const { droverRun: _, ...failedRun } = RUN;
  const md = buildSummary({ ...RESULT, runs: [{ ...failedRun, droverRunFailed: 'timed out after 600000 ms waiting for drover run\'s first sync' }], samples: SAMPLES.filter((s) => s.clock !== 'end-to-end') });
  t.true(md.includes("- The `drover run` of the end-to-end clock failed: timed out after 600000 ms waiting for drover run's first sync.\n"));
  t.false(md.includes('- drover run (end-to-end clock)'));
});

test('summary.md of a guest run says ratios only; a capped full re-render and a repaired kernel are reported', (t) => {
  const md = buildSummary({
    ...RESULT,
    environment: { ...RESULT.environment, guest: true, guestReason: 'DROVER_IN_GUEST=1' },
    runs: [{ ...RUN, consistent: false, fullRerenderSkipped: 'not measured above 50 services (--full-baseline-max)' }],
  });
  t.true(md.includes('| machine | emulated guest (DROVER_IN_GUEST=1): **ratios only** |\n'));
  t.true(md.includes('\n> **Ratios only.** This run was made in an emulated guest (DROVER_IN_GUEST=1).'));
  t.true(md.includes('- Full re-render: not measured above 50 services (--full-baseline-max).\n'));
  t.true(md.includes('**After the run, a full sync of the starting state had to repair the kernel**'));
});

test('charts: a latency chart and a distribution chart per mode, rendered to SVG with their labels', async (t) => {
  const list = charts(RESULT);
  t.deepEqual(
    list.map((c) => c.file),
    ['latency-iptables-nft.svg', 'distributions-iptables-nft.svg'],
  );
  const [latency, distributions] = await Promise.all(list.map((c) => renderSvg(c.spec)));
  for (const svg of [latency!, distributions!]) {
    t.true(svg.startsWith('<svg'));
    t.true(svg.trimEnd().endsWith('</svg>'));
    for (const label of ['endpoint removed', 'service added', 'drover: agent', 'raw minimal', 'kube-proxy-style', 'full re-render']) {
      t.true(svg.includes(`>${label}</text>`), label);
    }
  }
  t.true(latency!.includes('>iptables (nft): p50 time of a change against the number of service ports</text>'));
  t.true(latency!.includes('>full sync</text>'));
  t.true(distributions!.includes('>100 service ports</text>'));
  t.false(distributions!.includes('>full sync</text>'), 'a full sync (one sample) is no distribution');
});

/** The same samples as IPVS mode, with every time doubled, and a 1000-port size measured without details. */
const IPVS_RUN: SizeRun = { ...RUN, mode: 'ipvs' };
const IPVS_SAMPLES: Sample[] = SAMPLES.map((x) => ({ ...x, mode: 'ipvs', ms: x.ms * 2 }));
const BOTH: BenchResult = {
  ...RESULT,
  settings: { ...RESULT.settings, modes: ['iptables', 'ipvs'], services: [100, 1000], detailMax: 100 },
  runs: [RUN, IPVS_RUN, { ...RUN, services: 1000, changes: 1, detailSkipped: 'not measured above 100 services (--detail-max)' }],
  samples: [...SAMPLES, ...IPVS_SAMPLES, ...samples('endpoint-removed', 'drover', 'agent', [5], { services: 1000 })],
};

test('IPVS against iptables: agent clocks of both modes per size and change, with the ratios', (t) => {
  const rows = modeComparisons(statRows(BOTH.runs, BOTH.samples));
  t.deepEqual(modeTable(rows), [
    '| services | change | ipvs p50 | iptables p50 | ipvs/iptables p50 | ipvs p99 | iptables p99 | ipvs/iptables p99 |',
    '|---:|---|---:|---:|---:|---:|---:|---:|',
    '| 100 | full sync | 500.0 | 250.0 | 2.00 | 500.0 | 250.0 | 2.00 |',
    '| 100 | endpoint removed | 40.0 | 20.0 | 2.00 | 80.0 | 40.0 | 2.00 |',
    '| 100 | service added | 28.0 | 14.0 | 2.00 | 36.0 | 18.0 | 2.00 |',
  ]);
  const md = buildSummary(BOTH);
  t.true(md.includes('\n## IPVS mode against iptables mode\n'));
  t.true(md.includes('| 100 | endpoint removed | 40.0 | 20.0 | 2.00 | 80.0 | 40.0 | 2.00 |\n'));
  t.true(md.includes('- Kernel clock by read-back, end-to-end clock and kube-proxy-style baseline: not measured above 100 services (--detail-max).\n'));
  t.true(md.includes("At the sizes whose section says so (`--detail-max`), the kernel clock by read-back, the end-to-end clock and the kube-proxy-style baseline were not measured: only drover's agent and data-path clocks, the kernel clock by commit notification, the raw baseline, and drover run's first sync and RSS."));
  t.true(md.includes('changes of each kind: 100 services (iptables) 4, 100 services (ipvs) 4, 1000 services (iptables) 1 |'));
  t.true(md.includes('\niptables mode (each timed from starting iptables-restore to its exit):\n'));
  t.true(md.includes('\nIPVS mode (each timed from the first command sent, or the ipset process started, to the last answer):\n'));
  t.deepEqual(modeComparisons(statRows([RUN], SAMPLES)), [], 'one mode: nothing to compare');
});

test('charts: modes.svg sets IPVS against iptables when both ran', async (t) => {
  const list = charts(BOTH);
  t.deepEqual(
    list.map((c) => c.file),
    ['latency-iptables-nft.svg', 'distributions-iptables-nft.svg', 'latency-ipvs-nft.svg', 'distributions-ipvs-nft.svg', 'modes.svg'],
  );
  const svg = await renderSvg(list[4]!.spec);
  for (const label of ['ipvs (nft)', 'iptables (nft)', 'full sync', 'endpoint removed', "IPVS mode against iptables mode: drover's agent clock (p50)"]) {
    t.true(svg.includes(`>${label}</text>`), label);
  }
});

test('a mode of another variant (nftables over netlink) is set against the reference mode, with the minimal script in its ratios', (t) => {
  const nftRun: SizeRun = { ...IPVS_RUN, mode: 'nftables', variant: 'netlink' };
  const nftSamples = IPVS_SAMPLES.map((s) => ({ ...s, mode: 'nftables', variant: 'netlink' }));
  const script = samples('endpoint-removed', 'minimal-script', 'agent', [10, 10, 10, 10], { mode: 'nftables', variant: 'netlink' });
  const rows = statRows([RUN, nftRun], [...SAMPLES, ...nftSamples, ...script]);
  const pairs = modePairs(modeComparisons(rows));
  t.deepEqual(pairs.map((p) => [p.mode, p.reference, p.rows[0]!.a, p.rows[0]!.b]), [['nftables', 'iptables', 'nftables (netlink)', 'iptables (nft)']]);
  const ratios = ratioRows(rows).find((r) => r.mode === 'nftables' && r.kind === 'endpoint-removed')!;
  t.true(ratios.ratios.some((r) => r.method === 'minimal-script' && r.p50 === 10));
  t.true(ratioTable(ratioRows(rows).filter((r) => r.mode === 'nftables'))[0]!.includes('drover/minimal script p50'));
});

test('summary.md of nftables mode: the kernel clock by commit notification with its lost changes, and the full sync against nft -f of the same ruleset', (t) => {
  const nftRun: SizeRun = { ...RUN, mode: 'nftables', variant: 'netlink', kernelClock: 'notification', kernelLost: ['endpoint-added 2: notifications were dropped (ENOBUFS)'] };
  const nft = (x: Sample): Sample => ({ ...x, mode: 'nftables', variant: 'netlink' });
  const md = buildSummary({
    ...RESULT,
    settings: { ...RESULT.settings, modes: ['nftables'] },
    runs: [nftRun],
    samples: [...SAMPLES.map(nft), ...samples('full-sync', 'full-rerender', 'agent', [200], { mode: 'nftables', variant: 'netlink' })],
  });
  t.true(md.includes("- The same ruleset written into empty tables by one transaction of the mode's tool (full sync baseline): 200.0 ms; drover's full sync over it: 1.25.\n"));
  t.true(md.includes('- Kernel clock: nf_tables commit notifications (NFT_MSG_NEWGEN); no sample for 1 change(s): endpoint-added 2: notifications were dropped (ENOBUFS).\n'));
  t.true(md.includes('- **kernel**, by commit notification (nftables mode, iptables-nft;'));
  t.false(buildSummary(RESULT).includes('full sync baseline'), 'no baseline sample, no line');
});
