import test from 'ava';
import * as dns from 'dns-packet';
import { DnsServer } from '../../src/dns/server.ts';
import { ServiceDnsView } from '../../src/dns/view.ts';
import { Zone } from '../../src/dns/zone.ts';
import { reverseName } from '../../src/dns/records.ts';
import { ZoneAnswerCache, type CachedAnswer } from '../../src/dns/zone-answer-cache.ts';
import type { DnsOnlyService, HeadlessService, Snapshot } from '../../src/model/types.ts';
import { dualSnap, ep, sp } from '../support/snapshots.ts';
import { datas, rcode } from '../support/dns-client.ts';

/** A headless Service of `n` ready endpoints 10.244.2.1…, named port "http" (an A answer of 40 is over 512 bytes, of 120 over 1,232). */
function headless(name: string, n: number): HeadlessService {
  const addresses = Array.from({ length: n }, (_, i) => ({ ip: `10.244.${2 + Math.floor(i / 250)}.${(i % 250) + 1}`, ready: true }));
  return { kind: 'headless', namespace: 'default', name, groups: [{ ports: [{ name: 'http', port: 8080, protocol: 'TCP' }], addresses }] };
}

/** The snapshot every test starts from: web (dual-stack, two named ports), db (IPv4), headless small/mid/big, ExternalName in and out of the zone. */
function snapshot(extra: DnsOnlyService[] = []): Snapshot {
  const web4 = [sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080')]), sp('default/web:dns', '10.96.0.10', 53, [], { protocol: 'UDP' }), sp('shop/db', '10.96.0.20', 5432, [])];
  const web6 = [sp('default/web:http', 'fd00:96::a', 80, [])];
  const dnsOnly: DnsOnlyService[] = [
    headless('small', 3),
    headless('mid', 40),
    headless('big', 120),
    { kind: 'externalName', namespace: 'default', name: 'alias', externalName: 'web.default.svc.cluster.local' },
    { kind: 'externalName', namespace: 'default', name: 'away', externalName: 'example.com' },
    ...extra,
  ];
  return { ...dualSnap(web4, web6), dnsOnly: new Map(dnsOnly.map((d) => [`${d.namespace}/${d.name}`, d])) };
}

/** Two servers on one zone: `cached` (the default, with its cache of encoded zone answers) and `full` (every message decoded whole). */
function servers(limits?: { maxEntries: number; maxBytes: number }) {
  const zone = new Zone({ domain: 'cluster.local', ttl: 5 });
  const view = new ServiceDnsView(zone);
  view.apply(snapshot());
  const cached = new DnsServer({ address: '127.0.0.1', port: 0, zone, ...(limits ? { zoneAnswerCache: limits } : {}) });
  const full = new DnsServer({ address: '127.0.0.1', port: 0, zone, zoneAnswerCache: false });
  return { zone, view, cached, full };
}

/** What `server` sends for `msg` (undefined: nothing, the message was dropped). */
function answerOf(server: DnsServer, msg: Buffer, transport: 'udp' | 'tcp'): Buffer | undefined {
  let out: Buffer | undefined;
  server.handle(msg, '10.0.0.1', transport, (b) => {
    out = Buffer.from(b);
  });
  return out;
}

/** A query message: `name`/`type`, ID `id`, RD when `rd`, with an EDNS OPT of `edns` bytes when given, or a non-OPT additional record when `edns` is 'txt'. */
function query(name: string, type: string, id: number, rd: boolean, edns?: number | 'txt'): Buffer {
  const additionals =
    edns === undefined ? [] : edns === 'txt' ? [{ name: 'x', type: 'TXT', class: 'IN', ttl: 0, data: 'y' }] : [{ type: 'OPT', name: '.', udpPayloadSize: edns, flags: 0, options: [] }];
  return dns.encode({ type: 'query', id, flags: rd ? dns.RECURSION_DESIRED : 0, questions: [{ name, type: type as dns.RecordType, class: 'IN' }], additionals: additionals as dns.Answer[] });
}

/** Every kind of zone answer: each record type, NXDOMAIN, NODATA, headless, CNAME, ANY, an unknown type, mixed case. */
const QUESTIONS: Array<[string, string]> = [
  ['web.default.svc.cluster.local', 'A'],
  ['web.default.svc.cluster.local', 'AAAA'],
  ['db.shop.svc.cluster.local', 'AAAA'], // NODATA
  ['_http._tcp.web.default.svc.cluster.local', 'SRV'],
  ['_dns._udp.web.default.svc.cluster.local.', 'SRV'],
  [reverseName('10.96.0.10'), 'PTR'],
  [reverseName('fd00:96::a'), 'PTR'],
  [reverseName('10.244.2.1'), 'PTR'], // a headless endpoint's
  ['dns-version.cluster.local', 'TXT'],
  ['cluster.local', 'SOA'],
  ['cluster.local', 'A'], // NODATA at the apex
  ['default.svc.cluster.local', 'A'], // empty non-terminal: NODATA
  ['nope.default.svc.cluster.local', 'A'], // NXDOMAIN
  ['web.default.svc.cluster.local.default.svc.cluster.local', 'AAAA'], // a search-list miss: NXDOMAIN
  ['small.default.svc.cluster.local', 'A'],
  ['10-244-2-2.small.default.svc.cluster.local', 'A'],
  ['_http._tcp.small.default.svc.cluster.local', 'SRV'],
  ['mid.default.svc.cluster.local', 'A'], // over 512 bytes
  ['big.default.svc.cluster.local', 'A'], // over 1,232 bytes
  ['_http._tcp.big.default.svc.cluster.local', 'SRV'],
  ['alias.default.svc.cluster.local', 'A'], // CNAME followed in the zone
  ['alias.default.svc.cluster.local', 'CNAME'],
  ['away.default.svc.cluster.local', 'AAAA'], // CNAME out of the zone
  ['web.default.svc.cluster.local', 'ANY'],
  ['web.default.svc.cluster.local', 'UNKNOWN_65280'],
  ['WeB.DeFaUlT.sVc.ClUsTeR.lOcAl', 'A'], // 0x20 case, echoed
  ['Web.Default.Svc.Cluster.Local', 'A'],
  ['NOPE.default.svc.CLUSTER.local', 'A'],
];

/** Every way of asking that changes the answer's bytes: RD, EDNS (none, each size class, a non-OPT additional), transport. */
const WAYS: Array<{ rd: boolean; edns?: number | 'txt'; transport: 'udp' | 'tcp' }> = [
  { rd: true, transport: 'udp' },
  { rd: false, transport: 'udp' },
  { rd: true, edns: 0, transport: 'udp' },
  { rd: true, edns: 512, transport: 'udp' },
  { rd: true, edns: 1000, transport: 'udp' },
  { rd: false, edns: 1232, transport: 'udp' },
  { rd: true, edns: 4096, transport: 'udp' },
  { rd: true, edns: 'txt', transport: 'udp' },
  { rd: true, transport: 'tcp' },
  { rd: true, edns: 4096, transport: 'tcp' },
];

test('every zone answer from the cache is byte for byte the full path’s, the ID aside, on a miss and on a hit', (t) => {
  const { cached, full } = servers();
  let id = 1;
  let truncated = 0;
  for (const [name, type] of QUESTIONS) {
    for (const way of WAYS) {
      for (let ask = 0; ask < 2; ask++) {
        const msg = query(name, type, id++, way.rd, way.edns);
        const expected = answerOf(full, msg, way.transport);
        const got = answerOf(cached, msg, way.transport);
        t.truthy(expected, `${name} ${type} ${JSON.stringify(way)}`);
        t.deepEqual(got, expected, `${name} ${type} ${JSON.stringify(way)} (ask ${ask + 1})`);
        if (expected && dns.decode(expected).flag_tc) truncated++;
      }
    }
  }
  // Truncation was exercised: mid over 512 bytes without EDNS, big over UDP whatever the size.
  t.true(truncated > 20);
  t.deepEqual(cached.stats, full.stats);
  t.is(cached.stats.zone, QUESTIONS.length * WAYS.length * 2);
});

test('messages off the common path are answered or dropped exactly as before', (t) => {
  const { cached, full } = servers();
  const base = query('web.default.svc.cluster.local', 'A', 7, true);
  const header = (fields: { flags?: number; qd?: number; an?: number; ns?: number; ar?: number }) => {
    const m = Buffer.from(base);
    if (fields.flags !== undefined) m.writeUInt16BE(fields.flags, 2);
    if (fields.qd !== undefined) m.writeUInt16BE(fields.qd, 4);
    if (fields.an !== undefined) m.writeUInt16BE(fields.an, 6);
    if (fields.ns !== undefined) m.writeUInt16BE(fields.ns, 8);
    if (fields.ar !== undefined) m.writeUInt16BE(fields.ar, 10);
    return m;
  };
  // A question whose name is a compression pointer to offset 12: a loop.
  const loop = Buffer.concat([base.subarray(0, 12), Buffer.from([0xc0, 12, 0, 1, 0, 1])]);
  const messages: Array<[string, Buffer]> = [
    ['empty', Buffer.alloc(0)],
    ['short header', base.subarray(0, 11)],
    ['header only', base.subarray(0, 12)],
    ['truncated question', base.subarray(0, base.length - 3)],
    ['a response', header({ flags: 0x8100 })],
    ['opcode STATUS', header({ flags: 2 << 11 })],
    ['two questions counted, one present', header({ qd: 2 })],
    ['no question', header({ qd: 0 })],
    ['an answer counted', header({ an: 1 })],
    ['an authority counted', header({ ns: 1 })],
    ['two additionals counted', header({ ar: 2 })],
    ['one additional counted, none present', header({ ar: 1 })],
    ['a compression loop', loop],
    ['trailing bytes', Buffer.concat([base, Buffer.from([1, 2, 3])])],
    ['class CH', dns.encode({ type: 'query', id: 8, questions: [{ name: 'web.default.svc.cluster.local', type: 'A', class: 'CH' }] })],
    ['AXFR', query('cluster.local', 'AXFR', 9, true)],
    ['outside the zone, no forwarder', query('example.com', 'A', 10, true)],
    ['ANY outside the zone', query('example.com', 'ANY', 11, true, 1232)],
    ['a reverse name the zone does not hold', query(reverseName('192.0.2.1'), 'PTR', 12, true)],
    ['two questions', dns.encode({ type: 'query', id: 13, questions: [{ name: 'a.cluster.local', type: 'A' }, { name: 'b.cluster.local', type: 'A' }] })],
  ];
  for (const [what, msg] of messages) {
    for (const transport of ['udp', 'tcp'] as const) {
      for (let ask = 0; ask < 2; ask++) t.deepEqual(answerOf(cached, msg, transport), answerOf(full, msg, transport), `${what} over ${transport}`);
    }
  }
  t.deepEqual(cached.stats, full.stats);
  t.true(cached.stats.dropped > 0);
});

test('a change to the zone is answered at once: the cache is emptied when the zone’s generation moves', (t) => {
  const { zone, view, cached, full } = servers();
  const ask = (name: string, id: number) => {
    const msg = query(name, 'A', id, true);
    const got = answerOf(cached, msg, 'udp');
    t.deepEqual(got, answerOf(full, msg, 'udp'));
    return dns.decode(got!);
  };
  t.is(rcode(ask('new.default.svc.cluster.local', 1)), 'NXDOMAIN');
  t.deepEqual(ask('small.default.svc.cluster.local', 2).answers!.length, 3);
  const before = zone.generation;
  view.apply(snapshot([{ kind: 'externalName', namespace: 'default', name: 'new', externalName: 'web.default.svc.cluster.local' }, headless('small', 4)]));
  t.not(zone.generation, before);
  const now = ask('new.default.svc.cluster.local', 3);
  t.is(rcode(now), 'NOERROR');
  t.deepEqual(datas(now), ['web.default.svc.cluster.local', '10.96.0.10']);
  t.deepEqual(ask('small.default.svc.cluster.local', 4).answers!.length, 4);
  // Removed again: NXDOMAIN again.
  view.apply(snapshot());
  t.is(rcode(ask('new.default.svc.cluster.local', 5)), 'NXDOMAIN');
});

test('the cache holds at most its entries and bytes, the oldest dropped first, and a flood of names stays within them', (t) => {
  const { cached, full } = servers({ maxEntries: 50, maxBytes: 20_000 });
  for (let i = 0; i < 2000; i++) {
    const msg = query(`n${i}.default.svc.cluster.local`, 'A', i, true);
    t.deepEqual(answerOf(cached, msg, 'udp'), answerOf(full, msg, 'udp'));
  }
  for (let i = 0; i < 20; i++) {
    const msg = query('big.default.svc.cluster.local', 'A', i, true, 4096);
    t.deepEqual(answerOf(cached, msg, 'tcp'), answerOf(full, msg, 'tcp'));
  }
  t.deepEqual(cached.stats, full.stats);

  const cache = new ZoneAnswerCache({ maxEntries: 3, maxBytes: 1000 });
  const entry = (n: number): CachedAnswer => ({ rcode: 'NOERROR', whole: Buffer.alloc(n), truncated: undefined });
  for (const k of ['a', 'b', 'c', 'd']) cache.set(k, 1, entry(100));
  t.is(cache.size, 3);
  t.is(cache.get('a', 1), undefined);
  t.truthy(cache.get('d', 1));
  cache.set('e', 1, entry(700));
  t.true(cache.heldBytes <= 1000);
  t.is(cache.get('b', 1), undefined);
  t.truthy(cache.get('e', 1));
  cache.set('huge', 1, entry(2000));
  t.is(cache.get('huge', 1), undefined);
  // Another generation: nothing from the last one.
  t.is(cache.get('e', 2), undefined);
  t.is(cache.size, 0);
  t.is(cache.heldBytes, 0);
});
