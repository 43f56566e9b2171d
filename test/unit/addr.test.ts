import { BlockList, SocketAddress } from 'node:net';
import test from 'ava';
import {
  canonicalIPv4Value,
  dottedQuadValue,
  cidrContains,
  classifyIPv4,
  compareAddresses,
  formatCIDR,
  ipAddress,
  ipFromBytes,
  ipPrefix,
  ipToBytes,
  ipv4ToUint32,
  isCanonicalIPv4,
  isCanonicalIPv4CIDR,
  parseCIDR,
  parseIP,
  parseIPSloppy,
  uint32ToIPv4,
  type IPv4Form,
} from '../../src/model/addr.ts';

// [input, family, canonical text, value]
const VALID: ReadonlyArray<[string, 4 | 6, string, bigint]> = [
  ['0.0.0.0', 4, '0.0.0.0', 0n],
  ['10.96.0.1', 4, '10.96.0.1', 0x0a600001n],
  ['255.255.255.255', 4, '255.255.255.255', 0xffffffffn],
  ['::', 6, '::', 0n],
  ['::1', 6, '::1', 1n],
  ['1::', 6, '1::', 1n << 112n],
  ['FE80:0:0:0::1', 6, 'fe80::1', 0xfe800000000000000000000000000001n],
  ['2001:0db8::0001', 6, '2001:db8::1', 0x20010db8000000000000000000000001n],
  ['2001:db8:0:0:1:0:0:1', 6, '2001:db8::1:0:0:1', 0x20010db8000000000001000000000001n],
  ['1:0:0:2:0:0:0:3', 6, '1:0:0:2::3', 0x00010000000000020000000000000003n],
  ['1:2:3:4:5:6:7::', 6, '1:2:3:4:5:6:7:0', 0x00010002000300040005000600070000n],
  ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 6, 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', (1n << 128n) - 1n],
  ['::ffff:10.0.0.1', 6, '::ffff:10.0.0.1', 0xffff0a000001n],
  ['0:0:0:0:0:ffff:a00:1', 6, '::ffff:10.0.0.1', 0xffff0a000001n],
  ['::10.0.0.1', 6, '::a00:1', 0x0a000001n],
  ['1:2:3:4:5:6:10.0.0.1', 6, '1:2:3:4:5:6:a00:1', 0x0001000200030004000500060a000001n],
];

const INVALID: readonly string[] = [
  '', ' 10.0.0.1', '10.0.0.1 ', '10.0.0', '10.0.0.0.1', '10.0.0.256', '10.0.0.1/32', '0x0a.0.0.1', '10.0.0.1 -j ACCEPT',
  '１０.0.0.1', '010.0.0.1', '10.0.0.01', 'fe80::1%eth0', '[::1]', ':::', '1::2::3', '1:2:3:4:5:6:7:8:9', '12345::',
  '::ffff:010.0.0.1', 'g::1', 'abc',
];

test('parseIP: canonical text and value of both families', (t) => {
  for (const [input, family, text, value] of VALID) {
    t.deepEqual(parseIP(input), { family, text, value }, input);
    t.deepEqual(ipAddress(family, value), { family, text, value }, input);
  }
});

test('parseIP: IPv6 text is what Node prints, except for the deprecated IPv4-compatible form', (t) => {
  for (const [input, family, text] of VALID) {
    if (family !== 6) continue;
    const node = new SocketAddress({ address: input, family: 'ipv6' }).address;
    if (input === '::10.0.0.1') t.is(node, '::10.0.0.1');
    else t.is(node, text, input);
  }
});

test('parseIP refuses anything else, leading zeros included', (t) => {
  for (const input of INVALID) t.is(parseIP(input), undefined, JSON.stringify(input));
});

test('parseIPSloppy reads leading zeros as decimal, as kube-proxy does', (t) => {
  const cases: ReadonlyArray<[string, string | undefined]> = [
    ['10.180.0.01', '10.180.0.1'],
    ['010.0.0.1', '10.0.0.1'],
    ['0010.000.0.0255', '10.0.0.255'],
    ['10.0.0.1', '10.0.0.1'],
    ['fd00::1', 'fd00::1'],
    ['10.0.0.0256', undefined],
    ['10.0.0.256', undefined],
    ['10.0.0', undefined],
    ['::ffff:010.0.0.1', undefined],
  ];
  for (const [input, text] of cases) t.is(parseIPSloppy(input)?.text, text, input);
});

test('classifyIPv4 and isCanonicalIPv4', (t) => {
  const cases: ReadonlyArray<[string, IPv4Form]> = [
    ['10.0.0.1', 'canonical'],
    ['0.0.0.0', 'canonical'],
    ['10.0.0.01', 'leading-zeros'],
    ['00.0.0.0', 'leading-zeros'],
    ['10.0.0.256', 'out-of-range'],
    ['10.0.0.0256', 'out-of-range'],
    ['10.0.0', 'invalid'],
    ['::1', 'invalid'],
    ['10.0.0.1\n', 'invalid'],
  ];
  for (const [input, form] of cases) {
    t.is(classifyIPv4(input), form, input);
    t.is(isCanonicalIPv4(input), form === 'canonical', input);
    t.is(canonicalIPv4Value(input) !== undefined, form === 'canonical', input);
  }
});

test('canonicalIPv4Value: the uint32 of a canonical dotted quad only', (t) => {
  t.is(canonicalIPv4Value('10.96.0.1'), 0x0a600001);
  t.is(canonicalIPv4Value('0.0.0.0'), 0);
  t.is(canonicalIPv4Value('255.255.255.255'), 0xffffffff);
  for (const bad of ['10.96.0.01', '10.96.0.256', '10.96.0', '', '::ffff:10.0.0.1', ' 10.96.0.1', '١٠.96.0.1']) {
    t.is(canonicalIPv4Value(bad), undefined, bad);
    t.is(dottedQuadValue(bad), undefined, bad);
  }
  t.is(dottedQuadValue('10.96.0.1'), 0x0a600001);
});

test('isCanonicalIPv4CIDR: canonical address and length, host bits allowed', (t) => {
  for (const ok of ['10.96.0.0/12', '0.0.0.0/0', '10.0.0.1/32', '10.0.0.1/8']) t.true(isCanonicalIPv4CIDR(ok), ok);
  for (const bad of ['10.96.0.0/33', '10.96.0.0/012', '10.96.0.0', '/8', '010.0.0.0/8', '10.0.0.0/8 -j ACCEPT', '::/0', '10.0.0.0/-1']) {
    t.false(isCanonicalIPv4CIDR(bad), bad);
  }
});

test('ipv4ToUint32 and uint32ToIPv4', (t) => {
  t.is(ipv4ToUint32('10.96.0.0'), 0x0a600000);
  t.is(ipv4ToUint32('255.255.255.255'), 0xffffffff);
  t.is(uint32ToIPv4(0x0a600001), '10.96.0.1');
  t.is(uint32ToIPv4(0xffffffff), '255.255.255.255');
  t.throws(() => ipv4ToUint32('10.0.0.01'), { message: '"10.0.0.01" is not a valid IPv4 address (dotted quad, no leading zeros)' });
  for (const bad of [-1, 2 ** 32, 1.5, Number.NaN]) t.throws(() => uint32ToIPv4(bad), { instanceOf: RangeError });
});

test('ipAddress refuses values out of range', (t) => {
  t.throws(() => ipAddress(4, 1n << 32n), { instanceOf: RangeError });
  t.throws(() => ipAddress(6, 1n << 128n), { instanceOf: RangeError });
  t.throws(() => ipAddress(6, -1n), { instanceOf: RangeError });
});

test('bytes in network order, both ways', (t) => {
  t.is(ipFromBytes(Uint8Array.from([10, 96, 0, 1])).text, '10.96.0.1');
  t.is(ipFromBytes(Buffer.from('fd000000000000000000000000000001', 'hex')).text, 'fd00::1');
  t.deepEqual([...ipToBytes(parseIP('10.96.0.1')!)], [10, 96, 0, 1]);
  t.is(ipToBytes(parseIP('fd00::1')!).toString('hex'), 'fd000000000000000000000000000001');
  t.throws(() => ipFromBytes(new Uint8Array(5)), { instanceOf: RangeError });
});

test('compareAddresses: numeric, IPv4 before IPv6', (t) => {
  const sorted = ['10.0.0.9', '0.0.0.0', '::', '10.0.0.10', '::ffff:1.2.3.4', '9.255.255.255', 'fd00::1', '::1', '255.255.255.255', '1.2.3.4'];
  t.deepEqual(sorted.sort(compareAddresses), [
    '0.0.0.0', '1.2.3.4', '9.255.255.255', '10.0.0.9', '10.0.0.10', '255.255.255.255', '::', '::1', '::ffff:1.2.3.4', 'fd00::1',
  ]);
  t.is(compareAddresses('fd00::1', parseIP('FD00::1')!), 0);
  t.is(compareAddresses(parseIP('10.0.0.1')!, '10.0.0.1'), 0);
  t.throws(() => compareAddresses('10.0.0.1', '10.0.0.01'), { instanceOf: TypeError });
});

test('parseCIDR: address as written and prefix with host bits cleared', (t) => {
  const cases: ReadonlyArray<[string, string, string]> = [
    ['10.96.0.0/12', '10.96.0.0', '10.96.0.0/12'],
    ['10.96.0.1/12', '10.96.0.1', '10.96.0.0/12'],
    ['0.0.0.0/0', '0.0.0.0', '0.0.0.0/0'],
    ['1.2.3.4/0', '1.2.3.4', '0.0.0.0/0'],
    ['10.0.0.1/32', '10.0.0.1', '10.0.0.1/32'],
    ['FD00::1/64', 'fd00::1', 'fd00::/64'],
    ['::/0', '::', '::/0'],
    ['::1/128', '::1', '::1/128'],
    ['::ffff:10.0.0.0/104', '::ffff:10.0.0.0', '::ffff:10.0.0.0/104'],
  ];
  for (const [input, ip, prefix] of cases) {
    const r = parseCIDR(input);
    t.is(r?.ip.text, ip, input);
    t.is(r && formatCIDR(r.prefix), prefix, input);
  }
  for (const bad of ['10.0.0.0/33', '10.0.0.0/08', '10.0.0.0/', '10.0.0.0', '::/129', '010.0.0.0/8', '10.0.0.0/8 ', 'fe80::%eth0/64']) {
    t.is(parseCIDR(bad), undefined, bad);
  }
});

test('ipPrefix clears host bits and checks the length', (t) => {
  t.is(ipPrefix(4, 0x0a600001n, 12).text, '10.96.0.0/12');
  t.is(ipPrefix(6, (1n << 128n) - 1n, 0).text, '::/0');
  t.throws(() => ipPrefix(4, 0n, 33), { instanceOf: RangeError });
  t.throws(() => ipPrefix(6, 0n, 1.5), { instanceOf: RangeError });
});

// [prefix, address, contained]
const CONTAINS: ReadonlyArray<[string, string, boolean]> = [
  ['10.96.0.0/12', '10.96.0.0', true],
  ['10.96.0.0/12', '10.111.255.255', true],
  ['10.96.0.0/12', '10.112.0.0', false],
  ['10.96.0.0/12', '10.95.255.255', false],
  ['0.0.0.0/0', '0.0.0.0', true],
  ['0.0.0.0/0', '255.255.255.255', true],
  ['10.96.0.10/32', '10.96.0.10', true],
  ['10.96.0.10/32', '10.96.0.11', false],
  ['10.96.0.1/12', '10.100.0.1', true], // host bits of a prefix string are ignored
  ['::/0', '::', true],
  ['::/0', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', true],
  ['fd00::/8', 'fdff::1', true],
  ['fd00::/8', 'fe00::1', false],
  ['::1/128', '::1', true],
  ['::1/128', '::2', false],
  // Families never mix.
  ['::/0', '10.0.0.1', false],
  ['0.0.0.0/0', '::', false],
  ['10.0.0.0/8', '::ffff:10.0.0.1', false],
  ['::ffff:10.0.0.0/104', '10.0.0.1', false],
  ['::ffff:10.0.0.0/104', '::ffff:10.0.0.1', true],
  // Not an address.
  ['0.0.0.0/0', '10.0.0.01', false],
  ['0.0.0.0/0', 'abc', false],
];

test('cidrContains: /0, /32, /128 and IPv4-mapped IPv6', (t) => {
  for (const [prefix, ip, inside] of CONTAINS) {
    t.is(cidrContains(prefix, ip), inside, `${prefix} ∋ ${ip}`);
    const p = parseCIDR(prefix)!.prefix;
    const a = parseIP(ip);
    if (a) t.is(cidrContains(p, a), inside, `${prefix} ∋ ${ip} (parsed)`);
  }
  t.throws(() => cidrContains('10.0.0.0/33', '10.0.0.1'), { instanceOf: TypeError });
});

test("cidrContains differs from Node's BlockList on mapped addresses, which BlockList unmaps", (t) => {
  const v4 = new BlockList();
  v4.addSubnet('10.0.0.0', 8, 'ipv4');
  t.true(v4.check('::ffff:10.0.0.1', 'ipv6'));
  t.false(cidrContains('10.0.0.0/8', '::ffff:10.0.0.1'));
  const all6 = new BlockList();
  all6.addSubnet('::', 0, 'ipv6');
  t.true(all6.check('10.0.0.1', 'ipv4'));
  t.false(cidrContains('::/0', '10.0.0.1'));
});
