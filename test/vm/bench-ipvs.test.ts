/**
 * `drover bench --modes ipvs` end to end in the guest, as a user runs it: a
 * small real run (50 service ports, 1 change of each kind) in throw-away
 * namespaces, and its output files. No assertion is made on how long
 * anything took. Only IPVS mode runs here: the iptables bench end to end is
 * test/kernel/bench.test.ts on the host's kernel, and the IPVS-against-
 * iptables table and chart are made from both modes' runs in
 * test/unit/bench-report.test.ts.
 */
import test from 'ava';
import { access, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SizeRun } from '../../src/bench/types.ts';
import { run } from '../../src/testbed/exec.ts';
import { assertSampleCounts, readSamples } from '../support/bench.ts';
import { registerIpvsTests } from './support/env.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DROVER = join(ROOT, 'bin/drover.js');

if (await registerIpvsTests('IPVS bench')) {
  test('a small IPVS run writes every sample, a consistent kernel, and the summary', async (t) => {
    t.timeout(1_500_000);
    const out = await mkdtemp(join(tmpdir(), 'drover-bench-ipvs-'));
    try {
      const args = ['bench', '--modes', 'ipvs', '--services', '10', '--endpoints', '4', '--changes', '1', '--out', out];
      const res = await run(process.execPath, [DROVER, ...args], { allowFail: true, timeoutMs: 1_400_000 });
      t.is(res.code, 0, res.stderr);
      for (const f of ['samples.jsonl', 'summary.md', 'run.json', 'latency-ipvs-nft.svg', 'distributions-ipvs-nft.svg']) await t.notThrowsAsync(access(join(out, f)), f);

      const samples = await readSamples(out);
      assertSampleCounts(t, samples, 1);
      t.true(samples.every((s) => s.mode === 'ipvs' && s.variant === 'nft' && s.services === 10));

      const report = JSON.parse(await readFile(join(out, 'run.json'), 'utf8')) as { runs: SizeRun[]; environment: { guest: boolean } };
      t.deepEqual(
        report.runs.map((r) => [r.mode, r.services, r.consistent]),
        [['ipvs', 10, true]],
        'after the run, a full sync of the starting state found nothing to repair',
      );
      t.true(report.runs[0]!.resyncMs! > 0, 'the final full sync is timed');
      t.true(report.environment.guest);
      const md = await readFile(join(out, 'summary.md'), 'utf8');
      t.true(md.includes('\n> **Ratios only.** This run was made in an emulated guest'));
      for (const change of ['endpoint removed', 'endpoint added', 'service added', 'service removed']) {
        t.regex(md, new RegExp(`^\\| ipvs \\(nft\\) \\| 10 \\| ${change} \\|( [\\d.]+ \\|)+$`, 'm'), change);
      }
      const svg = await readFile(join(out, 'latency-ipvs-nft.svg'), 'utf8');
      t.true(svg.startsWith('<svg') && svg.includes('>drover: agent</text>'));
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });
}
