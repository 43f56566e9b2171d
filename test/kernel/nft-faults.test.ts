/**
 * Surviving faults in nftables mode: `drover run --mode nftables` serves a
 * Service from a manifest folder inside the node namespace (so its element
 * writer, nf_tables netlink, acts there), with real TCP traffic through the
 * ClusterIP. Killed under traffic and restarted, it adopts the table and
 * writes nothing; the table flushed, deleted or a set of it deleted by hand
 * is repaired by the next full sync (SIGHUP); another program's table
 * `ip other` with its own nat chains is never touched, also by `drover
 * cleanup --mode nftables`. Every test builds its own namespaces and removes
 * them, also on failure.
 */
import test, { type ExecutionContext } from 'ava';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from '../../src/kernel/exec.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';
import { CLUSTER_IP, drover, finish, manifestWorld, type ManifestWorld, reached, runFlags, startDrover, synced, traffic, type FaultWorld, type RunningDrover } from '../support/faults.ts';
import { until } from '../support/wait.ts';

const unavailable = await testbedUnavailableReason();
const NFT = '/usr/sbin/nft';

const service = `apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: nsd}\nspec: {clusterIP: ${CLUSTER_IP}, ports: [{name: http, port: 80, protocol: TCP}]}\n`;
const slice = (ips: readonly string[]) =>
  `apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: web-1, namespace: nsd, labels: {kubernetes.io/service-name: web}}\naddressType: IPv4\nports: [{name: http, port: 8080, protocol: TCP}]\nendpoints:\n${ips.map((ip) => `  - {addresses: [${ip}], conditions: {ready: true}}\n`).join('')}`;
const manifest = (ips: readonly string[]) => `${service}---\n${slice(ips)}`;

/** Another program's table, with nat chains of its own on the same hooks. */
const OTHER = `table ip other {
  chain pre { type nat hook prerouting priority -100; policy accept; ip daddr 192.0.2.99 tcp dport 9 dnat to 10.180.0.1:8080 comment "other's"; }
  chain post { type nat hook postrouting priority 100; policy accept; ip saddr 192.0.2.0/24 masquerade; }
  set keep { type ipv4_addr; elements = { 192.0.2.1 } }
}
`;

type World = ManifestWorld;

async function world(t: ExecutionContext): Promise<World> {
  const w = await manifestWorld(t, manifest(['10.180.0.1', '10.180.0.2']));
  await nft(w, ['-f', '-'], OTHER);
  return w;
}

/** nft ARGS in the node namespace, `input` on stdin. */
async function nft(w: FaultWorld, args: string[], input?: string): Promise<string> {
  return (await run('ip', ['netns', 'exec', w.topo.node, NFT, ...args], input !== undefined ? { input } : {})).stdout;
}

/** What nft lists of a table, without the handles (which a rewrite changes). */
const listed = async (w: FaultWorld, table: string): Promise<string> => nft(w, ['list', 'table', 'ip', table]);

const flags = (w: World) => ['--mode', 'nftables', '--source', w.source, '--state-dir', join(w.scratch, 'state'), '--service-cidr', '172.30.0.0/16', '--cluster-cidr', '10.180.0.0/16'];

/** drover run inside the node namespace, synced once. */
async function start(t: ExecutionContext, w: World): Promise<RunningDrover> {
  const d = startDrover([...flags(w), ...runFlags(w)], { netns: w.topo.node });
  t.teardown(() => d.stop());
  await synced(d, 1);
  return d;
}

/** The kernel holds what a fresh full sync would write. */
async function converged(t: ExecutionContext, w: World): Promise<void> {
  const diff = await drover(['diff', ...flags(w)], { netns: w.topo.node });
  t.deepEqual([diff.code, diff.stdout], [0, 'no differences\n'], diff.stderr);
}

const ZERO = { 'set entry': 0, set: 0, chain: 0 };

if (unavailable) {
  test.skip(`nftables fault tests skipped: ${unavailable}`, () => {});
} else {
  test.serial('SIGKILL under traffic, then a restart: connections survive, nothing is flushed, the first full sync writes nothing', async (t) => {
    const w = await world(t);
    const other = await listed(w, 'other');
    const d = await start(t, w);
    const load = await traffic(t, w);
    const before = await listed(w, 'drover');
    await d.kill();
    t.is(await listed(w, 'drover'), before, 'a killed drover leaves the table as it was');
    const again = await start(t, w);
    const first = again.lines(/^full sync done/)[0]!;
    t.deepEqual([first.written, first.deleted], [ZERO, ZERO], 'the first full sync of the restart adopts the table');
    t.is(await listed(w, 'drover'), before);
    // A change after the restart that keeps the endpoint count is a partial sync of elements alone, over netlink.
    await writeFile(w.file, manifest(['10.180.0.1', '10.180.0.3']));
    await until('b3 served', async () => (await reached(w)) === 'b1,b3', 30_000);
    const partial = again.lines(/^partial sync done/).at(-1)!;
    t.deepEqual([partial.via, partial.structural], ['netlink', false], JSON.stringify(partial));
    const s = await finish(t, 'nftables SIGKILL and restart', load);
    t.is(s.failed, 0, JSON.stringify(s.errors));
    await converged(t, w);
    t.is(await listed(w, 'other'), other, 'table ip other untouched');
  });

  for (const c of [
    { what: 'the table flushed', fault: ['flush', 'table', 'ip', 'drover'] },
    { what: 'the table deleted', fault: ['delete', 'table', 'ip', 'drover'] },
    { what: 'the table flushed and a set deleted', fault: ['-f', '-'], input: 'flush table ip drover\ndelete set ip drover service-ips\n' },
  ]) {
    test.serial(`${c.what} while drover runs: the next full sync (SIGHUP) repairs it; table ip other is never touched`, async (t) => {
      const w = await world(t);
      const other = await listed(w, 'other');
      const d = await start(t, w);
      t.is(await reached(w), 'b1,b2');
      await nft(w, c.fault, c.input);
      const n = d.lines(/^full sync done/).length;
      await run('ip', ['netns', 'exec', w.topo.node, 'kill', '-HUP', String(await droverPid(w))], {});
      await until('a full sync', async () => d.lines(/^full sync done/).length > n, 30_000);
      t.is(await reached(w), 'b1,b2');
      await converged(t, w);
      t.is(await listed(w, 'other'), other, 'table ip other untouched');
      const load = await traffic(t, w);
      await new Promise((r) => setTimeout(r, 1000));
      const s = await finish(t, c.what, load);
      t.is(s.failed, 0, JSON.stringify(s.errors));
    });
  }

  test.serial('drover sync --once and cleanup --mode nftables exit; cleanup deletes table ip drover and leaves table ip other as it was', async (t) => {
    const w = await world(t);
    const other = await listed(w, 'other');
    const d = await start(t, w);
    await d.stop();
    // Inside the namespace both open a netlink socket; each must still exit once done.
    const once = await drover(['sync', '--once', ...flags(w)], { netns: w.topo.node });
    t.is(once.code, 0, once.stderr);
    const r = await drover(['cleanup', '--mode', 'nftables'], { netns: w.topo.node });
    t.is(r.code, 0, r.stderr);
    t.is(await listed(w, 'other'), other);
    t.is((await nft(w, ['list', 'tables'])).trim(), 'table ip other');
  });
}

/** The pid of the drover process in the node namespace (the one `ip netns exec` started). */
async function droverPid(w: World): Promise<number> {
  const pids = (await run('ip', ['netns', 'pids', w.topo.node], {})).stdout.trim().split(/\s+/).map(Number);
  for (const pid of pids) {
    const cmd = (await run('cat', [`/proc/${pid}/cmdline`], { allowFail: true })).stdout.split('\0');
    if (cmd.some((a) => a.endsWith('bin/drover.js')) && cmd.includes('run')) return pid;
  }
  throw new Error('no drover run process in the node namespace');
}
