/**
 * Kernel test of the namespace testbed itself: direct client → backend and
 * node → backend traffic, no proxy involved.
 *
 * When the testbed can't run (not root, no `ip netns`) a single test is
 * registered with `test.skip` and the reason in its title, so the run shows
 * "skipped: <reason>" rather than a silent pass.
 */
import test from 'ava';
import { connectOnce, probe, startTraffic, udpEach, udpOnce } from '../../src/testbed/probe.ts';
import { run } from '../../src/kernel/exec.ts';
import { createTopology, testbedUnavailableReason } from '../../src/testbed/topology.ts';

const unavailable = await testbedUnavailableReason();

const rootState = async (): Promise<string> =>
  (await run('ip', ['-o', 'link', 'show'])).stdout.replace(/\s+link\/.*$/gm, '') +
  (await run('ip', ['route', 'show', 'table', 'all'])).stdout;

if (unavailable) {
  test.skip(`kernel testbed tests skipped: ${unavailable}`, () => {});
} else {
  test('direct traffic reaches exactly the addressed backend, unNATed; destroy removes everything', async (t) => {
    const before = await rootState();
    const topo = await createTopology({
      backends: [
        { name: 'b1', ip: '10.244.1.2', ports: [9090, 9091] },
        { name: 'b2', ip: '10.244.2.2', ports: [9090] },
      ],
    });
    const client = topo.client();
    try {
      t.is(client.ip, '192.168.100.2');
      const listed = (await run('ip', ['netns', 'list'])).stdout;
      for (const ns of topo.namespaces) t.true(listed.includes(ns), `${ns} listed`);

      for (const b of topo.backends) {
        for (const port of b.ports) {
          const s = await probe(topo, { from: client.netns, host: b.ip, port, count: 3 });
          t.deepEqual(s.counts, { [b.name]: 3 }, `${b.name} ${b.ip}:${port}`);
          t.deepEqual(s.errors, {});
          t.deepEqual(s.clientsSeen, { [b.name]: [client.ip] }, 'backend sees the real client address');
          for (const r of s.results) t.like(r, { ok: true, reply: { backend: b.name, ip: b.ip, port } });
          // new TCP connection per request: distinct source ports
          const ports = new Set(s.results.map((r) => (r.ok ? r.reply.clientPort : 0)));
          t.is(ports.size, 3);
        }
        // The node reaches backends directly, from its gateway address.
        t.like(await connectOnce(topo, { from: topo.node, host: b.ip, port: b.ports[0]! }), {
          ok: true,
          reply: { backend: b.name, client: topo.gateway },
        });
      }

      t.deepEqual(await connectOnce(topo, { host: '10.244.2.2', port: 9091 }), { ok: false, code: 'ECONNREFUSED' });
    } finally {
      await topo.destroy();
    }
    await t.notThrowsAsync(topo.destroy());
    const left = (await run('ip', ['netns', 'list'])).stdout;
    for (const ns of topo.namespaces) t.false(left.includes(ns), `${ns} still exists`);
    t.is(await rootState(), before, 'root namespace links/routes unchanged');
  });

  test('probes from one namespace share one helper: concurrent probes get their own answers; a helper that dies is started again', async (t) => {
    const topo = await createTopology({
      backends: [
        { name: 'b1', ip: '10.244.1.2', ports: [9090] },
        { name: 'b2', ip: '10.244.2.2', ports: [9090] },
      ],
    });
    const helpers = async () => (await run('ip', ['netns', 'pids', topo.client().netns])).stdout.split(/\s+/).filter(Boolean);
    try {
      const [one, two] = await Promise.all([probe(topo, { host: '10.244.1.2', port: 9090, count: 5 }), probe(topo, { host: '10.244.2.2', port: 9090, count: 5 })]);
      t.deepEqual([one.counts, two.counts], [{ b1: 5 }, { b2: 5 }]);
      t.deepEqual(await connectOnce(topo, { host: '10.244.2.2', port: 9091 }), { ok: false, code: 'ECONNREFUSED' });
      const first = await helpers();
      t.is(first.length, 1, 'one helper in the client namespace served the three probes');
      process.kill(Number(first[0]), 'SIGKILL');
      // At once: the probe may find the helper dying, or gone; either way another one answers it.
      t.deepEqual((await probe(topo, { host: '10.244.1.2', port: 9090, count: 2 })).counts, { b1: 2 });
      const second = await helpers();
      t.is(second.length, 1);
      t.not(second[0], first[0], 'a new helper');
    } finally {
      await topo.destroy();
    }
  });

  test('traffic counts new connections that fail and long-lived connections that break', async (t) => {
    const topo = await createTopology({ backends: [{ name: 'b1', ip: '10.244.1.2', ports: [9090] }] });
    try {
      // Before the fault, some new connections must be answered for `failed < attempted` below: 2 s of rounds, so that a
      // busy machine's slow answers cannot take all of them. A round lasts at most its 500 ms deadline, so that after the
      // fault each long-lived connection is used again well within 1.5 s.
      const load = await startTraffic(topo, { host: '10.244.1.2', port: 9090, held: 3, intervalMs: 50, timeoutMs: 500 });
      await new Promise((r) => setTimeout(r, 2000));
      // The backend now resets every TCP segment it gets: each long-lived connection breaks, each new one fails.
      await run('iptables-nft', ['-A', 'INPUT', '-p', 'tcp', '-j', 'REJECT', '--reject-with', 'tcp-reset'], { netns: topo.backend('b1').netns });
      await new Promise((r) => setTimeout(r, 1500));
      const s = await load.stop();
      t.is(s.held, 3);
      t.is(s.lost, 3, JSON.stringify(s.lostErrors));
      t.deepEqual([s.heldBackends, s.lostBackends], [{ b1: 3 }, { b1: 3 }]);
      t.true(s.failed > 0 && s.failed < s.attempted, JSON.stringify(s));
      t.is(s.backends.b1, s.attempted - s.failed);
    } finally {
      await topo.destroy();
    }
  });

  test('UDP: one helper sends a datagram from each source port in turn, each answered from that port; a port nothing listens on times out', async (t) => {
    const topo = await createTopology({ backends: [{ name: 'b1', ip: '10.244.1.2', ports: [9090], udpPorts: [5353] }] });
    try {
      const ports = [41000, 41001, 41001, 41002];
      const results = await udpEach(topo, { host: '10.244.1.2', port: 5353, sourcePorts: ports, timeoutMs: 3000 });
      t.is(results.length, ports.length);
      results.forEach((r, i) => t.like(r, { ok: true, reply: { backend: 'b1', ip: '10.244.1.2', port: 5353, client: topo.client().ip, clientPort: ports[i] } }, `datagram ${i}`));
      t.deepEqual(await udpOnce(topo, { host: '10.244.1.2', port: 5354, sourcePort: 41003, timeoutMs: 500 }), { ok: false, code: 'ETIMEDOUT' });
    } finally {
      await topo.destroy();
    }
  });
}
