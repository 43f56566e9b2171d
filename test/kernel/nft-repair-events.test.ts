/**
 * Repairs from the kernel's own events in nftables mode: `drover run
 * --mode nftables` in the node namespace watches nf_tables notifications
 * (src/modes/nftables/repair-watch.ts). Another program committing its own
 * table every 10 ms costs drover no read-back; a hand deletion of an
 * element, a set, a chain or the whole table of drover's, with traffic
 * running, is repaired at once as the watch asks, with no SIGHUP and
 * the periodic check 10 minutes away. The time from the deletion to the
 * repair's end and the failed connections are logged (t.log), not asserted:
 * the machine may be busy. Every test builds its own namespaces and removes
 * them, also on failure. An element added or deleted is put back alone
 * (that set read back); anything else is a full sync.
 */
import test, { type ExecutionContext } from 'ava';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from '../../src/kernel/exec.ts';
import { commitForeignElements } from '../../src/testbed/foreign-commits.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';
import { CLUSTER_IP, drover, finish, manifestWorld, type ManifestWorld, reached, runFlags, startDrover, synced, traffic, type RunningDrover } from '../support/faults.ts';
import { until } from '../support/wait.ts';
import { processTreeCpu } from '../../scripts/peers/bench/proc-stat.ts';

const unavailable = await testbedUnavailableReason();
const NFT = '/usr/sbin/nft';

const manifest = `apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: nsd}\nspec: {clusterIP: ${CLUSTER_IP}, ports: [{name: http, port: 80, protocol: TCP}]}\n---
apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: web-1, namespace: nsd, labels: {kubernetes.io/service-name: web}}\naddressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]\nendpoints:\n  - {addresses: [10.180.0.1], conditions: {ready: true}}\n  - {addresses: [10.180.0.2], conditions: {ready: true}}\n`;

/**
 * Another program's table, as a node has (a CNI's masquerade, kubelet's
 * firewall rules): nat chains of its own keep the namespace's NAT hooks
 * while drover's table is gone, and a rule matching `ct state` keeps
 * conntrack itself. Without any other conntrack user, deleting drover's
 * table would unregister the namespace's conntrack hooks (the last
 * nf_ct_netns_get reference goes with drover's ct and nat expressions)
 * until the repair: a held connection's request in the gap would go
 * untranslated and be retransmitted (the entries stay), but an endpoint's
 * reply in the gap would reach the client from the endpoint's address and
 * be answered with a reset.
 */
const OTHER = `table ip other {
  chain pre { type nat hook prerouting priority -100; policy accept; }
  chain post { type nat hook postrouting priority 100; policy accept; }
  chain keep-ct { type filter hook forward priority 0; policy accept; ct state established counter accept; }
  set keep { type ipv4_addr; }
}
`;

/** nft ARGS in the node namespace, `input` on stdin. */
async function nft(w: ManifestWorld, args: string[], input?: string): Promise<string> {
  return (await run('ip', ['netns', 'exec', w.topo.node, NFT, ...args], input !== undefined ? { input } : {})).stdout;
}

const flags = (w: ManifestWorld) => ['--mode', 'nftables', '--source', w.source, '--state-dir', join(w.scratch, 'state'), '--service-cidr', '172.30.0.0/16', '--cluster-cidr', '10.180.0.0/16'];

/** drover run inside the node namespace with `syncPeriod`, synced once, its watch started. */
async function start(t: ExecutionContext, w: ManifestWorld, syncPeriod: string): Promise<RunningDrover> {
  const d = startDrover([...flags(w), ...runFlags(w), '--sync-period', syncPeriod], { netns: w.topo.node });
  t.teardown(() => d.stop());
  await synced(d, 1);
  await until('the watch', async () => d.lines(/^watching nf_tables notifications/).length === 1, 30_000);
  t.deepEqual(d.lines(/cannot watch|not watched/), [], 'the watch opened');
  return d;
}

/** The kernel holds what a fresh full sync would write. */
async function converged(t: ExecutionContext, w: ManifestWorld): Promise<void> {
  const diff = await drover(['diff', ...flags(w)], { netns: w.topo.node });
  t.deepEqual([diff.code, diff.stdout], [0, 'no differences\n'], diff.stderr);
}

/** The lines nft lists of table ip drover, sorted (a set or chain written again is listed after the others). */
async function listedLines(w: ManifestWorld): Promise<string[]> {
  return (await nft(w, ['list', 'table', 'ip', 'drover'])).split('\n').sort();
}

if (unavailable) {
  test.skip(`nftables repair-event tests skipped: ${unavailable}`, () => {});
} else {
  test.serial('another program committing its own table every 10 ms costs drover no read-back, and drover\'s table stays as it was', async (t) => {
    const w = await manifestWorld(t, manifest);
    await nft(w, ['-f', '-'], OTHER);
    // A sync period of 1 s: a drift check by generation id would read the table back every second.
    const d = await start(t, w, '1s');
    const before = await nft(w, ['list', 'table', 'ip', 'drover']);
    const fulls = d.lines(/^full sync done/).length;
    const cpu0 = await processTreeCpu(d.pid);
    // One nft process reading commands: each line is a transaction of its own on table ip other.
    const { commits: sent, seconds } = await commitForeignElements({ netns: w.topo.node, set: 'ip other keep', everyMs: 10, forMs: 5000 });
    const cpu = Math.round(((await processTreeCpu(d.pid)) - cpu0) * 1000);
    const kept = (await nft(w, ['-j', 'list', 'set', 'ip', 'other', 'keep'])).match(/"10\.\d+\.\d+\.\d+"/g)?.length ?? 0;
    t.is(kept, sent, 'every commit of the other program went through');
    // The sync periods of the window have passed their drift check by then.
    await new Promise((r) => setTimeout(r, 1500));
    t.is(d.lines(/^full sync done/).length, fulls, 'no full sync');
    t.deepEqual(d.lines(/the kernel (may have )?changed/), [], 'nothing taken for drift');
    t.is(await nft(w, ['list', 'table', 'ip', 'drover']), before);
    await converged(t, w);
    t.log(`${sent} commits of table ip other in ${seconds.toFixed(1)} s: drover and its watcher process used ${cpu} ms of CPU (${((cpu / 10) / seconds).toFixed(1)} % of a core), 0 full syncs`);
  });

  test.serial('the watcher process killed: drover starts it again, reads its table back once, and repairs the next hand deletion', async (t) => {
    const w = await manifestWorld(t, manifest);
    const d = await start(t, w, '10m');
    const children = (await readFile(`/proc/${d.pid}/task/${d.pid}/children`, 'utf8')).trim().split(/\s+/);
    const watcher = [];
    for (const pid of children) if ((await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).includes('watch-process')) watcher.push(Number(pid));
    t.is(watcher.length, 1, 'one watcher process');
    const fulls = d.lines(/^full sync done/).length;
    process.kill(watcher[0]!, 'SIGKILL');
    await until('a full sync', async () => d.lines(/^full sync done/).length > fulls, 30_000, 20);
    t.is(d.lines(/^the nf_tables watcher process ended/).length, 1);
    t.regex(String(d.lines(/^the kernel changed behind drover/)[0]?.reason), /nf_tables notifications were lost \(the watcher process ended and was started again/);
    await nft(w, ['delete', 'element', 'ip', 'drover', 'service-ips', `{ ${CLUSTER_IP} . tcp . 80 }`]);
    await until('a repair', async () => d.lines(/^put back the elements another program changed/).length === 1, 30_000, 20);
    t.regex(String(d.lines(/^the kernel changed behind drover/).at(-1)?.reason), /deleted element service-ips of ip drover/);
    t.is(await reached(w), 'b1,b2');
    await converged(t, w);
  });

  for (const c of [
    { what: 'an element of service-ips deleted', fault: `delete element ip drover service-ips { ${CLUSTER_IP} . tcp . 80 }\n`, names: /deleted element service-ips of ip drover/, full: false },
    { what: 'an element of endpoints added', fault: `add element ip drover endpoints { ${CLUSTER_IP} . tcp . 80 . 7 : 10.180.0.3 . 8080 }\n`, names: /added element endpoints of ip drover/, full: false },
    { what: 'set endpoint-count-2 deleted (with the rules of pick)', fault: 'flush chain ip drover pick\ndelete set ip drover endpoint-count-2\n', names: /deleted set endpoint-count-2 of ip drover/, full: true },
    { what: 'chain services deleted (with the jumps to it)', fault: 'flush chain ip drover nat-prerouting\nflush chain ip drover nat-output\ndelete chain ip drover services\n', names: /deleted chain services of ip drover/, full: true },
    { what: 'the table deleted', fault: 'delete table ip drover\n', names: /committed generation \d+: deleted table of ip drover, deleted chain/, full: true },
  ]) {
    test.serial(`${c.what} by hand, with traffic running: the watch has it repaired at once${c.full ? ' by a full sync' : ', those elements alone'}`, async (t) => {
      const w = await manifestWorld(t, manifest);
      await nft(w, ['-f', '-'], OTHER);
      const d = await start(t, w, '10m');
      const before = await listedLines(w);
      const load = await traffic(t, w);
      await new Promise((r) => setTimeout(r, 1000));
      const fulls = d.lines(/^full sync done/).length;
      await nft(w, ['-f', '-'], c.fault);
      const faultAt = Date.now();
      // A full sync, or the elements put back alone (the log line after their transaction).
      const doneLines = () => (c.full ? d.lines(/^full sync done/).slice(fulls) : d.lines(/^put back the elements another program changed/));
      await until('a repair', async () => doneLines().length > 0, 30_000, 20);
      const repair = d.lines(/^the kernel changed behind drover/);
      t.is(repair.length, 1, 'one repair');
      t.regex(String(repair[0]!.reason), c.names);
      t.regex(String(repair[0]!.msg), c.full ? /full sync$/ : /repairing what changed$/);
      const repairedMs = Date.parse(String(doneLines()[0]!.time)) - faultAt;
      await new Promise((r) => setTimeout(r, 1000));
      const s = await finish(t, c.what, load);
      t.deepEqual(await listedLines(w), before, 'the table holds drover\'s lines again');
      t.is(await reached(w), 'b1,b2');
      await converged(t, w);
      t.is(d.lines(/^full sync done/).length, fulls + (c.full ? 1 : 0), c.full ? 'one full sync: drover\'s own repair is not taken for drift' : 'no full sync');
      t.is(d.lines(/^the kernel changed behind drover/).length, 1, 'drover\'s own repair is not taken for drift');
      t.log(`${c.what}: repaired ${repairedMs} ms after nft returned${c.full ? ' (full sync)' : ' (those elements alone)'}; ${s.failed} of ${s.attempted} new connections failed ${JSON.stringify(s.errors)}`);
    });
  }
}
