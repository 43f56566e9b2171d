/**
 * nftables mode in a throw-away network namespace: the packet-flow table
 * (test/support/packet-flow.ts) with real connections, then what a sync
 * writes (elements only for the common changes), adoption on restart,
 * drift repair and cleanup, read back with `nft -j list table ip drover`.
 */
import test from 'ava';
import { NftablesBackend } from '../../src/modes/nftables/backend.ts';
import { SystemNft } from '../../src/modes/nftables/exec.ts';
import { probe } from '../../src/testbed/probe.ts';
import { createTopology, testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';
import { BACKENDS, CASES, CLIENTS, CLUSTER_CIDR, LB_IP, NODE_IP, STATE } from '../support/packet-flow.ts';
import { run } from '../../src/testbed/exec.ts';
import type { Snapshot } from '../../src/model/types.ts';
import { trace } from '../../src/inspect/trace.ts';
import { localAddresses } from '../../src/modes/iptables/live.ts';
import { nftTraceContext } from '../../src/modes/nftables/trace.ts';

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

  test.serial('the kernel reads back as written: a second full sync writes nothing', async (t) => {
    const r = await b.sync(STATE, FULL);
    t.deepEqual([r.written, r.deleted], [{ 'set entry': 0, set: 0, chain: 0 }, { 'set entry': 0, set: 0, chain: 0 }]);
  });

  for (const c of CASES) {
    test.serial(c.what, async (t) => {
      const from = topo.client(c.from);
      const count = c.error ? 3 : 40;
      const real = await probe(topo, { from: from.netns, host: c.host, port: c.port, count, timeoutMs: 1000 });
      if (c.error) {
        t.deepEqual(real.errors, { [c.error]: count });
        return;
      }
      t.deepEqual([Object.keys(real.counts).sort(), real.errors], [c.reach, {}]);
      const expected = c.seen === 'client' ? from.ip : topo.gateway;
      for (const name of c.reach!) t.deepEqual(real.clientsSeen[name], [expected], `${name} sees ${expected}`);
    });
  }

  void run;
  void ({} as Snapshot);

  test.serial('the trace of the live table names the endpoints real connections reach, or the same verdict, for every packet-flow case', async (t) => {
    const { ctx, note } = nftTraceContext(await new SystemNft({ netns: topo.node }).list(), await localAddresses(topo.node));
    t.is(note, '', "the live table is drover's layout");
    for (const c of CASES) {
      const from = topo.client(c.from);
      const count = c.error ? 3 : 40;
      const real = await probe(topo, { from: from.netns, host: c.host, port: c.port, count, timeoutMs: 1000 });
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
    const drover = (...args: string[]) => run(process.execPath, [new URL('../../bin/drover.js', import.meta.url).pathname, ...args, '--mode', 'nftables', '--netns', topo.node]);
    const traceOut = await drover('trace', '--src', topo.client('far').ip, '--dst', `${NODE_IP}:30081`);
    t.is(traceOut.code, 0, traceOut.stderr);
    t.regex(traceOut.stdout, /^verdict: DNAT to 1 endpoint, not masqueraded$/m);
    t.regex(traceOut.stdout, new RegExp(`^  ${topo.backend('b1').ip.replace(/\./g, '\\.')}:8080 +100\\.00%  not masqueraded$`, 'm'));
    const chainsOut = await drover('chains');
    t.is(chainsOut.code, 0, chainsOut.stderr);
    t.regex(chainsOut.stdout, /^# 192\.168\.100\.1 \. tcp \. 30081\n  sets: service-ips, external-local, endpoint-count-2, local-endpoint-count-1$/m);
  });
}
