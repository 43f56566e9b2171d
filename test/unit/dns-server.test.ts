import test from 'ava';
import { createSocket } from 'node:dgram';
import { once } from 'node:events';
import { connect } from 'node:net';
import * as dns from 'dns-packet';
import { DnsServer, TCP_PENDING_LIMIT } from '../../src/dns/server.ts';
import { Forwarder } from '../../src/dns/forward.ts';
import { Zone } from '../../src/dns/zone.ts';
import { ServiceDnsView } from '../../src/dns/view.ts';
import { headlessRecords } from '../../src/dns/records.ts';
import { snap, sp } from '../support/snapshots.ts';
import { ask, askRaw, datas, rcode } from '../support/dns-client.ts';
import { until } from '../support/wait.ts';

/** A node server for cluster.local with web → 10.96.0.10, forwarding to `upstream` when given. */
async function nodeServer(t: import('ava').ExecutionContext, forwarder?: Forwarder, extra: Partial<ConstructorParameters<typeof DnsServer>[0]> = {}): Promise<DnsServer> {
  const zone = new Zone({ domain: 'cluster.local', ttl: 5 });
  new ServiceDnsView(zone).apply(snap(sp('default/web:http', '10.96.0.10', 80, [])));
  const server = new DnsServer({ address: '127.0.0.1', port: 0, zone, ...(forwarder ? { forwarder } : {}), ...extra });
  await server.listen();
  t.teardown(() => server.close());
  return server;
}

/**
 * An upstream: a DnsServer authoritative for example.com, with `big.example.com`
 * holding 120 addresses (too many for 1,232 bytes over UDP).
 */
async function upstreamServer(t: import('ava').ExecutionContext): Promise<DnsServer> {
  const zone = new Zone({ domain: 'example.com', ttl: 60 });
  zone.set('www', [{ name: 'www.example.com', type: 'A', data: '192.0.2.1' }]);
  const endpoints = Array.from({ length: 120 }, (_, i) => ({ ip: `192.0.2.${i + 2}`, ready: true }));
  zone.set('big', headlessRecords({ kind: 'headless', namespace: 'x', name: 'big', groups: [{ ports: [], addresses: endpoints }] }, 'example.com').filter((r) => r.name === 'big.x.svc.example.com').map((r) => ({ ...r, name: 'big.example.com' })));
  const server = new DnsServer({ address: '127.0.0.1', port: 0, zone });
  await server.listen();
  t.teardown(() => server.close());
  return server;
}

/** A UDP socket on loopback that receives and never answers: a dead upstream. */
async function silentUpstream(t: import('ava').ExecutionContext): Promise<number> {
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind({ address: '127.0.0.1', port: 0 }, resolve));
  t.teardown(() => socket.close());
  return socket.address().port;
}

test('cluster names are answered authoritatively over UDP and TCP', async (t) => {
  const server = await nodeServer(t);
  for (const tcp of [false, true]) {
    const a = await ask('web.default.svc.cluster.local', 'A', { port: server.port, tcp });
    t.is(rcode(a), 'NOERROR');
    t.true(a!.flag_aa);
    t.is(a!.id, 4242);
    t.deepEqual(datas(a), ['10.96.0.10']);
  }
  const nx = await ask('nope.default.svc.cluster.local', 'A', { port: server.port });
  t.is(rcode(nx), 'NXDOMAIN');
  t.deepEqual(nx!.authorities!.map((r) => r.type), ['SOA']);
  t.deepEqual(server.stats.answers, { NOERROR: 2, NXDOMAIN: 1 });
  t.is(server.stats.zone, 3);
  // Without a forwarder, other names are refused.
  t.is(rcode(await ask('example.com', 'A', { port: server.port })), 'REFUSED');
});

test('hostile messages are dropped or refused, and every later client is still answered', async (t) => {
  const server = await nodeServer(t);
  const port = server.port;
  const query = dns.encode({ type: 'query', id: 7, questions: [{ name: 'web.default.svc.cluster.local', type: 'A' }] });
  // A name that points at itself: a compression loop.
  const loop = Buffer.from(query);
  loop.writeUInt16BE(0xc00c, 12);
  const silent = [
    Buffer.alloc(0),
    Buffer.from([1, 2, 3]),
    query.subarray(0, 20),
    loop,
    Buffer.concat([query.subarray(0, 12), Buffer.from([63]), Buffer.alloc(10)]),
    dns.encode({ type: 'response', id: 1, questions: [{ name: 'web.default.svc.cluster.local', type: 'A' }] }),
    Buffer.alloc(4000, 0xff),
  ];
  for (const msg of silent) t.is(await askRaw(msg, { port, timeoutMs: 300 }), undefined);
  t.is(server.stats.dropped, silent.length);
  const twoQuestions = dns.encode({ type: 'query', id: 8, questions: [{ name: 'a.cluster.local', type: 'A' }, { name: 'b.cluster.local', type: 'A' }] });
  t.is(rcode(dns.decode((await askRaw(twoQuestions, { port }))!)), 'FORMERR');
  const status = Buffer.from(query);
  status.writeUInt16BE(2 << 11, 2);
  t.is(rcode(dns.decode((await askRaw(status, { port }))!)), 'NOTIMP');
  const chaos = dns.encode({ type: 'query', id: 9, questions: [{ name: 'version.bind', type: 'TXT', class: 'CH' }] });
  t.is(rcode(dns.decode((await askRaw(chaos, { port }))!)), 'REFUSED');
  t.is(rcode(await ask('cluster.local', 'AXFR', { port, tcp: true })), 'REFUSED');
  const unknownType = Buffer.from(query);
  unknownType.writeUInt16BE(65280, query.length - 4);
  const unknown = dns.decode((await askRaw(unknownType, { port }))!);
  t.is(rcode(unknown), 'NOERROR');
  t.deepEqual(unknown.answers, []);
  t.is(unknown.questions![0]!.type as string, 'UNKNOWN_65280');
  const any = await ask('example.org', 'ANY', { port });
  t.deepEqual(datas(any), [{ cpu: 'RFC8482', os: '' }]);
  // A TCP message split across writes with a length larger than what follows, then the connection closed: nothing held.
  t.is(await askRaw(Buffer.alloc(3), { port, tcp: true, timeoutMs: 300 }), undefined);
  t.deepEqual(datas(await ask('WEB.default.svc.cluster.local', 'A', { port })), ['10.96.0.10']);
  t.deepEqual(datas(await ask('web.default.svc.cluster.local', 'A', { port, tcp: true })), ['10.96.0.10']);
});

test('EDNS: the answer echoes OPT; an odd size is clamped to 512-1232 bytes', async (t) => {
  const up = await upstreamServer(t);
  for (const edns of [0, 100, 65535]) {
    const a = await ask('big.example.com', 'A', { port: up.port, edns });
    t.true(a!.flag_tc, `EDNS ${edns}`);
    t.deepEqual(a!.answers, []);
    t.is((a!.additionals![0] as { udpPayloadSize: number }).udpPayloadSize, 1232);
  }
  const noEdns = await ask('www.example.com', 'A', { port: up.port });
  t.deepEqual(noEdns!.additionals, []);
  const tcp = await ask('big.example.com', 'A', { port: up.port, tcp: true });
  t.is(tcp!.answers!.length, 120);
});

test('other names are forwarded, cached, and fetched over TCP when the UDP answer is truncated', async (t) => {
  const up = await upstreamServer(t);
  const server = await nodeServer(t, new Forwarder({ upstreams: [{ ip: '127.0.0.1', port: up.port }], timeoutMs: 5000 }));
  const www = await ask('www.example.com', 'A', { port: server.port, id: 77 });
  t.is(www!.id, 77);
  t.false(www!.flag_aa);
  t.true(www!.flag_ra);
  t.deepEqual(datas(www), ['192.0.2.1']);
  t.deepEqual(datas(await ask('WWW.example.com', 'A', { port: server.port })), ['192.0.2.1']);
  t.is(server.stats.cacheHits, 1);
  t.is(up.stats.queries, 1);
  const nx = await ask('none.example.com', 'A', { port: server.port });
  t.is(rcode(nx), 'NXDOMAIN');
  // 120 addresses: the upstream truncates over UDP, the forwarder asks again over TCP, the client gets TC and asks over TCP.
  const big = await ask('big.example.com', 'A', { port: server.port, edns: 1232 });
  t.true(big!.flag_tc);
  const bigTcp = await ask('big.example.com', 'A', { port: server.port, tcp: true });
  t.is(bigTcp!.answers!.length, 120);
  t.is(up.stats.answers.NOERROR, 3); // www over UDP, big over UDP (truncated) and over TCP; the client's TCP ask came from the cache.
});

test('a dead upstream gives SERVFAIL after its timeout and never delays cluster answers; a flooding client is held to its share', async (t) => {
  const dead = await silentUpstream(t);
  const server = await nodeServer(t, new Forwarder({ upstreams: [{ ip: '127.0.0.1', port: dead }], timeoutMs: 500 }), { perClientForwards: 2 });
  const port = server.port;
  let settled = 0;
  const forwarded = ['a', 'b', 'c', 'd'].map((n) => ask(`${n}.example.net`, 'A', { port, timeoutMs: 4000 }).finally(() => settled++));
  t.deepEqual(datas(await ask('web.default.svc.cluster.local', 'A', { port })), ['10.96.0.10']);
  t.is(settled, 0, 'the cluster answer came before any forwarded question was done');
  // Another client address still gets its questions forwarded.
  const other = ask('e.example.net', 'A', { port, from: '127.0.0.2', timeoutMs: 4000 });
  const results = await Promise.all(forwarded);
  t.deepEqual(results.map(rcode), ['SERVFAIL', 'SERVFAIL', undefined, undefined]);
  t.is(rcode(await other), 'SERVFAIL');
  t.is(server.stats.forwardFailures, 3);
  t.is(server.stats.dropped, 2);
});

test('a TCP client that sends questions without reading the answers is not read further: drover holds a bounded backlog, and others are still answered', async (t) => {
  const server = await nodeServer(t);
  const query = dns.encode({ type: 'query', id: 1, flags: dns.RECURSION_DESIRED, questions: [{ type: 'A', name: 'nope.default.svc.cluster.local' }] });
  const framed = Buffer.concat([Buffer.from([query.length >> 8, query.length & 0xff]), query]);
  const batch = Buffer.concat(Array.from({ length: 1000 }, () => framed));
  const socket = connect({ host: '127.0.0.1', port: server.port });
  t.teardown(() => socket.destroy());
  await once(socket, 'connect');
  socket.pause();
  // 40 MB of questions (many times what the kernel's socket buffers hold), never reading an answer.
  for (let i = 0; i < 40; i++) socket.write(Buffer.concat(Array.from({ length: 20 }, () => batch)));
  // The server stops reading: part of what the client wrote stays unsent, and stays so. (A server that
  // read on would take it all in, holding the answers itself.)
  let last = -1;
  await until(
    'the client to be held back',
    async () => {
      const now = socket.writableLength;
      const held = now > 0 && now === last;
      last = now;
      return held;
    },
    30_000,
    500,
  );
  t.false(socket.destroyed);
  // What drover holds for the client is bounded: at most the pause mark and the answers to one chunk read.
  await new Promise((r) => setTimeout(r, 1000));
  t.true(server.pendingTcpBytes() <= TCP_PENDING_LIMIT, `${server.pendingTcpBytes()} bytes of answers held`);
  t.deepEqual(datas(await ask('web.default.svc.cluster.local', 'A', { port: server.port, tcp: true })), ['10.96.0.10'], 'another client is answered');
});
