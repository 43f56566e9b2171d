/**
 * `drover takeover --mode nftables` on a node that IPVS mode programmed
 * (kube-proxy's IPVS layout, which drover's IPVS mode writes exactly), with
 * traffic running, in the test guest: drover runs inside the node namespace
 * (`ip netns exec`: IPVS is read and written over netlink in its own
 * namespace). Before the takeover, a client holds 4 long-lived TCP
 * connections to a ClusterIP and 4 to a NodePort, each making a request
 * every 50 ms, and opens a new connection every 50 ms to each from two
 * streams. The long-lived connections live in IPVS's own connection table,
 * so the takeover keeps the virtual servers for them until none is
 * ESTABLISHED in IPVS's connection table, at most `--drain-timeout`. Once it
 * has checked every frontend, the long-lived connections go on through IPVS
 * until its counters move, then the client closes them, well within the
 * bound, and the drain ends there; one stream of new
 * connections goes on until after the takeover. No new connection may
 * fail, no long-lived one may break; afterwards only nftables mode's state
 * is left (read back: no IPVS chain, set, link or virtual server of the
 * layout), a virtual server outside the layout is still there, and
 * `drover diff` is clean.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { run } from '../../../src/testbed/exec.ts';
import { startTraffic, type Traffic, type TrafficSummary } from '../../../src/testbed/probe.ts';
import { CLUSTER_IP, faultWorld, reached } from '../../support/faults.ts';
import { DROVER, drover } from '../support/cli.ts';
import { ipvsadmState, registerIpvsTests, until } from '../support/env.ts';

const NODE_PORT = 30080;
const MANIFESTS =
  `apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: nsd}\nspec: {type: NodePort, clusterIP: ${CLUSTER_IP}, ports: [{name: http, port: 80, nodePort: ${NODE_PORT}, protocol: TCP}]}\n---\n` +
  `apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: web-1, namespace: nsd, labels: {kubernetes.io/service-name: web}}\naddressType: IPv4\n` +
  `ports: [{name: http, port: 8080, protocol: TCP}]\nendpoints:\n  - {addresses: [10.180.0.1], conditions: {ready: true}}\n  - {addresses: [10.180.0.2], conditions: {ready: true}}\n`;
/** A virtual server of another program: not on kube-ipvs0, not the node's, outside the service CIDR. */
const FOREIGN = '192.168.50.1:80';
/**
 * The emulated guest is ~25 times slower than the host: generous deadlines, never tight ones. A long-lived
 * connection counts as lost when a request on it goes unanswered for 30 s, and a new connection as failed when
 * it is not answered within 15 s: a connection the takeover cuts never answers again, while in the guest a
 * request on a long-lived connection went unanswered for 10 s beside drover's nftables full sync (about 28 s of
 * the guest's CPU), and twice in about 15 runs one new connection of some 3,500 was not answered within 5 s
 * (the earlier deadline: its SYN and two retransmissions) while the old state was being removed.
 */
const TRAFFIC = { intervalMs: 50, timeoutMs: 15_000, heldTimeoutMs: 30_000 };
/**
 * The drain's bound, which the client's closing of its long-lived
 * connections must beat (two ipvsadm reads after the check, then the
 * traffic helper's last round): a bound passed first cuts them, and one
 * still waiting for an answer counts as lost. Long, since a request in the
 * guest has gone unanswered for 10 s beside a full sync; the drain ends
 * when the connections do.
 */
const DRAIN = '120s';

/** What the node holds of each mode, read back from the kernel. */
async function holds(netns: string): Promise<{ ipvsChains: string[]; ipvsSets: string[]; link: boolean; virtualServers: string[]; nftables: boolean }> {
  const save = (await run('iptables-nft-save', [], { netns })).stdout;
  const sets = (await run('ipset', ['list', '-n'], { netns })).stdout.split('\n').filter((n) => n.startsWith('KUBE-'));
  const link = await run('ip', ['link', 'show', 'dev', 'kube-ipvs0'], { netns, allowFail: true });
  const nft = (await run('nft', ['list', 'tables'], { netns })).stdout;
  return {
    ipvsChains: [...save.matchAll(/^:(KUBE-[A-Z0-9-]+) /gm)].map((m) => m[1]!),
    ipvsSets: sets,
    link: link.code === 0,
    virtualServers: (await ipvsadmState(netns)).filter((l) => !l.startsWith('->')),
    nftables: /^table ip drover$/m.test(nft),
  };
}

if (await registerIpvsTests('IPVS takeover tests')) {
  test.serial('IPVS → nftables with traffic to a ClusterIP and a NodePort: none failed, none lost, only nftables mode left, a foreign virtual server kept, diff clean', async (t) => {
    const w = await faultWorld(t, { readyTimeoutMs: 120_000 });
    const node = w.topo.node;
    const source = join(w.scratch, 'manifests');
    await mkdir(source);
    await writeFile(join(source, 'web.yaml'), MANIFESTS);
    const flags = ['--source', source, '--service-cidr', '172.30.0.0/16', '--cluster-cidr', '10.180.0.0/16', '--iptables-backend', 'nft'];
    const synced = await drover(node, ['sync', '--once', '--mode', 'ipvs', ...flags]);
    t.is(synced.code, 0, synced.stderr);
    await run('ipvsadm', ['-A', '-t', FOREIGN, '-s', 'rr'], { netns: node });
    t.is(await reached(w), 'b1,b2');

    const start = (host: string, port: number, held: number) => startTraffic(w.topo, { host, port, held, ...TRAFFIC });
    const stopAll = (loads: Traffic[]) => Promise.all(loads.map((l) => l.stop())) as Promise<TrafficSummary[]>;
    const heldLoads = [await start(CLUSTER_IP, 80, 4), await start(w.topo.nodeIp, NODE_PORT, 4)];
    t.teardown(() => stopAll(heldLoads).then(() => {}, () => {}));
    // Started now, not after the check: starting a helper process takes seconds in the guest, and the drain's bound is short.
    const newLoads = [await start(CLUSTER_IP, 80, 0), await start(w.topo.nodeIp, NODE_PORT, 0)];
    t.teardown(() => stopAll(newLoads).then(() => {}, () => {}));

    const child = spawn('ip', ['netns', 'exec', node, process.execPath, DROVER, 'takeover', '--mode', 'nftables', '--drain-timeout', DRAIN, ...flags], { stdio: ['ignore', 'pipe', 'pipe'] });
    t.teardown(() => void child.kill('SIGKILL'));
    const said: string[] = [];
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    createInterface({ input: child.stdout }).on('line', (l) => said.push(l));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));

    // Checked: nftables mode takes new connections now, and the takeover waits for IPVS's own ones.
    await until('the takeover to check every frontend', async () => said.some((l) => l.startsWith('checked ')) || child.exitCode !== null, 600_000, 250).catch((e: Error) => {
      throw new Error(`${e.message}; takeover said:\n${said.join('\n')}\n${stderr.slice(-3000)}`);
    });
    // The long-lived connections keep going through IPVS beside nftables mode (its counters move), then end.
    const rounds = async () => (await run('ipvsadm', ['-Ln', '--stats'], { netns: node })).stdout;
    const before = await rounds();
    await until('the long-lived connections to go on beside nftables mode', async () => (await rounds()) !== before, 60_000, 250);
    const [heldCluster, heldNode] = await stopAll(heldLoads);
    // A generous deadline, cleared once the takeover ends: a pending timer would keep the test's process alive.
    let late: NodeJS.Timeout | undefined;
    const code = await Promise.race([exited, new Promise<'late'>((r) => (late = setTimeout(() => r('late'), 300_000)))]);
    clearTimeout(late);
    // New connections after the takeover has ended, through nftables mode alone.
    await new Promise((r) => setTimeout(r, 1000));
    const [newCluster, newNode] = await stopAll(newLoads);

    // The ClusterIP, and the NodePort on each of the node's addresses.
    t.true(said.some((l) => /^checked [2-9] frontends: the same endpoints in IPVS mode and nftables mode$/.test(l)), said.join('\n') + stderr);
    const done = said.find((l) => l.startsWith('done in')) ?? '';
    const drained = said.find((l) => l.startsWith('IPVS mode')) ?? '';
    for (const [what, held, fresh] of [['ClusterIP', heldCluster!, newCluster!], ['NodePort', heldNode!, newNode!]] as const) {
      t.log(
        `takeover IPVS → nftables, ${what}: new connections attempted ${held.attempted + fresh.attempted}, failed ${held.failed + fresh.failed}; ` +
          `long-lived lost ${held.lost} of ${held.held} (${held.heldRequests} requests on them); ${done}; ${drained}`,
      );
      t.true(held.attempted > 10 && fresh.attempted > 10 && held.heldRequests > 0, `${what}: traffic ran`);
      t.is(held.failed + fresh.failed, 0, `${what}: ${JSON.stringify([held.errors, fresh.errors])}`);
      t.is(held.lost, 0, `${what}: ${JSON.stringify(held.lostErrors)}`);
    }
    t.is(code, 0, said.join('\n') + stderr);
    // Ended once the client closed its long-lived connections, well before the bound.
    t.regex(drained, /^IPVS mode's [0-9]+ established connections ended in [0-9]+ ms$/, said.join('\n'));
    t.log(said.join('\n'));
    t.regex(done, /^done in [0-9]+ ms: only nftables mode's state is left$/, said.join('\n'));
    t.deepEqual(await holds(node), { ipvsChains: [], ipvsSets: [], link: false, virtualServers: [`TCP ${FOREIGN} rr`], nftables: true }, 'read back');
    t.is(await reached(w), 'b1,b2');
    const diff = await drover(node, ['diff', '--mode', 'nftables', ...flags]);
    t.deepEqual([diff.code, diff.stdout], [0, 'no differences\n'], diff.stderr);
  });
}
