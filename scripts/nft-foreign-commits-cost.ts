/**
 * What another program's nf_tables commits cost `drover run --mode
 * nftables` at one size, in a throw-away network namespace (root):
 *
 *   tsx scripts/nft-foreign-commits-cost.ts [SERVICES [ENDPOINTS [SECONDS [EVERY_MS]]]]   # default 30000 2 60 10
 *
 * It writes SERVICES synthetic service ports of ENDPOINTS endpoints each as
 * a manifest folder, starts `drover run` on it (with `--sync-period 1s`, so
 * that any drift check that read the kernel would show, and
 * `--min-sync-period 100ms`, the least wait of a repair), waits until its
 * syncs have settled, then lets one `/usr/sbin/nft -i` process commit an
 * element to another table, `ip other`, every EVERY_MS for SECONDS. Prints
 * the commits made, drover's CPU (its process and its watcher process)
 * over that window and the full syncs in it, the time of the first sync;
 * then deletes one element of `service-ips` by hand and prints how long
 * after it was put back, and how (that set alone, or a full sync); and
 * whether drover's table then holds every service (`drover diff`).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceFiles } from '../src/bench/manifest-files.ts';
import { synthSnapshot } from '../src/bench/synth.ts';
import { run } from '../src/kernel/exec.ts';
import { commitForeignElements } from '../src/testbed/foreign-commits.ts';
import { processTreeCpu } from './peers/bench/proc-stat.ts';
import { inOwnNetns } from './own-netns.ts';

const [services = 30_000, endpoints = 2, seconds = 60, everyMs = 10] = process.argv.slice(2).map(Number);
const NFT = '/usr/sbin/nft';
const DROVER = fileURLToPath(new URL('../bin/drover.js', import.meta.url));

// Run inside a namespace of our own (drover's netlink sockets act in their process's namespace), removed at the end, also on failure.
inOwnNetns(import.meta.url, 'DROVER_FOREIGN_COMMITS_NETNS', 'f');

const dir = await mkdtemp(join(tmpdir(), 'drv-foreign-'));
const drover = spawn(process.execPath, [DROVER, 'run', '--mode', 'nftables', '--source', join(dir, 'manifests'), '--state-dir', join(dir, 'state'), '--cluster-cidr', '10.244.0.0/16',
  '--sync-period', '1s', '--min-sync-period', '100ms', '--metrics-bind-address', '', '--healthz-bind-address', '', '--status-file', join(dir, 'status.json')], { stdio: ['ignore', 'ignore', 'pipe'] });
try {
  await run('mkdir', ['-p', join(dir, 'manifests')]);
  for (const [name, text] of sourceFiles(synthSnapshot(services, endpoints).services.values(), [])) await writeFile(join(dir, 'manifests', name), text);
  await run(NFT, ['-f', '-'], { input: 'table ip other {\n  set keep { type ipv4_addr; }\n}\n' });
  let log = '';
  drover.stderr!.on('data', (b: Buffer) => (log += b.toString()));
  const lines = (msg: RegExp) => log.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => typeof l.msg === 'string' && msg.test(l.msg));
  const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const started = Date.now();
  while (lines(/sync done/).length === 0) {
    if (drover.exitCode !== null) throw new Error(`drover ended: ${log.slice(-2000)}`);
    await wait(500);
  }
  const firstSync = lines(/^full sync done/)[0];
  // Settled: no full sync for 10 s (a watcher overflowed by the first sync is started again, and asks for one read-back).
  let fulls = lines(/^full sync done/).length;
  for (let quiet = 0; quiet < 10_000; quiet += 1000) {
    await wait(1000);
    if (lines(/^full sync done/).length !== fulls) [fulls, quiet] = [lines(/^full sync done/).length, -1000];
  }
  const settledS = (Date.now() - started) / 1000;
  const repairsBeforeWindow = lines(/^the kernel changed behind drover/).length;
  const cpu0 = await processTreeCpu(drover.pid!);
  const { commits, seconds: windowS } = await commitForeignElements({ set: 'ip other keep', everyMs, forMs: seconds * 1000 });
  const cpu = (await processTreeCpu(drover.pid!)) - cpu0;
  await wait(2000);
  const after = lines(/^full sync done/).length;
  // Then one element of drover's deleted by hand: the time until the repair's full sync is done, and what it read.
  const service = /"concat": \["([\d.]+)", "(\w+)", (\d+)\]/.exec((await run(NFT, ['-j', 'list', 'set', 'ip', 'drover', 'service-ips'])).stdout);
  if (service === null) throw new Error('no element in service-ips');
  await run(NFT, ['delete', 'element', 'ip', 'drover', 'service-ips', `{ ${service[1]} . ${service[2]} . ${service[3]} }`]);
  const deletedAt = Date.now();
  // Put back alone (the line after its transaction), or by a full sync.
  const repaired = () => [...lines(/^put back the elements another program changed/), ...lines(/^full sync done/).slice(after)];
  for (let waited = 0; repaired().length === 0; waited += 20) {
    if (waited > 600_000 || drover.exitCode !== null) throw new Error(`no repair: ${log.slice(-2000)}`);
    await wait(20);
  }
  const repair = repaired()[0]!;
  const diff = await run(process.execPath, [DROVER, 'diff', '--mode', 'nftables', '--source', join(dir, 'manifests'), '--cluster-cidr', '10.244.0.0/16'], { allowFail: true, timeoutMs: 600_000 });
  console.log(JSON.stringify({
    services, endpoints, everyMs,
    firstSync: { totalMs: firstSync?.durationMs, readMs: firstSync?.readMs, applyMs: firstSync?.applyMs },
    watcherRestarts: lines(/^the nf_tables watcher process ended/).length,
    repairsBeforeWindow,
    settledAfterS: settledS,
    window: { seconds: windowS, commits, droverCpuS: Math.round(cpu * 100) / 100, percentOfCore: Math.round((cpu / windowS) * 1000) / 10, fullSyncs: after - fulls },
    repairOfOneElement: { doneAfterMs: Date.parse(String(repair.time)) - deletedAt, by: repair.msg, fullSyncs: lines(/^full sync done/).length - after, ...(repair.elements !== undefined ? { elements: repair.elements } : { readMs: repair.readMs, written: repair.written }) },
    diff: diff.stdout.trim().split('\n').slice(0, 3).join(' | '),
  }, null, 1));
} finally {
  drover.kill('SIGTERM');
  await new Promise((r) => drover.once('exit', r));
  await rm(dir, { recursive: true, force: true });
}
