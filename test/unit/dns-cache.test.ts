import test from 'ava';
import type { Packet } from 'dns-packet';
import { AnswerCache, cacheSeconds, DEFAULT_CACHE_LIMITS } from '../../src/dns/cache.ts';
import { parseUpstream, resolvConfUpstreams } from '../../src/dns/forward.ts';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';

const a = (ttl: number): Packet => ({ type: 'response', answers: [{ name: 'x.example', type: 'A', ttl, data: '192.0.2.1' }] });
const soa = (ttl: number, minimum: number, rcode: number): Packet => ({
  type: 'response',
  flags: rcode,
  rcode: rcode === 3 ? 'NXDOMAIN' : 'NOERROR',
  answers: [],
  authorities: [{ name: 'example', type: 'SOA', ttl, data: { mname: 'ns.example', rname: 'h.example', serial: 1, refresh: 1, retry: 1, expire: 1, minimum } }],
} as Packet);

test('a success is kept for its smallest TTL, at most 30 s; a denial for its SOA negative TTL, at most 5 s; errors and truncated answers not at all', (t) => {
  t.is(cacheSeconds(a(300), DEFAULT_CACHE_LIMITS), 30);
  t.is(cacheSeconds(a(7), DEFAULT_CACHE_LIMITS), 7);
  t.is(cacheSeconds(soa(3600, 3600, 3), DEFAULT_CACHE_LIMITS), 5);
  t.is(cacheSeconds(soa(3600, 2, 0), DEFAULT_CACHE_LIMITS), 2);
  t.is(cacheSeconds({ type: 'response', rcode: 'SERVFAIL', answers: [] } as Packet, DEFAULT_CACHE_LIMITS), 0);
  t.is(cacheSeconds({ ...a(300), flags: 0x200 }, DEFAULT_CACHE_LIMITS), 0);
});

test('entries expire, age their TTLs, and the least recently used goes past the bound', (t) => {
  let now = 0;
  const cache = new AnswerCache({ successTtl: 30, denialTtl: 5, maxEntries: 2 }, () => now);
  cache.put('x', a(300));
  now = 12_500;
  t.is((cache.get('x')?.answers?.[0] as { ttl?: number } | undefined)?.ttl, 288);
  now = 30_000;
  t.is(cache.get('x'), undefined);
  cache.put('a', a(60));
  cache.put('b', a(60));
  cache.get('a');
  cache.put('c', a(60));
  t.is(cache.size, 2);
  t.truthy(cache.get('a'));
  t.is(cache.get('b'), undefined);
});

test('upstreams from flags and from resolv.conf', (t) => {
  t.deepEqual(parseUpstream('192.0.2.53', '--dns-upstream'), { ip: '192.0.2.53', port: 53 });
  t.deepEqual(parseUpstream('192.0.2.53:5353', '--dns-upstream'), { ip: '192.0.2.53', port: 5353 });
  t.deepEqual(parseUpstream('[2001:db8::53]:53', '--dns-upstream'), { ip: '2001:db8::53', port: 53 });
  t.throws(() => parseUpstream('dns.example:53', '--dns-upstream'), { message: '--dns-upstream: upstream DNS server "dns.example:53" is not IP, IP:PORT or [IPv6]:PORT with a port of 1-65535' });
  const dir = mkdtempSync(join(tmpdir(), 'drover-resolv-'));
  const path = join(dir, 'resolv.conf');
  writeFileSync(path, '# comment\nsearch example\nnameserver 192.0.2.1\nnameserver 169.254.20.10\nnameserver fe80::1%eth0\nnameserver bogus\n');
  t.deepEqual(resolvConfUpstreams(path, ['169.254.20.10']), [{ ip: '192.0.2.1', port: 53 }, { ip: 'fe80::1', port: 53 }]);
  t.deepEqual(resolvConfUpstreams(join(dir, 'absent')), []);
});
