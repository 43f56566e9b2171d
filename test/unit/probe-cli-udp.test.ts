/**
 * `probe-cli.mjs traffic` with `"protocol": "udp"` on the loopback, against
 * a fake service in this process (no namespace, no root): a long-lived flow
 * answered by another backend than at first counts as lost (EMOVED), and a
 * reply from another source than the service (a lost reverse NAT) does not
 * count as an answer, to a long-lived flow or to a new datagram.
 */
import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { createSocket, type Socket } from 'node:dgram';
import { createInterface } from 'node:readline';
import type { TrafficSummary } from '../../src/testbed/protocol.ts';
import { helperArgv } from '../../src/testbed/topology.ts';

/** A UDP socket on 127.0.0.1, closed when the test ends. */
async function udp(t: ExecutionContext): Promise<Socket> {
  const s = createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', () => r()));
  t.teardown(() => s.close());
  return s;
}

/** Run the traffic helper against 127.0.0.1:`port` with `held` flows (deadline `timeoutMs`) for `ms` after READY: its first line and its summary. */
async function traffic(port: number, held: number, ms: number, timeoutMs: number): Promise<{ first: string; summary?: TrafficSummary }> {
  const request = { host: '127.0.0.1', port, held, intervalMs: 20, timeoutMs, heldTimeoutMs: timeoutMs, protocol: 'udp' };
  const [node, ...args] = helperArgv('probe-cli.mjs', ['traffic', JSON.stringify(request)]) as [string, ...string[]];
  const child = spawn(node, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const first = (await lines.next()).value as string;
  if (first !== 'READY') return { first };
  await new Promise((r) => setTimeout(r, ms));
  child.stdin.end();
  const last = await lines.next();
  return { first, summary: JSON.parse(last.value as string) as TrafficSummary };
}

test('a long-lived flow answered by another backend than at first is lost with EMOVED; a new datagram is not', async (t) => {
  const service = await udp(t);
  const seen = new Map<number, number>();
  service.on('message', (_m, from) => {
    // Each source port's first datagram is answered by b1, the next ones by b2.
    const n = (seen.get(from.port) ?? 0) + 1;
    seen.set(from.port, n);
    service.send(JSON.stringify({ backend: n === 1 ? 'b1' : 'b2', client: from.address }), from.port, from.address);
  });
  const { first, summary } = await traffic(service.address().port, 2, 300, 10_000);
  t.is(first, 'READY');
  t.is(summary!.lost, 2);
  t.deepEqual(summary!.lostErrors, { EMOVED: 2 });
  t.deepEqual(summary!.lostBackends, { b1: 2 });
  t.is(summary!.failed, 0, 'a new source port each time: each new datagram is its first');
});

test('a reply from another source than the service does not answer a long-lived flow', async (t) => {
  const service = await udp(t);
  const elsewhere = await udp(t);
  service.on('message', (_m, from) => elsewhere.send(JSON.stringify({ backend: 'b1', client: from.address }), from.port, from.address));
  const { first } = await traffic(service.address().port, 1, 0, 1000);
  t.is(first, 'FAILED ETIMEDOUT');
});

test('a new datagram answered from another source than the service fails with EWRONGSOURCE', async (t) => {
  const service = await udp(t);
  const elsewhere = await udp(t);
  const held = new Set<number>();
  service.on('message', (_m, from) => {
    // The first source port is the long-lived flow's (its first request comes before READY): answered by the service itself; every new datagram's from elsewhere.
    if (held.size === 0) held.add(from.port);
    const reply = JSON.stringify({ backend: 'b1', client: from.address });
    (held.has(from.port) ? service : elsewhere).send(reply, from.port, from.address);
  });
  const { first, summary } = await traffic(service.address().port, 1, 300, 10_000);
  t.is(first, 'READY');
  t.is(summary!.lost, 0);
  t.true(summary!.attempted > 0);
  t.deepEqual(summary!.errors, { EWRONGSOURCE: summary!.attempted });
});
