/**
 * Packets through drover's iptables rules, between network namespaces:
 * clients connect to ClusterIPs and the echo servers say which backend
 * answered and which source address they saw.
 */
import test from 'ava';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { SystemIptables } from '../../src/kernel/iptables/exec.ts';
import { localAddresses, readTables } from '../../src/kernel/iptables/live.ts';
import { iptablesTraceContext } from '../../src/modes/shared/kube-chains/trace.ts';
import { trace } from '../../src/inspect/trace.ts';
import { connectOnce, probe } from '../../src/testbed/probe.ts';
import { createTopology, testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';
import { flowProbeTimeoutMs } from '../support/packet-flow.ts';

const unavailable = await testbedUnavailableReason();
const FULL = { full: true, changed: new Set<string>() };
const CLUSTER_CIDR = '10.244.0.0/16';

const BACKENDS = [
  { name: 'b1', ip: '10.244.1.2', ports: [8080, 9100] },
  { name: 'b2', ip: '10.244.1.3', ports: [8080, 9100] },
  { name: 'b3', ip: '10.244.1.4', ports: [8080] },
];
const web = (names: string[]) =>
  sp('default/web:http', '10.96.0.10', 80, names.map((n) => ep(`${BACKENDS.find((b) => b.name === n)!.ip}:8080`)));
const metrics = sp('default/web:metrics', '10.96.0.10', 9100, [ep('10.244.1.2:9100'), ep('10.244.1.3:9100')]);
const empty = sp('default/empty:http', '10.96.0.11', 80, []);

let topo: Topology;
let backend: IptablesBackend;

if (unavailable) {
  test.skip(`data-path tests skipped: ${unavailable}`, () => {});
} else {
  test.before(async () => {
    topo = await createTopology({
      backends: BACKENDS,
      clients: [
        { name: 'outside', ip: '192.168.100.2' },
        { name: 'inside', ip: '10.244.9.2' },
      ],
    });
    // The kernel rate-limits ICMP errors (icmp_ratelimit, per namespace); the
    // REJECT tests send many in a row, so lift the limit in the node namespace.
    await topo.exec(topo.node, 'sysctl', ['-q', '-w', 'net.ipv4.icmp_ratelimit=0']);
    const exec = new SystemIptables({ variant: 'nft', netns: topo.node });
    backend = new IptablesBackend({ exec, render: { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false }, logger: silentLogger() });
    await backend.sync(snap(web(['b1', 'b2', 'b3']), metrics, empty), FULL);
  });

  test.after.always(async () => {
    await topo?.destroy();
  });

  test.serial('connections to a ClusterIP reach every endpoint, on each port of a multi-port service', async (t) => {
    const s = await probe(topo, { from: topo.client('inside').netns, host: '10.96.0.10', port: 80, count: 60 });
    t.deepEqual(Object.keys(s.counts).sort(), ['b1', 'b2', 'b3']);
    t.deepEqual(s.errors, {});
    const m = await probe(topo, { from: topo.client('inside').netns, host: '10.96.0.10', port: 9100, count: 30 });
    t.deepEqual(Object.keys(m.counts).sort(), ['b1', 'b2']);
    t.true(m.results.every((r) => r.ok && r.reply.port === 9100));
  });

  test.serial('traffic from outside the cluster CIDR is masqueraded; from inside it keeps its source', async (t) => {
    const outside = await probe(topo, { from: topo.client('outside').netns, host: '10.96.0.10', port: 80, count: 10 });
    t.deepEqual([...new Set(Object.values(outside.clientsSeen).flat())], [topo.gateway]);
    const inside = await probe(topo, { from: topo.client('inside').netns, host: '10.96.0.10', port: 80, count: 10 });
    t.deepEqual([...new Set(Object.values(inside.clientsSeen).flat())], ['10.244.9.2']);
  });

  test.serial('hairpin: an endpoint reaching itself through its service is masqueraded', async (t) => {
    const b1 = topo.backend('b1');
    const s = await probe(topo, { from: b1.netns, host: '10.96.0.10', port: 80, count: 40 });
    t.deepEqual(s.errors, {}, 'every hairpin connection completes');
    t.true((s.counts.b1 ?? 0) > 0, 'some connections land on b1 itself');
    t.deepEqual(s.clientsSeen.b1, [topo.gateway], 'b1 sees the node, not itself');
    t.deepEqual(s.clientsSeen.b2, [b1.ip], 'b2 sees b1 (pod-to-pod is not masqueraded)');
  });

  test.serial('connections from the node itself are load-balanced too (OUTPUT)', async (t) => {
    const s = await probe(topo, { from: topo.node, host: '10.96.0.10', port: 80, count: 30 });
    t.deepEqual(Object.keys(s.counts).sort(), ['b1', 'b2', 'b3']);
  });

  test.serial('a ClusterIP with no endpoints is refused at once', async (t) => {
    // Refused within 1 s: a hang would end in ETIMEDOUT (TCP's first SYN retransmission is at 1 s).
    const r = await connectOnce(topo, { from: topo.client('outside').netns, host: '10.96.0.11', port: 80, timeoutMs: 1000 });
    t.deepEqual(r, { ok: false, code: 'ECONNREFUSED' });
  });

  test.serial('after an endpoint is removed, no new connection reaches it', async (t) => {
    await backend.sync(snap(web(['b1', 'b3']), metrics, empty), { full: false, changed: new Set(['default/web:http']) });
    const s = await probe(topo, { from: topo.client('inside').netns, host: '10.96.0.10', port: 80, count: 60 });
    t.deepEqual(Object.keys(s.counts).sort(), ['b1', 'b3']);
    t.deepEqual(s.errors, {});
    // Endpoints back: b2 is reached again.
    await backend.sync(snap(web(['b1', 'b2', 'b3']), metrics, empty), { full: false, changed: new Set(['default/web:http']) });
    const back = await probe(topo, { from: topo.client('inside').netns, host: '10.96.0.10', port: 80, count: 60 });
    t.deepEqual(Object.keys(back.counts).sort(), ['b1', 'b2', 'b3']);
  });

  test.serial("internalTrafficPolicy Local: ClusterIP traffic reaches only this node's endpoints, and is dropped when only other nodes have some", async (t) => {
    const node = { name: 'node-a', addresses: [] };
    const local = sp('default/local:http', '10.96.0.12', 80, [ep('10.244.1.2:8080', { nodeName: 'node-a' }), ep('10.244.1.3:8080', { nodeName: 'node-b' })], {
      internalTrafficPolicy: 'Local',
    });
    const remote = sp('default/remote:http', '10.96.0.13', 80, [ep('10.244.1.4:8080', { nodeName: 'node-b' })], { internalTrafficPolicy: 'Local' });
    const state = { ...snap(web(['b1', 'b2', 'b3']), metrics, empty, local, remote), node };
    await backend.sync(state, FULL);
    t.teardown(() => backend.sync(snap(web(['b1', 'b2', 'b3']), metrics, empty), FULL).then(() => undefined));
    const s = await probe(topo, { from: topo.client('inside').netns, host: '10.96.0.12', port: 80, count: 30 });
    t.deepEqual([Object.keys(s.counts), s.errors], [['b1'], {}]);
    // Dropped, not refused: the connection attempt times out.
    t.deepEqual(await connectOnce(topo, { from: topo.client('inside').netns, host: '10.96.0.13', port: 80, timeoutMs: 1500 }), { ok: false, code: 'ETIMEDOUT' });
    const exec = new SystemIptables({ variant: 'nft', netns: topo.node });
    const traced = trace(iptablesTraceContext(await readTables(exec), await localAddresses(topo.node)), { src: '10.244.9.2', dst: '10.96.0.13', dport: 80, proto: 'tcp' });
    t.deepEqual(traced.outcomes.map((o) => o.verdict.kind), ['drop']);
    // The kernel reads back as rendered: a second full sync has nothing to write.
    t.deepEqual((await backend.sync(state, FULL)).written, { chain: 0, rule: 0 });
  });
}

/** Trace agrees with reality: the endpoints trace names are exactly those real connections reach. */
if (!unavailable) {
  const cases = [
    { what: 'multi-port service, http port, from inside', from: 'inside', host: '10.96.0.10', port: 80 },
    { what: 'multi-port service, metrics port, from outside the cluster CIDR', from: 'outside', host: '10.96.0.10', port: 9100 },
    { what: 'hairpin from an endpoint of the service', from: 'b1', host: '10.96.0.10', port: 80 },
    { what: 'a service with no endpoints', from: 'outside', host: '10.96.0.11', port: 80 },
  ];
  for (const c of cases) {
    test.serial(`trace agrees with reality: ${c.what}`, async (t) => {
      const exec = new SystemIptables({ variant: 'nft', netns: topo.node });
      const fromNs = c.from.startsWith('b') ? topo.backend(c.from) : topo.client(c.from);
      const result = trace(
        iptablesTraceContext(await readTables(exec), await localAddresses(topo.node)),
        { src: fromNs.ip, dst: c.host, dport: c.port, proto: 'tcp' },
      );
      const count = 40;
      const real = await probe(topo, { from: fromNs.netns, host: c.host, port: c.port, count, timeoutMs: flowProbeTimeoutMs() });
      const backendIp = (name: string) => topo.backend(name).ip;
      const reached = Object.keys(real.counts).map((n) => `${backendIp(n)}:${c.port === 80 ? 8080 : 9100}`).sort();
      const traced = result.outcomes.flatMap((o) => (o.verdict.kind === 'dnat' ? [`${o.verdict.ip}:${o.verdict.port}`] : [])).sort();
      t.deepEqual(reached, traced);
      for (const o of result.outcomes) {
        if (o.verdict.kind === 'dnat') {
          const name = topo.backends.find((b) => b.ip === (o.verdict as { ip: string }).ip)!.name;
          const expectedSource = o.masqueraded ? topo.gateway : fromNs.ip;
          t.deepEqual(real.clientsSeen[name], [expectedSource], `${name}: masquerade verdict ${o.masqueraded}`);
        } else {
          t.is(o.verdict.kind, 'reject');
          t.deepEqual(real.errors, { ECONNREFUSED: count });
        }
      }
    });
  }
}
