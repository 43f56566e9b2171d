import { createHash } from 'node:crypto';
import test from 'ava';
import { allocateClusterIPs, hashOffset, parseServiceCIDR } from '../../src/model/allocate.ts';
import { parseCIDR } from '../../src/model/validate.ts';

const CIDR = parseCIDR('10.96.0.0/12');
const none = new Map<string, string>();

test('the candidate is network + 1 + sha256(key) mod usable', (t) => {
  const h = createHash('sha256').update('default/web-service').digest().readUInt32BE(0);
  t.is(h, 237736676);
  t.is(hashOffset('default/web-service', 2 ** 20 - 2), 1 + (h % (2 ** 20 - 2)));
  const r = allocateClusterIPs({ cidr: CIDR, keys: ['default/web-service'], taken: [], previous: none });
  t.deepEqual([...r.allocated], [['default/web-service', '10.107.148.169']]);
  t.deepEqual(r.exhausted, []);
});

test('allocation is deterministic and independent of input order', (t) => {
  const keys = ['default/a', 'default/b', 'shop/cart', 'shop/api', 'kube-system/dns'];
  const one = allocateClusterIPs({ cidr: CIDR, keys, taken: ['10.96.0.1'], previous: none });
  const two = allocateClusterIPs({ cidr: CIDR, keys: [...keys].reverse(), taken: ['10.96.0.1'], previous: none });
  t.deepEqual([...one.allocated], [...two.allocated]);
  t.deepEqual([...one.allocated.keys()], ['default/a', 'default/b', 'kube-system/dns', 'shop/api', 'shop/cart']);
  t.is(new Set(one.allocated.values()).size, keys.length);
});

/** Two keys whose hash candidates collide in a /29 (6 usable addresses). */
function collidingPair(usable: number): [string, string, number] {
  const seen = new Map<number, string>();
  for (let i = 0; ; i++) {
    const key = `ns/svc-${i}`;
    const off = hashOffset(key, usable);
    const other = seen.get(off);
    if (other !== undefined) return [other, key, off];
    seen.set(off, key);
  }
}

test('collisions are resolved by linear probing in key order, skipping taken addresses', (t) => {
  const cidr = parseCIDR('192.168.0.0/29'); // usable .1-.6
  const [a, b, off] = collidingPair(6);
  t.true(a < b);
  const r = allocateClusterIPs({ cidr, keys: [b, a], taken: [], previous: none });
  t.is(r.allocated.get(a), `192.168.0.${off}`);
  t.is(r.allocated.get(b), `192.168.0.${(off % 6) + 1}`);
  // The candidate of `a` is taken by an explicit ClusterIP: it moves on, and so does `b`.
  const r2 = allocateClusterIPs({ cidr, keys: [a, b], taken: [`192.168.0.${off}`], previous: none });
  t.is(r2.allocated.get(a), `192.168.0.${(off % 6) + 1}`);
  t.is(r2.allocated.get(b), `192.168.0.${((off + 1) % 6) + 1}`);
});

test('network and broadcast addresses are never handed out; a full CIDR reports exhaustion', (t) => {
  const cidr = parseServiceCIDR('192.168.0.0/30'); // usable .1 and .2 only
  const r = allocateClusterIPs({ cidr, keys: ['a/x', 'b/y', 'c/z'], taken: [], previous: none });
  t.deepEqual([...r.allocated.values()].sort(), ['192.168.0.1', '192.168.0.2']);
  t.deepEqual(r.exhausted, ['c/z']);
  t.throws(() => parseServiceCIDR('192.168.0.0/31'), { message: 'service CIDR 192.168.0.0/31 is too small (prefix must be /30 or shorter)' });
});

test('a service keeps its previous address even when a newcomer hashes onto it', (t) => {
  const cidr = parseCIDR('192.168.0.0/29');
  const [a, b, off] = collidingPair(6);
  const mine = `192.168.0.${off}`;
  // b held the address a hashes to; a (sorted first) arrives later: b keeps it, a probes.
  const r = allocateClusterIPs({ cidr, keys: [a, b], taken: [], previous: new Map([[b, mine]]) });
  t.is(r.allocated.get(b), mine);
  t.is(r.allocated.get(a), `192.168.0.${(off % 6) + 1}`);
});

test('a previous address is dropped when now taken explicitly or outside the CIDR', (t) => {
  const first = allocateClusterIPs({ cidr: CIDR, keys: ['default/web-service'], taken: [], previous: none });
  t.is(first.allocated.get('default/web-service'), '10.107.148.169');
  const taken = allocateClusterIPs({
    cidr: CIDR,
    keys: ['default/web-service'],
    taken: ['10.96.0.5'],
    previous: new Map([['default/web-service', '10.96.0.5']]),
  });
  t.is(taken.allocated.get('default/web-service'), '10.107.148.169');
  const outside = allocateClusterIPs({
    cidr: CIDR,
    keys: ['default/web-service'],
    taken: [],
    previous: new Map([['default/web-service', '192.168.0.7']]),
  });
  t.is(outside.allocated.get('default/web-service'), '10.107.148.169');
  const sticky = allocateClusterIPs({
    cidr: CIDR,
    keys: ['default/web-service'],
    taken: [],
    previous: new Map([['default/web-service', '10.96.0.9']]),
  });
  t.is(sticky.allocated.get('default/web-service'), '10.96.0.9');
});

test('a service CIDR must be /8 to /30 and avoid non-unicast ranges', (t) => {
  for (const ok of ['10.96.0.0/12', '10.0.0.0/8', '192.168.0.0/16', '100.64.0.0/10', '223.255.255.0/24', '1.0.0.0/8', '169.253.0.0/16']) {
    t.notThrows(() => parseServiceCIDR(ok), ok);
  }
  const cases: Array<[string, string]> = [
    ['0.0.0.0/0', 'service CIDR 0.0.0.0/0 is too large (prefix must be /8 or longer)'],
    ['10.0.0.0/7', 'service CIDR 10.0.0.0/7 is too large (prefix must be /8 or longer)'],
    ['0.0.0.0/8', 'service CIDR 0.0.0.0/8 overlaps 0.0.0.0/8 ("this network" addresses); use a private range such as 10.96.0.0/12'],
    ['127.0.0.0/8', 'service CIDR 127.0.0.0/8 overlaps 127.0.0.0/8 (loopback addresses); use a private range such as 10.96.0.0/12'],
    ['127.1.0.0/16', 'service CIDR 127.1.0.0/16 overlaps 127.0.0.0/8 (loopback addresses); use a private range such as 10.96.0.0/12'],
    ['169.254.0.0/16', 'service CIDR 169.254.0.0/16 overlaps 169.254.0.0/16 (link-local addresses); use a private range such as 10.96.0.0/12'],
    ['169.0.0.0/8', 'service CIDR 169.0.0.0/8 overlaps 169.254.0.0/16 (link-local addresses); use a private range such as 10.96.0.0/12'],
    ['224.0.0.0/4', 'service CIDR 224.0.0.0/4 is too large (prefix must be /8 or longer)'],
    ['239.1.0.0/16', 'service CIDR 239.1.0.0/16 overlaps 224.0.0.0/3 (multicast and reserved addresses); use a private range such as 10.96.0.0/12'],
    ['255.255.255.0/24', 'service CIDR 255.255.255.0/24 overlaps 224.0.0.0/3 (multicast and reserved addresses); use a private range such as 10.96.0.0/12'],
  ];
  for (const [value, message] of cases) t.throws(() => parseServiceCIDR(value), { message }, value);
});

test('allocation never hands out an address that fails the unicast check', (t) => {
  // parseCIDR (not parseServiceCIDR) lets a range that covers 169.254.0.0/16 through.
  const cidr = parseCIDR('169.254.0.0/15');
  const keys = Array.from({ length: 40 }, (_, i) => `ns/svc-${i}`);
  const r = allocateClusterIPs({ cidr, keys, taken: [], previous: new Map([['ns/svc-0', '169.254.0.5']]) });
  t.is(r.allocated.size, 40);
  t.deepEqual([...r.allocated.values()].filter((ip) => ip.startsWith('169.254.')), []);
  // Half of the hash candidates fall into 169.254.0.0/16; they probe on to 169.255.0.0 onwards.
  t.true([...r.allocated.values()].includes('169.255.0.0'));
  const loopback = allocateClusterIPs({ cidr: parseCIDR('127.0.0.0/30'), keys: ['a/x'], taken: [], previous: none });
  t.deepEqual([...loopback.allocated], []);
  t.deepEqual(loopback.exhausted, ['a/x']);
});
