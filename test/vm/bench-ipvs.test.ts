/**
 * `drover bench --modes ipvs,iptables` end to end in the guest, as a user
 * runs it: a small real run (50 service ports, 1 change of each kind) in
 * throw-away namespaces, and its output files, including the IPVS-against-
 * iptables table and chart. No assertion is made on how long anything took.
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
  test('a small IPVS and iptables run writes every sample, a consistent kernel, and the mode comparison', async (t) => {
    t.timeout(1_500_000);
    const out = await mkdtemp(join(tmpdir(), 'drover-bench-ipvs-'));
    try {
      const args = ['bench', '--modes', 'ipvs,iptables', '--services', '50', '--endpoints', '4', '--changes', '1', '--out', out];
      const res = await run(process.execPath, [DROVER, ...args], { allowFail: true, timeoutMs: 1_400_000 });
      t.is(res.code, 0, res.stderr);
      for (const f of ['samples.jsonl', 'summary.md', 'run.json', 'latency-ipvs-nft.svg', 'modes.svg']) await t.notThrowsAsync(access(join(out, f)), f);

      const samples = await readSamples(out);
      for (const mode of ['ipvs', 'iptables']) assertSampleCounts(t, samples.filter((s) => s.mode === mode), 1);
      t.true(samples.every((s) => s.variant === 'nft' && s.services === 50));

      const report = JSON.parse(await readFile(join(out, 'run.json'), 'utf8')) as { runs: SizeRun[]; environment: { guest: boolean } };
      t.deepEqual(
        report.runs.map((r) => [r.mode, r.services, r.consistent]),
        [
          ['ipvs', 50, true],
          ['iptables', 50, true],
        ],
        'after the run, a full sync of the starting state found nothing to repair in either mode',
      );
      t.true(report.runs.every((r) => r.resyncMs! > 0), 'the final full sync is timed in both modes');
      t.true(report.environment.guest);
      const md = await readFile(join(out, 'summary.md'), 'utf8');
      t.true(md.includes('\n## IPVS mode against iptables mode\n'));
      for (const change of ['full sync', 'endpoint removed', 'endpoint added', 'service added', 'service removed']) t.regex(md, new RegExp(`\\| 50 \\| ${change} \\| [\\d.]+ \\| [\\d.]+ \\| [\\d.]+ \\|`));
      t.true(res.stdout.includes("drover's agent clock, IPVS mode against iptables mode:"));
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });
}
