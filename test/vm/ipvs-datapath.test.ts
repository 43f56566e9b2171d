/**
 * Packets through drover's IPVS mode, between network namespaces of the
 * guest (src/testbed topology): IPVS in the node namespace, driven by
 * driver.ts running inside it; clients connect to ClusterIPs and the echo
 * servers say which backend answered and which source address they saw.
 * The hairpin case is also traced over the live state (`drover trace --mode
 * ipvs` through the driver): the trace must name the real servers the
 * connections reach and which of them see the node's address.
 */
import test from 'ava';
import { formatTrace } from '../../src/inspect/trace-format.ts';
import { ipvsTraceFormat } from '../../src/modes/ipvs/trace.ts';
import { holdConnection, connectOnce, probe } from '../../src/testbed/probe.ts';
import type { Topology } from '../../src/testbed/topology.ts';
import type { ServicePort } from '../../src/model/types.ts';
import { ep, sp } from '../support/snapshots.ts';
import { Driver } from './support/driver-client.ts';
import { createIpvsTopology, ipvsadmState, PROBE_TIMEOUT_MS, realServerConns, registerIpvsTests, until } from './support/env.ts';

const BACKENDS = [
  { name: 'b1', ip: '10.244.1.2', ports: [8080, 9100] },
  { name: 'b2', ip: '10.244.1.3', ports: [8080, 9100] },
  { name: 'b3', ip: '10.244.1.4', ports: [8080] },
  { name: 'b4', ip: '10.244.1.5', ports: [8080] },
];
const ipOf = (name: string) => BACKENDS.find((b) => b.name === name)!.ip;
const web = (names: string[]) => sp('default/web:http', '10.96.0.10', 80, names.map((n) => ep(`${ipOf(n)}:8080`)));
const metrics = sp('default/web:metrics', '10.96.0.10', 9100, [ep('10.244.1.2:9100'), ep('10.244.1.3:9100')]);
const empty = sp('default/empty:http', '10.96.0.11', 80, []);
/** A service nothing connects to before one of its endpoints is removed. */
const quiet = (names: string[]) => sp('default/quiet:http', '10.96.0.12', 80, names.map((n) => ep(`${ipOf(n)}:8080`)));
const GRACEFUL_PERIOD_MS = 20_000;

let topo: Topology;
let driver: Driver;
let state: ServicePort[];

async function apply(services: ServicePort[], changed?: string[]): Promise<void> {
  state = services;
  await driver.sync(services, changed ? { full: false, changed } : { full: true });
}

if (await registerIpvsTests('IPVS data-path tests')) {
  test.before(async () => {
    topo = await createIpvsTopology(BACKENDS);
    driver = await Driver.start(topo.node);
    await driver.open({ gracefulPeriodMs: GRACEFUL_PERIOD_MS, gracefulCheckIntervalMs: 1000 });
    await apply([web(['b1', 'b2', 'b3']), metrics, empty, quiet(['b3', 'b4'])]);
  });

  test.after.always(async () => {
    await driver?.stop();
    await topo?.destroy();
  });

  test.serial('ipvsadm lists exactly the desired virtual and real servers', async (t) => {
    t.deepEqual(await ipvsadmState(topo.node), [
      'TCP 10.96.0.10:80 rr',
      '-> 10.244.1.2:8080 Masq 1',
      '-> 10.244.1.3:8080 Masq 1',
      '-> 10.244.1.4:8080 Masq 1',
      'TCP 10.96.0.10:9100 rr',
      '-> 10.244.1.2:9100 Masq 1',
      '-> 10.244.1.3:9100 Masq 1',
      'TCP 10.96.0.11:80 rr',
      'TCP 10.96.0.12:80 rr',
      '-> 10.244.1.4:8080 Masq 1',
      '-> 10.244.1.5:8080 Masq 1',
    ]);
  });

  test.serial('connections to a ClusterIP reach every endpoint, round robin, on each port of a multi-port service', async (t) => {
    const s = await probe(topo, { from: topo.client('inside').netns, host: '10.96.0.10', port: 80, count: 30, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(s.errors, {});
    t.deepEqual(s.counts, { b1: 10, b2: 10, b3: 10 });
    const m = await probe(topo, { from: topo.client('inside').netns, host: '10.96.0.10', port: 9100, count: 20, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(m.counts, { b1: 10, b2: 10 });
    t.true(m.results.every((r) => r.ok && r.reply.port === 9100));
  });

  test.serial('traffic from outside the cluster CIDR is masqueraded; from inside it keeps its source', async (t) => {
    const outside = await probe(topo, { from: topo.client('outside').netns, host: '10.96.0.10', port: 80, count: 9, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(outside.errors, {});
    t.deepEqual([...new Set(Object.values(outside.clientsSeen).flat())], [topo.gateway]);
    const inside = await probe(topo, { from: topo.client('inside').netns, host: '10.96.0.10', port: 80, count: 9, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual([...new Set(Object.values(inside.clientsSeen).flat())], ['10.244.9.2']);
  });

  test.serial('hairpin: an endpoint reaching itself through its service is masqueraded', async (t) => {
    const b1 = topo.backend('b1');
    const s = await probe(topo, { from: b1.netns, host: '10.96.0.10', port: 80, count: 9, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(s.errors, {}, 'every hairpin connection completes');
    t.is(s.counts.b1, 3, 'round robin lands on b1 itself too');
    t.deepEqual(s.clientsSeen.b1, [topo.gateway], 'b1 sees the node, not itself');
    t.deepEqual(s.clientsSeen.b2, [b1.ip], 'b2 sees b1 (pod-to-pod is not masqueraded)');
    // `drover trace --mode ipvs` over the live state names exactly the real servers reached, and which of them see the node.
    const traced = await driver.trace({ src: b1.ip, dst: '10.96.0.10', dport: 80, proto: 'tcp' });
    t.log(`\n${formatTrace(traced, ipvsTraceFormat)}`);
    const dnat = traced.outcomes.flatMap((o) => (o.verdict.kind === 'dnat' ? [{ ip: o.verdict.ip, port: o.verdict.port, masqueraded: o.masqueraded }] : []));
    t.deepEqual(
      dnat.map((o) => `${o.ip}:${o.port}`).sort(),
      Object.keys(s.counts).map((n) => `${ipOf(n)}:8080`).sort(),
    );
    for (const o of dnat) {
      const name = BACKENDS.find((b) => b.ip === o.ip)!.name;
      t.deepEqual(s.clientsSeen[name], [o.masqueraded ? topo.gateway : b1.ip], `${name}: masquerade verdict ${o.masqueraded}`);
    }
  });

  test.serial('connections from the node itself are load-balanced too', async (t) => {
    const s = await probe(topo, { from: topo.node, host: '10.96.0.10', port: 80, count: 9, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(s.errors, {});
    t.deepEqual(s.counts, { b1: 3, b2: 3, b3: 3 });
  });

  test.serial('a ClusterIP with no endpoints refuses connections at once', async (t) => {
    // Refused within 1 s: a hang would end in ETIMEDOUT (TCP's first SYN retransmission is at 1 s).
    for (const from of ['outside', 'inside']) {
      const r = await connectOnce(topo, { from: topo.client(from).netns, host: '10.96.0.11', port: 80, timeoutMs: 1000 });
      t.deepEqual(r, { ok: false, code: 'ECONNREFUSED' }, from);
    }
  });

  test.serial('a removed endpoint without connections is deleted at once', async (t) => {
    await apply([web(['b1', 'b2', 'b3']), metrics, empty, quiet(['b3'])], ['default/quiet:http']);
    t.is(await realServerConns(topo.node, '10.96.0.12:80', '10.244.1.5:8080'), undefined);
    const s = await probe(topo, { from: topo.client('inside').netns, host: '10.96.0.12', port: 80, count: 4, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(s.counts, { b3: 4 });
  });

  test.serial('graceful termination: an open connection to a removed endpoint keeps working; new ones never reach it', async (t) => {
    const held = await holdConnection(topo, { from: topo.client('inside').netns, host: '10.96.0.10', port: 80, timeoutMs: PROBE_TIMEOUT_MS });
    try {
      t.true(held.first.ok);
      const gone = held.first.ok ? held.first.reply.backend : 'b1';
      const rest = ['b1', 'b2', 'b3'].filter((n) => n !== gone);
      await apply([web(rest), metrics, empty, quiet(['b3'])], ['default/web:http']);
      const rs = `${ipOf(gone)}:8080`;
      const quiesced = await realServerConns(topo.node, '10.96.0.10:80', rs);
      t.like(quiesced, { weight: 0 }, 'the real server stays, at weight 0');
      t.true((quiesced?.active ?? 0) >= 1, 'with its open connection counted');

      const s = await probe(topo, { from: topo.client('inside').netns, host: '10.96.0.10', port: 80, count: 20, timeoutMs: PROBE_TIMEOUT_MS });
      t.deepEqual(s.errors, {});
      t.deepEqual(Object.keys(s.counts).sort(), rest, `no new connection reaches ${gone}`);

      const again = await held.request();
      t.true(again.ok && again.reply.backend === gone, 'the open connection still reaches its endpoint');
      t.true((await held.request()).ok);
    } finally {
      await held.close();
    }
  });

  test.serial('graceful termination: after the connection closes, the real server is deleted within the graceful period', async (t) => {
    // The closed connection lingers in IPVS (TIME_WAIT, 2 min) and counts as
    // inactive, so here the graceful period (20 s) ends the wait.
    const start = Date.now();
    await until(
      'the quiesced real server to be deleted',
      async () => (await ipvsadmState(topo.node)).filter((l) => l.startsWith('-> 10.244.1.') && l.endsWith(' 0')).length === 0,
      GRACEFUL_PERIOD_MS + 60_000,
      1000,
    );
    t.log(`deleted ${Math.round((Date.now() - start) / 1000)} s after the check started`);
    t.deepEqual(await driver.request('pending'), []);
  });

  test.serial('an endpoint that comes back while draining is restored to weight 1', async (t) => {
    const held = await holdConnection(topo, { from: topo.client('inside').netns, host: '10.96.0.10', port: 80, timeoutMs: PROBE_TIMEOUT_MS });
    try {
      const back = held.first.ok ? held.first.reply.backend : 'b1';
      const others = ['b1', 'b2', 'b3'].filter((n) => n !== back);
      await apply([web(others), metrics, empty, quiet(['b3'])], ['default/web:http']);
      t.like(await realServerConns(topo.node, '10.96.0.10:80', `${ipOf(back)}:8080`), { weight: 0 });
      await apply([web(['b1', 'b2', 'b3']), metrics, empty, quiet(['b3'])], ['default/web:http']);
      t.like(await realServerConns(topo.node, '10.96.0.10:80', `${ipOf(back)}:8080`), { weight: 1 });
      t.deepEqual(await driver.request('pending'), []);
      const s = await probe(topo, { from: topo.client('inside').netns, host: '10.96.0.10', port: 80, count: 9, timeoutMs: PROBE_TIMEOUT_MS });
      t.deepEqual(s.counts, { b1: 3, b2: 3, b3: 3 });
    } finally {
      await held.close();
    }
  });

  test.serial('drift: a real server deleted with ipvsadm is back after the next sync', async (t) => {
    await topo.exec(topo.node, 'ipvsadm', ['-d', '-t', '10.96.0.10:80', '-r', '10.244.1.2:8080']);
    t.is(await realServerConns(topo.node, '10.96.0.10:80', '10.244.1.2:8080'), undefined);
    await apply(state);
    t.like(await realServerConns(topo.node, '10.96.0.10:80', '10.244.1.2:8080'), { weight: 1 });
  });

  test.serial('drift: an extra virtual server in the service CIDR is removed; one outside it stays', async (t) => {
    await topo.exec(topo.node, 'ipvsadm', ['-A', '-t', '10.100.0.1:443', '-s', 'rr']);
    await topo.exec(topo.node, 'ipvsadm', ['-A', '-t', '192.168.77.1:80', '-s', 'rr']);
    await apply(state);
    const listed = await ipvsadmState(topo.node);
    t.false(listed.includes('TCP 10.100.0.1:443 rr'));
    t.true(listed.includes('TCP 192.168.77.1:80 rr'));
    await topo.exec(topo.node, 'ipvsadm', ['-D', '-t', '192.168.77.1:80']);
  });

  test.serial('drift: the kernel state after repairs is exactly the desired one again', async (t) => {
    await apply(state);
    t.deepEqual(await ipvsadmState(topo.node), [
      'TCP 10.96.0.10:80 rr',
      '-> 10.244.1.2:8080 Masq 1',
      '-> 10.244.1.3:8080 Masq 1',
      '-> 10.244.1.4:8080 Masq 1',
      'TCP 10.96.0.10:9100 rr',
      '-> 10.244.1.2:9100 Masq 1',
      '-> 10.244.1.3:9100 Masq 1',
      'TCP 10.96.0.11:80 rr',
      'TCP 10.96.0.12:80 rr',
      '-> 10.244.1.4:8080 Masq 1',
    ]);
  });
}
