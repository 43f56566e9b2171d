/**
 * `drover run --source shepherd+http://…` end to end, against the test
 * double of Shepherd's API server (test/support/shepherd-api.ts) on this
 * process's loopback, programming a fresh network namespace (`--netns`:
 * drover itself, and so its HTTP client, stays in this namespace).
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../src/kernel/exec.ts';
import { withNetns } from '../../src/testbed/netns.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';
import { FakeShepherd, shepherdService } from '../support/shepherd-api.ts';
import { until } from '../support/wait.ts';
import { DROVER } from '../support/drover-bin.ts';

const unavailable = await testbedUnavailableReason();

const web = (endpoints: string[]) => shepherdService('default', 'web', [{ name: 'http', port: 80, target_port: 8080, protocol: 'tcp' }], endpoints);

if (unavailable) {
  test.skip(`drover run against Shepherd skipped: ${unavailable}`, () => {});
} else {
  test.serial('run follows a Shepherd API server, syncs only on change, and keeps everything while the server is away', async (t) => {
    const server = await FakeShepherd.start({ token: 'tok' });
    const dir = await mkdtemp(join(tmpdir(), 'drover-shepherd-'));
    t.teardown(async () => {
      await server.stop().catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    });
    server.set('default', [web(['10.244.2.2:8080', '10.244.2.3:8080'])]);
    server.set('shop', [shepherdService('shop', 'api', [{ port: 9090, target_port: 9090 }], ['10.244.3.2:9090'])]);
    const status = join(dir, 'status.json');
    await withNetns(async (netns) => {
      // Without the "# Generated/Completed on <time>" lines, so that two reads compare equal.
      const save = async () => (await run('iptables-nft-save', ['-t', 'nat'], { netns })).stdout.split('\n').filter((l) => !l.startsWith('#')).join('\n');
      const child = spawn(
        'env',
        [
          'SHEPHERD_API_TOKEN=tok', process.execPath, DROVER, 'run', '--source', server.source, '--state-dir', join(dir, 'state'),
          '--netns', netns, '--iptables-backend', 'nft', '--min-sync-period', '200ms', '--poll-interval', '200ms', '--status-file', status,
          // With --netns the servers would listen on the host (the health server on every address): off.
          '--metrics-bind-address', '', '--healthz-bind-address', '',
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let logs = '';
      child.stderr.on('data', (b: Buffer) => (logs += b.toString()));
      const syncs = () => logs.split('\n').filter((l) => /"msg":"(full|partial) sync done/.test(l)).length;
      try {
        await until('the first sync', async () => (await save()).includes('10.244.2.3:8080'), 30_000);
        t.true((await save()).includes('shop/api cluster IP'));
        // The allocation state file is written on its own queue, beside the sync (not before it): wait for it.
        const allocations = join(dir, 'state', 'allocations.json');
        await until('the allocation state file', async () => existsSync(allocations), 30_000);
        const allocated = JSON.parse(await readFile(allocations, 'utf8')) as { allocations: Record<string, string> };
        t.deepEqual(Object.keys(allocated.allocations), ['default/web', 'shop/api']);
        t.true((await save()).includes(`-d ${allocated.allocations['default/web']}/32`));

        // Polls that change nothing cause no sync. The kernel shows a sync's
        // rules before drover logs it (conntrack clean-up comes between), so
        // count from the logged line of the sync that wrote both services.
        await until('the first sync log line', async () => /"msg":"(full|partial) sync done/.test(logs) && /"services":2[,}]/.test(logs), 30_000);
        const before = syncs();
        await new Promise((r) => setTimeout(r, 1500));
        t.is(syncs(), before, 'no sync without a change');

        // An endpoint goes: a partial sync of that service port alone.
        server.set('default', [web(['10.244.2.2:8080'])]);
        await until('the removed endpoint to leave the kernel', async () => !(await save()).includes('10.244.2.3:8080'), 30_000);
        await until('the partial sync log line', async () => /"changed":\["default\/web:http"\]/.test(logs), 30_000);

        // The server goes away: nothing is deleted, the status file says why.
        const programmed = await save();
        await server.stop();
        await until('the status file to name the failure', async () => {
          const record = JSON.parse(await readFile(status, 'utf8').catch(() => '{}')) as { lastSync?: { incomplete?: string[] } };
          return (record.lastSync?.incomplete ?? []).some((m) => m.includes(`${server.url}/api/v1/namespaces: `));
        }, 30_000);
        t.is(await save(), programmed, 'the rules are unchanged while the server is away');
        t.regex(logs, /cannot read the Shepherd API server: .*keeping the Services last read/);

        // Back without shop/api: the first whole read deletes it.
        server.set('shop', []);
        await server.restart();
        await until('shop/api to leave the kernel', async () => !(await save()).includes('shop/api cluster IP'), 30_000);
        t.true((await save()).includes('10.244.2.2:8080'));
      } finally {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
      }
      const cleanup = await run(process.execPath, [DROVER, 'cleanup', '--netns', netns, '--iptables-backend', 'nft'], { allowFail: true, timeoutMs: 60_000 });
      t.is(cleanup.code, 0, cleanup.stderr);
    });
  });
}
