/**
 * `drover bench --modes ipvs,iptables` end to end in the guest, as a user
 * runs it: a small real run (50 service ports, 2 changes of each kind) in
 * throw-away namespaces, and its output files, including the IPVS-against-
 * iptables table and chart. No assertion is made on how long anything took.
 */
import test from 'ava';
import { access, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Sample, SizeRun } from '../../src/bench/types.ts';
import { run } from '../../src/testbed/exec.ts';
import { registerIpvsTests } from './support/env.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DROVER = join(ROOT, 'bin/drover.js');

if (await registerIpvsTests('IPVS bench')) {
  test('a small IPVS and iptables run writes every sample, a consistent kernel, and the mode comparison', async (t) => {
    t.timeout(1_500_000);
    const out = await mkdtemp(join(tmpdir(), 'drover-bench-ipvs-'));
    try {
      const args = ['bench', '--modes', 'ipvs,iptables', '--services', '50', '--endpoints', '4', '--changes', '2', '--out', out];
      const res = await run(process.execPath, [DROVER, ...args], { allowFail: true, timeoutMs: 1_400_000 });
      t.is(res.code, 0, res.stderr);
      for (const f of ['samples.jsonl', 'summary.md', 'run.json', 'latency-ipvs-nft.svg', 'modes.svg']) await t.notThrowsAsync(access(join(out, f)), f);

      const samples = (await readFile(join(out, 'samples.jsonl'), 'utf8')).trimEnd().split('\n').map((l) => JSON.parse(l) as Sample);
      const ipvs = samples.filter((s) => s.mode === 'ipvs');
      const count = (kind: string, method: string, clock: string) => ipvs.filter((s) => s.kind === kind && s.method === method && s.clock === clock).length;
      // Per kind: drover on 3 clocks, raw and kube-proxy-style on the agent clock, 2 each; full sync on 3 clocks; one full re-render.
      t.is(ipvs.length, 4 * (3 * 2 + 2 * 2) + 3 + 1);
      for (const kind of ['endpoint-removed', 'endpoint-added', 'service-added', 'service-removed']) {
        for (const clock of ['agent', 'kernel', 'datapath']) t.is(count(kind, 'drover', clock), 2, `${kind} drover ${clock}`);
        t.is(count(kind, 'raw', 'agent'), 2, `${kind} raw`);
        t.is(count(kind, 'kube-proxy', 'agent'), 2, `${kind} kube-proxy`);
      }
      t.is(count('service-added', 'full-rerender', 'agent'), 1);
      t.true(ipvs.every((s) => s.variant === 'nft' && s.services === 50 && Number.isFinite(s.ms) && s.ms > 0));

      const report = JSON.parse(await readFile(join(out, 'run.json'), 'utf8')) as { runs: SizeRun[]; environment: { guest: boolean } };
      t.deepEqual(
        report.runs.map((r) => [r.mode, r.services, r.consistent]),
        [
          ['ipvs', 50, true],
          ['iptables', 50, true],
        ],
        'after the run, a full sync of the starting state found nothing to repair in either mode',
      );
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
