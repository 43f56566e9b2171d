/**
 * `drover bench` end to end, as a user runs it: a small real run (iptables-nft,
 * 100 service ports, 5 changes of each kind) in throw-away network
 * namespaces, and its output files. No assertion is made on how long
 * anything took.
 */
import test from 'ava';
import { access, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../src/kernel/exec.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';
import { CSV_COLUMNS } from '../../src/bench/report.ts';
import { modeBench } from '../../src/bench/modes/registry.ts';
import type { SizeRun } from '../../src/bench/types.ts';
import { assertSampleCounts, readSamples } from '../support/bench.ts';
import { DROVER } from '../support/drover-bin.ts';

const unavailable = await testbedUnavailableReason();
const noIpvs = await modeBench('ipvs').unavailableReason();
const noNftables = await modeBench('nftables').unavailableReason();

const drover = (args: string[], timeoutMs = 60_000) => run(process.execPath, [DROVER, ...args], { allowFail: true, timeoutMs });

test('bench refuses a mode this kernel lacks, an unknown mode and a size below the clock services, in one line', async (t) => {
  if (noIpvs) {
    const ipvs = await drover(['bench', '--modes', 'iptables,ipvs', '--out', join(tmpdir(), 'drover-bench-never')]);
    t.is(ipvs.code, 1);
    t.is(ipvs.stderr, `drover: bench --modes ipvs: ${noIpvs}\n`);
    t.true(noIpvs.endsWith('; `npm run bench` measures IPVS mode in the test guest instead (scripts/vm/)'));
  }
  const unknown = await drover(['bench', '--modes', 'nosuch', '--out', join(tmpdir(), 'drover-bench-never')]);
  t.is(unknown.code, 1);
  t.regex(unknown.stderr, /^drover: .*unknown mode "nosuch" \(known: iptables, ipvs, nftables\)\n$/);
  const small = await drover(['bench', '--services', '100,2', '--out', join(tmpdir(), 'drover-bench-never')]);
  t.is(small.code, 1);
  t.regex(small.stderr, /^drover: .*"2" is not a whole number from 4 to 100000\n$/);
  const missing = await drover(['bench']);
  t.is(missing.code, 1);
  t.regex(missing.stderr, /--out/);
});

if (unavailable) {
  test.skip(`bench run skipped: ${unavailable}`, () => {});
} else {
  test('a small real run writes samples, a summary and charts that hold every expected row', async (t) => {
    // The end-to-end clock starts a drover run of its own: on a busy machine that takes seconds.
    t.timeout(200_000);
    const out = await mkdtemp(join(tmpdir(), 'drover-bench-'));
    try {
      const res = await drover(['bench', '--services', '100', '--endpoints', '10', '--changes', '5', '--iptables-backend', 'nft', '--out', out], 180_000);
      t.is(res.code, 0, res.stderr);
      for (const f of ['samples.jsonl', 'samples.csv', 'summary.md', 'run.json', 'latency-iptables-nft.svg', 'distributions-iptables-nft.svg']) {
        await t.notThrowsAsync(access(join(out, f)), f);
      }

      const samples = await readSamples(out);
      assertSampleCounts(t, samples, 5);
      t.true(samples.every((s) => s.mode === 'iptables' && s.variant === 'nft' && s.services === 100 && s.endpoints === 10));
      // The data path is polled once the agent returned: never earlier than it, for the same change. The kernel clock is
      // iptables-nft's commit, announced inside the agent's transaction: not after the agent returned (by more than the
      // listener's reading, which a busy machine can hold back for hundreds of milliseconds).
      for (const s of samples.filter((x) => x.method === 'drover' && (x.clock === 'kernel' || x.clock === 'datapath'))) {
        const agent = samples.find((x) => x.method === 'drover' && x.clock === 'agent' && x.kind === s.kind && x.iteration === s.iteration)!;
        if (s.clock === 'datapath') t.true(s.ms >= agent.ms, `${s.kind} #${s.iteration} ${s.clock}`);
        else t.true(s.kernelMethod === 'notification' && s.ms <= agent.ms + 1000, `${s.kind} #${s.iteration} kernel ${s.ms} ms, agent ${agent.ms} ms`);
      }
      t.true(samples.filter((s) => s.clock === 'datapath' && s.kind === 'endpoint-removed').every((s) => s.tries! >= 10), 'ten connections in a row on the survivor');

      const csv = (await readFile(join(out, 'samples.csv'), 'utf8')).trimEnd().split('\n');
      t.is(csv[0], CSV_COLUMNS.join(','));
      t.is(csv.length, samples.length + 1);
      t.true(csv.slice(1).every((l) => l.split(',').length === CSV_COLUMNS.length));

      const summary = await readFile(join(out, 'summary.md'), 'utf8');
      for (const kind of ['endpoint removed', 'endpoint added', 'service added', 'service removed']) {
        t.regex(summary, new RegExp(`^\\| iptables \\(nft\\) \\| 100 \\| ${kind} \\|( [\\d.]+ \\|){8}$`, 'm'), kind);
      }
      t.regex(summary, /^\| iptables-nft \| iptables v1\.8\.\d+ \(nf_tables\) \|$/m);
      t.regex(summary, /^- After the run, a full sync of the starting state found nothing to repair: agent [\d.]+ ms, what a restart or a periodic resync costs/m);
      const printed = res.stdout.split('\n');
      t.is(printed.filter((l) => /^\| iptables \(nft\) \| 100 \| (endpoint|service) /.test(l)).length, 4, 'the overview is printed');
      t.is(printed.filter((l) => /^\| iptables \(nft\) \| 100 \| (dist|src) \| [\d.]+ ms \| [\d,]+ kB \| [\d,]+ kB \|$/.test(l)).length, 1, 'and the drover run table');

      const runJson = JSON.parse(await readFile(join(out, 'run.json'), 'utf8')) as { runs: SizeRun[] };
      t.is(runJson.runs.length, 1);
      t.like(runJson.runs[0], { mode: 'iptables', variant: 'nft', services: 100, changes: 5, consistent: true, fullSyncTransactions: 1 });
      t.true(runJson.runs[0]!.peakRssKb > 0);
      // The drover run process: a Node.js process of tens of MB at least, whose peak is not below its RSS.
      const facts = runJson.runs[0]!.droverRun!;
      t.true(facts.rssKb > 20_000 && facts.peakRssKb >= facts.rssKb, JSON.stringify(facts));
      t.true(facts.firstSyncMs > 0);
      t.regex(summary, /^- drover run \(end-to-end clock, the (compiled build|TypeScript sources through tsx)\): first sync [\d.]+ ms after start; RSS [\d,]+ kB after the first sync, peak [\d,]+ kB\.$/m);
      // The end-to-end clock waits for drover run's sync and one read-back that shows the change.
      t.true(samples.filter((s) => s.clock === 'end-to-end').every((s) => s.tries! >= 1 && s.readbackMs! > 0 && s.ms > s.readbackMs! && s.rssKb! > 20_000));
      t.true(runJson.runs[0]!.resyncMs! > 0, 'the final full sync is timed');

      for (const f of ['latency-iptables-nft.svg', 'distributions-iptables-nft.svg']) {
        const svg = await readFile(join(out, f), 'utf8');
        t.true(svg.startsWith('<svg') && svg.includes('>drover: agent</text>'), f);
      }
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });

  if (noNftables) {
    test.skip(`nftables bench run skipped: ${noNftables}`, () => {});
  } else {
    test('a small nftables run: its baselines on every change, kube-proxy\'s table beside drover\'s, and nothing left to repair', async (t) => {
      t.timeout(120_000);
      const out = await mkdtemp(join(tmpdir(), 'drover-bench-nft-'));
      try {
        const res = await drover(['bench', '--modes', 'nftables', '--services', '100', '--endpoints', '10', '--changes', '2', '--out', out], 110_000);
        t.is(res.code, 0, res.stderr);
        const samples = await readSamples(out);
        assertSampleCounts(t, samples, 2, ['minimal-script'], true);
        t.true(samples.filter((s) => s.clock === 'kernel').every((s) => s.kernelMethod === 'notification'));
        t.true(samples.every((s) => s.mode === 'nftables' && s.variant === 'netlink' && s.services === 100));
        t.true(samples.filter((s) => s.method === 'raw' || (s.method === 'drover' && s.clock === 'agent' && s.kind !== 'endpoint-removed')).every((s) => s.bytes! > 0));
        const runJson = JSON.parse(await readFile(join(out, 'run.json'), 'utf8')) as { runs: SizeRun[] };
        // From empty: the structure by nft -f, the pick rules put in place of nft's TCP-only ones over netlink
        // (netlink-rules.ts), then the elements of 100 service ports over netlink, in one batch.
        t.like(runJson.runs[0], { mode: 'nftables', variant: 'netlink', consistent: true, fullSyncTransactions: 3 });
        const summary = await readFile(join(out, 'summary.md'), 'utf8');
        t.regex(summary, /\*\*kube-proxy-style\*\*: what kube-proxy's nftables proxier/);
        t.regex(summary, /^- The same ruleset written into empty tables by one transaction of the mode's tool \(full sync baseline\): [\d.]+ ms; drover's full sync over it: [\d.]+\.$/m);
        t.regex(summary, /^- Kernel clock: nf_tables commit notifications \(NFT_MSG_NEWGEN\)\.$/m);
        t.regex(summary, /^\| endpoint removed \|( [\d.]+ \| [\d.]+ \|){3} – \| – \|$/m, 'drover over raw, minimal script and kube-proxy-style');
        await t.notThrowsAsync(access(join(out, 'latency-nftables-netlink.svg')));
      } finally {
        await rm(out, { recursive: true, force: true });
      }
    });
  }
}
