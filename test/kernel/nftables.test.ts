/**
 * nftables mode in a throw-away network namespace: the packet-flow table
 * (test/support/packet-flow.ts) with real connections, then what a sync
 * writes (elements only for the common changes), adoption on restart,
 * drift repair and cleanup, read back with `nft -j list table ip drover`.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SyncResult } from '../../src/proxier/backend.ts';
import { NftablesBackend } from '../../src/modes/nftables/backend.ts';
import { SystemNft } from '../../src/modes/nftables/exec.ts';
import { holdConnection, probe } from '../../src/testbed/probe.ts';
import { createTopology, testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';
import { affinityRun } from '../support/affinity.ts';
import { BACKENDS, CASES, CLIENTS, CLUSTER_CIDR, flowProbeTimeoutMs, LB_IP, NODE_IP, STATE } from '../support/packet-flow.ts';
import { run } from '../../src/kernel/exec.ts';
import { withNetns } from '../../src/testbed/netns.ts';
import type { ServicePort, Snapshot } from '../../src/model/types.ts';
import { trace } from '../../src/inspect/trace.ts';
import { localAddresses } from '../../src/kernel/iptables/live.ts';
import { nftTraceContext } from '../../src/modes/nftables/trace.ts';
import { DROVER } from '../support/drover-bin.ts';
import { moduleArgv } from '../../src/util/node-module.ts';

const unavailable = await testbedUnavailableReason();
const FULL = { full: true, changed: new Set<string>() };
const RENDER = { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false };
let topo: Topology;
let nft: SystemNft;

function backend(): NftablesBackend {
  return new NftablesBackend({ nft, render: RENDER, frontends: { nodePortIPs: [NODE_IP] }, logger: silentLogger() });
}

if (unavailable) {
  test.skip(`nftables mode tests skipped: ${unavailable}`, () => {});
} else {
  let b: NftablesBackend;
  test.before(async () => {
    topo = await createTopology({ backends: BACKENDS, nodeIp: NODE_IP, clients: CLIENTS });
    await topo.exec(topo.node, 'sysctl', ['-q', '-w', 'net.ipv4.icmp_ratelimit=0']);
    // The LoadBalancer IP is the node's own, as a VIP-mode load balancer often makes it (see packet-flow.ts).
    await topo.exec(topo.node, 'ip', ['route', 'add', 'local', `${LB_IP}/32`, 'dev', 'lo']);
    nft = new SystemNft({ netns: topo.node });
    b = backend();
    await b.sync(STATE, FULL);
  });

  test.after.always(async () => {
    await topo?.destroy();
  });

  test.serial('nft accepts the rendered script of the unit tests as it is (nft -c -f, nothing committed)', async (t) => {
    const file = fileURLToPath(new URL('../fixtures/nftables/render-web.nft', import.meta.url));
    await withNetns(async (netns) => {
      const r = await run('ip', ['netns', 'exec', netns, '/usr/sbin/nft', '-c', '-f', file], { allowFail: true });
      t.is(r.code, 0, r.stderr);
      t.is((await run('ip', ['netns', 'exec', netns, '/usr/sbin/nft', 'list', 'tables'], {})).stdout, '', 'a check commits nothing');
    });
  });

  test.serial('the kernel reads back as written: a second full sync writes nothing', async (t) => {
    const r = await b.sync(STATE, FULL);
    t.deepEqual([r.written, r.deleted], [{ 'set entry': 0, set: 0, chain: 0 }, { 'set entry': 0, set: 0, chain: 0 }]);
  });

  for (const c of CASES) {
    test.serial(c.what, async (t) => {
      const from = topo.client(c.from);
      const count = c.error ? 3 : 40;
      const real = await probe(topo, { from: from.netns, host: c.host, port: c.port, count, timeoutMs: flowProbeTimeoutMs(c.error) });
      if (c.error) {
        t.deepEqual(real.errors, { [c.error]: count });
        return;
      }
      t.deepEqual([Object.keys(real.counts).sort(), real.errors], [c.reach, {}]);
      const expected = c.seen === 'client' ? from.ip : topo.gateway;
      for (const name of c.reach!) t.deepEqual(real.clientsSeen[name], [expected], `${name} sees ${expected}`);
    });
  }

  test.serial('the trace of the live table names the endpoints real connections reach, or the same verdict, for every packet-flow case', async (t) => {
    const { ctx, note } = nftTraceContext(await new SystemNft({ netns: topo.node }).list(), await localAddresses(topo.node));
    t.is(note, '', "the live table is drover's layout");
    for (const c of CASES) {
      const from = topo.client(c.from);
      const count = c.error ? 3 : 40;
      const real = await probe(topo, { from: from.netns, host: c.host, port: c.port, count, timeoutMs: flowProbeTimeoutMs(c.error) });
      const traced = trace(ctx, { src: from.ip, dst: c.host, dport: c.port, proto: 'tcp' }).outcomes;
      if (c.error) {
        t.deepEqual([real.errors, traced.map((o) => o.verdict.kind)], [{ [c.error]: count }, [c.error === 'ECONNREFUSED' ? 'reject' : 'drop']], c.what);
        continue;
      }
      const reached = Object.keys(real.counts).map((n) => topo.backend(n).ip).sort();
      t.deepEqual(traced.flatMap((o) => (o.verdict.kind === 'dnat' ? [o.verdict.ip] : [])).sort(), reached, `${c.what}: trace names the endpoints reached`);
      const masqueraded = Object.keys(real.counts).every((n) => real.clientsSeen[n]?.every((ip) => ip === topo.gateway));
      t.true(traced.every((o) => o.masqueraded === masqueraded), `${c.what}: trace agrees on masquerade`);
    }
    // The commands themselves, on the same table.
    const drover = (...args: string[]) => run(process.execPath, [DROVER, ...args, '--mode', 'nftables', '--netns', topo.node]);
    const traceOut = await drover('trace', '--src', topo.client('far').ip, '--dst', `${NODE_IP}:30081`);
    t.is(traceOut.code, 0, traceOut.stderr);
    t.regex(traceOut.stdout, /^verdict: DNAT to 1 endpoint, not masqueraded$/m);
    t.regex(traceOut.stdout, new RegExp(`^  ${topo.backend('b1').ip.replace(/\./g, '\\.')}:8080 +100\\.00%  not masqueraded$`, 'm'));
    const chainsOut = await drover('chains');
    t.is(chainsOut.code, 0, chainsOut.stderr);
    t.regex(chainsOut.stdout, /^# 192\.168\.100\.1 \. tcp \. 30081\n  sets: service-ips, external-local, endpoint-count-2, local-endpoint-count-1$/m);
  });

  test.serial('ClientIP affinity: a client keeps its endpoint, through the ClusterIP and the NodePort alike; after the timeout it may move', async (t) => {
    const from = topo.client('outside').netns;
    const { each: [viaNodePort, viaClusterIP], after: seen } = await affinityRun(topo, from, [{ host: NODE_IP, port: 30084 }, { host: '10.96.0.14', port: 80 }]);
    t.deepEqual([viaNodePort!.errors, viaClusterIP!.errors], [{}, {}]);
    t.is(Object.keys(viaNodePort!.counts).length, 1, `one endpoint through the NodePort: ${JSON.stringify(viaNodePort!.counts)}`);
    t.is(Object.keys(viaClusterIP!.counts).length, 1, `one endpoint through the ClusterIP: ${JSON.stringify(viaClusterIP!.counts)}`);
    t.true(seen.size >= 2, `after the timeout the client moved: ${[...seen].join(', ')}`);
  });

  test.serial("ClientIP affinity: when a client's endpoint goes, its affinity entry goes with it and the client moves at once", async (t) => {
    const from = topo.client('outside').netns;
    const first = await probe(topo, { from, host: '10.96.0.14', port: 80, count: 5 });
    const [kept] = Object.keys(first.counts);
    t.is(Object.keys(first.counts).length, 1);
    const sticky = STATE.services.get('default/sticky:http')!;
    const without = withService(STATE, { ...sticky, endpoints: sticky.endpoints.filter((e) => e.ip !== topo.backend(kept!).ip) });
    const r = await b.sync(without, { full: false, changed: new Set(['default/sticky:http']) });
    t.true(r.deleted['set entry']! > 0);
    const map = await nft.listSet('affinity', 'map');
    t.false([...(map?.elements.values() ?? [])].some((v) => v?.startsWith(`${topo.backend(kept!).ip} . `)), 'no affinity entry points to the removed endpoint');
    const after = await probe(topo, { from, host: '10.96.0.14', port: 80, count: 5 });
    t.deepEqual(after.errors, {});
    t.false(kept! in after.counts, `${kept} is gone: ${JSON.stringify(after.counts)}`);
    await b.sync(STATE, { full: false, changed: new Set(['default/sticky:http']) });
  });

  test.serial('a partial sync of one endpoint removed writes a few elements over netlink-sized transactions, no structure', async (t) => {
    const web = STATE.services.get('default/web:http')!;
    const two = withService(STATE, { ...web, endpoints: web.endpoints.slice(0, 2) });
    const r = await b.sync(two, { full: false, changed: new Set(['default/web:http']) });
    t.deepEqual(r.detail, { mode: 'nftables', via: 'nft', structural: false }, 'count 2 is in use already: elements only');
    // Per frontend (ClusterIP, NodePort, external IP, LB IP): its last slot deleted and one moved, or the removed slot deleted; and the count sets swapped.
    t.true(r.written['set entry']! <= 4 * 2 + 1 && r.deleted['set entry']! <= 4 * 3 + 1, JSON.stringify(r));
    const s = await probe(topo, { from: topo.client('pod').netns, host: '10.96.0.10', port: 80, count: 40 });
    t.deepEqual(Object.keys(s.counts).sort(), ['b1', 'b2']);
    const live = await nft.list();
    t.false(live.sets.get('endpoint-count-3')!.elements.has('10.96.0.10 . tcp . 80'));
    t.true(live.sets.get('endpoint-count-2')!.elements.has('10.96.0.10 . tcp . 80'));
    const back = await b.sync(STATE, { full: false, changed: new Set(['default/web:http']) });
    t.is(back.deleted.set, 0);
    t.deepEqual((await b.sync(STATE, FULL)).written, { 'set entry': 0, set: 0, chain: 0 }, 'the partial syncs left what a full sync wants');
  });

  test.serial('a new endpoint count adds its set and rule in the same transaction as the elements', async (t) => {
    const web = STATE.services.get('default/web:http')!;
    const extra = [...web.endpoints, { ...web.endpoints[0]!, port: 8081 }, { ...web.endpoints[1]!, port: 8081 }, { ...web.endpoints[2]!, port: 8081 }];
    const six = withService(STATE, { ...web, endpoints: extra });
    const r = await b.sync(six, { full: false, changed: new Set(['default/web:http']) });
    t.deepEqual(r.detail, { mode: 'nftables', via: 'nft', structural: true });
    const live = await nft.list();
    t.true(live.sets.has('endpoint-count-6'));
    t.true(live.chains.get('pick')!.comments.includes('one of 6 endpoints, any protocol'));
    await b.sync(STATE, { full: false, changed: new Set(['default/web:http']) });
    const full = await b.sync(STATE, FULL);
    t.is(full.deleted.set, 1, 'the next full sync deletes the unused count set');
    t.false((await nft.list()).sets.has('endpoint-count-6'));
  });

  test.serial('a restart adopts the live table: a new backend\'s first sync writes nothing and established connections keep working', async (t) => {
    const held = await holdConnection(topo, { from: topo.client('pod').netns, host: '10.96.0.10', port: 80 });
    const fresh = backend();
    const r = await fresh.sync(STATE, FULL);
    t.deepEqual([r.written, r.deleted], [{ 'set entry': 0, set: 0, chain: 0 }, { 'set entry': 0, set: 0, chain: 0 }]);
    t.true((await held.request()).ok, 'the held connection still answers');
    await held.close();
  });

  test.serial('drift: a deleted element, a flushed chain and a foreign set in the table are repaired by the next full sync', async (t) => {
    await run('ip', ['netns', 'exec', topo.node, '/usr/sbin/nft', 'delete element ip drover endpoints { 10.96.0.10 . tcp . 80 . 1 }'], {});
    await run('ip', ['netns', 'exec', topo.node, '/usr/sbin/nft', 'flush chain ip drover masquerading'], {});
    await run('ip', ['netns', 'exec', topo.node, '/usr/sbin/nft', 'add set ip drover stray { type ipv4_addr; }'], {});
    const r = await b.sync(STATE, FULL);
    t.deepEqual([r.written, r.deleted], [{ 'set entry': 1, set: 0, chain: 1 }, { 'set entry': 0, set: 1, chain: 0 }]);
    t.deepEqual((await b.sync(STATE, FULL)).written, { 'set entry': 0, set: 0, chain: 0 });
    const s = await probe(topo, { from: topo.client('outside').netns, host: '10.96.0.10', port: 80, count: 40 });
    t.deepEqual(Object.keys(s.counts).sort(), ['b1', 'b2', 'b3']);
    t.deepEqual([...new Set(Object.values(s.clientsSeen).flat())], [topo.gateway], 'masquerading works again');
  });

  test.serial('drift: a base chain with another priority makes the next full sync write the table again whole, in one transaction', async (t) => {
    await run('ip', ['netns', 'exec', topo.node, '/usr/sbin/nft', 'delete chain ip drover filter-output'], {});
    await run('ip', ['netns', 'exec', topo.node, '/usr/sbin/nft', 'add chain ip drover filter-output { type filter hook output priority 5; policy accept; }'], {});
    const r = await b.sync(STATE, FULL);
    t.true(r.written.chain! > 10, 'every chain written');
    t.deepEqual((await b.sync(STATE, FULL)).written, { 'set entry': 0, set: 0, chain: 0 });
  });

  test.serial('an incomplete source deletes nothing of the service ports it does not list', async (t) => {
    const only = withoutService(STATE, 'default/web:http');
    const r = await b.sync(only, { full: true, changed: new Set(), incomplete: true });
    t.deepEqual(r.deleted, { 'set entry': 0, set: 0, chain: 0 });
    const s = await probe(topo, { from: topo.client('pod').netns, host: '10.96.0.10', port: 80, count: 20 });
    t.deepEqual(Object.keys(s.counts).sort(), ['b1', 'b2', 'b3']);
  });

  test.serial('over nf_tables netlink: an endpoint removed and put back are element-only transactions, and traffic follows', async (t) => {
    const child = spawn('ip', ['netns', 'exec', topo.node, ...moduleArgv(import.meta.url, '../support/nft-netlink-syncs'), NODE_IP], { stdio: ['pipe', 'pipe', 'inherit'] });
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    // It waits for "go" on stdin: a failure before that must not leave it running.
    t.teardown(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString('utf8')));
    const line = async (n: number): Promise<string> => {
      for (let i = 0; i < 600 && out.split('\n').length <= n + 1; i++) await new Promise((r) => setTimeout(r, 100));
      return out.split('\n')[n]!;
    };
    const [full, partial] = JSON.parse(await line(0)) as Array<Pick<SyncResult, 'written' | 'deleted' | 'detail'>>;
    t.deepEqual(full!.detail, { mode: 'nftables', via: 'none', structural: false }, 'the table was already there: the full sync adopts it');
    t.deepEqual(partial!.detail, { mode: 'nftables', via: 'netlink', structural: false });
    const s = await probe(topo, { from: topo.client('pod').netns, host: '10.96.0.10', port: 80, count: 30 });
    t.deepEqual(Object.keys(s.counts).sort(), ['b2', 'b3'], 'b1 is gone from the ClusterIP');
    child.stdin.end('go\n');
    const back = JSON.parse(await line(1)) as Pick<SyncResult, 'detail'>;
    t.deepEqual(back.detail, { mode: 'nftables', via: 'netlink', structural: false });
    t.is(await exited, 0);
    t.deepEqual((await b.sync(STATE, FULL)).written, { 'set entry': 0, set: 0, chain: 0 }, 'netlink wrote exactly what a full sync wants');
  });

  test.serial('drover sync --once --mode nftables, started inside the namespace, syncs over netlink and exits', async (t) => {
    const bin = DROVER;
    const examples = fileURLToPath(new URL('../../examples/', import.meta.url));
    const state = await mkdtemp(join(tmpdir(), 'drover-nft-'));
    try {
      const r = await run('ip', ['netns', 'exec', topo.node, process.execPath, bin, 'sync', '--once', '--mode', 'nftables', '--source', examples, '--cluster-cidr', CLUSTER_CIDR, '--state-dir', state], { allowFail: true, timeoutMs: 60_000 });
      t.is(r.code, 0, r.stderr);
      t.regex(r.stderr, /"elements":"netlink"/, 'the element writer is netlink');
      t.true((await nft.list()).sets.get('service-ips')!.elements.has('10.96.0.80 . tcp . 80'), "the examples' ClusterIP is programmed");
    } finally {
      await rm(state, { recursive: true, force: true });
      await b.sync(STATE, FULL);
    }
  });

  test.serial('cleanup deletes table ip drover and nothing else', async (t) => {
    await run('ip', ['netns', 'exec', topo.node, '/usr/sbin/nft', 'add table ip other'], {});
    const r = await backend().cleanup();
    t.true(r.removed.chain! > 0 && r.removed.set! > 0);
    const tables = (await run('ip', ['netns', 'exec', topo.node, '/usr/sbin/nft', 'list tables'], {})).stdout;
    t.is(tables.trim(), 'table ip other');
    await b.sync(STATE, FULL);
  });
}

/** `snapshot` with service port `sp` replaced. */
function withService(snapshot: Snapshot, sp: ServicePort): Snapshot {
  return { ...snapshot, services: new Map([...snapshot.services].map(([k, v]) => [k, k === sp.key ? sp : v])) };
}

/** `snapshot` without service port `key`. */
function withoutService(snapshot: Snapshot, key: string): Snapshot {
  return { ...snapshot, services: new Map([...snapshot.services].filter(([k]) => k !== key)) };
}
