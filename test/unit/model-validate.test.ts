import test from 'ava';
import { ipv4ToUint32, isCanonicalIPv4, uint32ToIPv4 } from '../../src/model/addr.ts';
import { displayFile, displayName, ManifestError } from '../../src/model/errors.ts';
import {
  asciiUpperCase,
  checkDNSLabel,
  checkDNSSubdomain,
  checkIPv4,
  checkNodeName,
  checkPort,
  checkPortName,
  checkProtocol,
  checkUnicastIPv4,
  checkZone,
  parseCIDR,
  parseEndpointIPv4,
  parseIPv4HostPort,
} from '../../src/model/validate.ts';

test('strict IPv4: canonical dotted quads only', (t) => {
  for (const ok of ['10.96.0.1', '0.0.0.0', '255.255.255.255', '192.168.1.10']) t.true(isCanonicalIPv4(ok), ok);
  for (const bad of ['010.0.0.1', '10.0.0.01', '10.96.0.0/12', '256.1.1.1', '1.2.3', '1.2.3.4.5', ' 1.2.3.4', '1.2.3.4 ', '1.2.3.4\n', '::1', '1.2.3.4"', '', '0x1.2.3.4', '1.2.3.-1']) {
    t.false(isCanonicalIPv4(bad), JSON.stringify(bad));
  }
  t.is(checkIPv4('10.0.0.1 -j ACCEPT'), '"10.0.0.1 -j ACCEPT" is not a valid IPv4 address (dotted quad, no leading zeros)');
  t.is(checkIPv4('10.0.0.1'), undefined);
});

test('unicast IPv4 rejects special-purpose addresses', (t) => {
  t.is(checkUnicastIPv4('10.244.1.2'), undefined);
  t.is(checkUnicastIPv4('127.0.0.1'), '"127.0.0.1" is a loopback address');
  t.is(checkUnicastIPv4('0.0.0.0'), '"0.0.0.0" is in 0.0.0.0/8');
  t.is(checkUnicastIPv4('169.254.169.254'), '"169.254.169.254" is a link-local address');
  t.is(checkUnicastIPv4('224.0.0.1'), '"224.0.0.1" is a multicast address');
  t.is(checkUnicastIPv4('255.255.255.255'), '"255.255.255.255" is the broadcast address');
  t.is(checkUnicastIPv4('1.2.3'), '"1.2.3" is not a valid IPv4 address (dotted quad, no leading zeros)');
});

test('ipv4 <-> uint32', (t) => {
  t.is(ipv4ToUint32('10.96.0.0'), 0x0a600000);
  t.is(ipv4ToUint32('255.255.255.255'), 0xffffffff);
  t.is(uint32ToIPv4(0x0a600001), '10.96.0.1');
  t.is(uint32ToIPv4(0), '0.0.0.0');
  t.is(uint32ToIPv4(ipv4ToUint32('172.16.254.3')), '172.16.254.3');
  t.throws(() => ipv4ToUint32('10.0.0.256'), { message: '"10.0.0.256" is not a valid IPv4 address (dotted quad, no leading zeros)' });
  t.throws(() => uint32ToIPv4(2 ** 32), { instanceOf: RangeError });
});

test('parseCIDR', (t) => {
  t.deepEqual(parseCIDR('10.96.0.0/12'), { network: 0x0a600000, prefix: 12, size: 2 ** 20 });
  t.deepEqual(parseCIDR('0.0.0.0/0'), { network: 0, prefix: 0, size: 2 ** 32 });
  t.deepEqual(parseCIDR('192.168.1.4/32'), { network: 0xc0a80104, prefix: 32, size: 1 });
  t.throws(() => parseCIDR('10.96.0.1/12'), { message: '"10.96.0.1/12" has host bits set; did you mean "10.96.0.0/12"?' });
  for (const bad of ['10.96.0.0', '10.96.0.0/33', '10.96.0.0/012', '10.96.0/12', '10.96.0.0/12 ', 'fd00::/64', '10.96.0.0/-1']) {
    t.throws(() => parseCIDR(bad), { message: `${JSON.stringify(bad)} is not a valid IPv4 CIDR (expected e.g. "10.96.0.0/12")` }, bad);
  }
});

test('port', (t) => {
  t.is(checkPort(1), undefined);
  t.is(checkPort(65535), undefined);
  t.is(checkPort(0), '0 is out of range 1-65535');
  t.is(checkPort(70000), '70000 is out of range 1-65535');
  t.is(checkPort(80.5), '80.5 is not an integer');
});

test('DNS-1123 label and subdomain, node names, zones, port names', (t) => {
  for (const ok of ['default', 'web-service', 'a', '0abc', 'a'.repeat(63)]) t.is(checkDNSLabel(ok), undefined, ok);
  for (const bad of ['Web', 'web_server', '-web', 'web-', 'a.b', '', 'a'.repeat(64), 'we b', 'web"', 'web\n']) {
    t.not(checkDNSLabel(bad), undefined, JSON.stringify(bad));
  }
  t.is(
    checkDNSLabel('Web'),
    `"Web" is not a valid DNS-1123 label (lower-case alphanumerics and '-', alphanumeric at both ends, at most 63 characters)`,
  );
  t.is(checkDNSSubdomain('linkding-x7v2q'), undefined);
  t.is(checkDNSSubdomain('a.b-c.d'), undefined);
  t.not(checkDNSSubdomain('a..b'), undefined);
  t.not(checkDNSSubdomain(`${'a'.repeat(64)}.b`), undefined);
  t.is(checkNodeName('kind-worker'), undefined);
  t.not(checkNodeName('kind worker'), undefined);
  t.is(checkZone('us-east-1a'), undefined);
  t.is(checkZone('Zone_A.1'), undefined);
  t.not(checkZone(''), undefined);
  t.not(checkZone('zone a'), undefined);
  t.is(checkPortName('http-alt'), undefined);
  t.not(checkPortName('8080'), undefined);
  t.not(checkPortName('http--alt'), undefined);
  t.not(checkPortName('a-very-long-port-name'), undefined);
});

test('protocol', (t) => {
  t.is(checkProtocol('TCP', { ignoreCase: false }), undefined);
  t.is(checkProtocol('SCTP', { ignoreCase: false }), undefined);
  t.is(checkProtocol('tcp', { ignoreCase: false }), '"tcp" is not a supported protocol (TCP, UDP or SCTP)');
  t.is(checkProtocol('udp', { ignoreCase: true }), undefined);
  t.is(checkProtocol('http', { ignoreCase: true }), '"http" is not a supported protocol (TCP, UDP or SCTP)');
});

test('ip:port endpoints', (t) => {
  t.deepEqual(parseIPv4HostPort('10.20.0.2:8080'), { ip: '10.20.0.2', port: 8080 });
  t.deepEqual(parseIPv4HostPort('10.20.0.2'), { problem: '"10.20.0.2" is not an "ip:port" endpoint' });
  t.deepEqual(parseIPv4HostPort('10.20.0.2:0'), { problem: '"10.20.0.2:0" is not an "ip:port" endpoint' });
  t.deepEqual(parseIPv4HostPort('10.20.0.2:99999'), { problem: '"10.20.0.2:99999": 99999 is out of range 1-65535' });
  t.deepEqual(parseIPv4HostPort('[fd00::1]:8080'), { problem: '"[fd00::1]:8080" is an IPv6 endpoint; only IPv4 "ip:port" endpoints are read' });
  t.deepEqual(parseIPv4HostPort('fd00::1:8080'), { problem: '"fd00::1:8080" is an IPv6 endpoint; only IPv4 "ip:port" endpoints are read' });
  t.deepEqual(parseIPv4HostPort('[10.20.0.2]:8080'), { problem: '"[10.20.0.2]:8080" is not an "ip:port" endpoint' });
  t.deepEqual(parseIPv4HostPort('10.20.0.256:80'), {
    problem: '"10.20.0.256:80": "10.20.0.256" is not a valid IPv4 address (dotted quad, no leading zeros)',
  });
  t.deepEqual(parseIPv4HostPort('127.0.0.1:80'), { problem: '"127.0.0.1:80": "127.0.0.1" is a loopback address' });
});

test('endpoint addresses are read as kube-proxy reads them: leading zeros as decimal, with a note', (t) => {
  t.deepEqual(parseEndpointIPv4('10.180.0.1'), { ip: '10.180.0.1' });
  t.deepEqual(parseEndpointIPv4('10.180.0.01'), { ip: '10.180.0.1', note: '"10.180.0.01" has leading zeros; read as 10.180.0.1, as kube-proxy does' });
  // Decimal, not octal: 010 is ten.
  t.deepEqual(parseEndpointIPv4('010.000.0.0255'), { ip: '10.0.0.255', note: '"010.000.0.0255" has leading zeros; read as 10.0.0.255, as kube-proxy does' });
  for (const bad of ['10.180.0.999', 'abc', '', '10.180.0', '10.180.0.1.1', ' 10.180.0.1', '10.180.0.1 -j ACCEPT', '10.180.0.1/32', '0x0a.1.1.1', '10.180.0.-1', `1${'0'.repeat(40)}.1.1.1`]) {
    t.deepEqual(parseEndpointIPv4(bad), { problem: `${JSON.stringify(bad)} is not a valid IPv4 address` }, bad);
  }
  t.deepEqual(parseEndpointIPv4('fd00::1'), { problem: '"fd00::1" is an IPv6 address, not an IPv4 one' });
  t.deepEqual(parseEndpointIPv4('::ffff:10.1.1.1'), { problem: '"::ffff:10.1.1.1" is an IPv6 address, not an IPv4 one' });
  t.deepEqual(parseEndpointIPv4('127.0.0.1'), { problem: '"127.0.0.1" is a loopback address' });
  t.deepEqual(parseEndpointIPv4('169.254.0.01'), { problem: '"169.254.0.01" reads as 169.254.0.1, a link-local address' });
});

test('ip:port endpoints read as endpoint addresses', (t) => {
  t.deepEqual(parseIPv4HostPort('10.20.0.2:8080', { endpoint: true }), { ip: '10.20.0.2', port: 8080 });
  t.deepEqual(parseIPv4HostPort('10.20.0.02:8080', { endpoint: true }), {
    ip: '10.20.0.2',
    port: 8080,
    note: '"10.20.0.02:8080": "10.20.0.02" has leading zeros; read as 10.20.0.2, as kube-proxy does',
  });
  t.deepEqual(parseIPv4HostPort('10.20.0.256:80', { endpoint: true }), { problem: '"10.20.0.256:80": "10.20.0.256" is not a valid IPv4 address' });
  t.deepEqual(parseIPv4HostPort('10.20.0.02:99999', { endpoint: true }), { problem: '"10.20.0.02:99999": 99999 is out of range 1-65535' });
  // Without the option (e.g. drover trace --dst) leading zeros are refused.
  t.deepEqual(parseIPv4HostPort('10.20.0.02:8080'), { problem: '"10.20.0.02:8080": "10.20.0.02" is not a valid IPv4 address (dotted quad, no leading zeros)' });
});

test('ManifestError formats one line naming file, object and field', (t) => {
  const e = new ManifestError({ file: 'examples/bad.yaml', kind: 'Service', object: 'default/web', field: 'spec.ports[0].port', detail: '70000 is out of range 1-65535' });
  t.is(e.message, 'examples/bad.yaml: Service default/web: spec.ports[0].port: 70000 is out of range 1-65535');
  t.is(String(e), e.message);
  t.true(e instanceof Error);
  t.is(e.field, 'spec.ports[0].port');
  t.is(new ManifestError({ file: 'a.yaml', line: 3, column: 5, detail: 'syntax error: x\ny' }).message, 'a.yaml:3:5: syntax error: x y');
  t.is(new ManifestError({ file: 'a.yaml', kind: 'Service', index: 2, field: 'metadata.name', detail: 'required' }).message, 'a.yaml: Service #3: metadata.name: required');
  t.is(new ManifestError({ file: 'a.yaml', index: 0, detail: 'expected an object, got string' }).message, 'a.yaml: object #1: expected an object, got string');
  t.is(e.withNote('keeping the last valid version').message, `${e.message}; keeping the last valid version`);
});

test('protocol case is ignored over ASCII only', (t) => {
  t.is(checkProtocol('sctp', { ignoreCase: true }), undefined);
  t.is(checkProtocol('\u017Fctp', { ignoreCase: true }), '"\u017Fctp" is not a supported protocol (TCP, UDP or SCTP)');
  t.is(asciiUpperCase('\u017Fctp-tcp'), '\u017FCTP-TCP');
});

test('a file name with control or other non-printable characters is shown quoted and escaped', (t) => {
  const forged = 'x\ndrover: fake.yaml: all good\u001b[31m.yaml';
  t.is(
    new ManifestError({ file: forged, kind: 'Service', object: 'default/web', detail: 'bad' }).message,
    '"x\\ndrover: fake.yaml: all good\\u001b[31m.yaml": Service default/web: bad',
  );
  // C1 controls, bidi overrides and line separators, which JSON.stringify leaves as they are.
  t.is(new ManifestError({ file: 'a\u009b31m\u202e\u2028.yaml', line: 2, column: 1, detail: 'x' }).message, '"a\\u009b31m\\u202e\\u2028.yaml":2:1: x');
  // Printable names stay as they are, non-ASCII letters included.
  t.is(new ManifestError({ file: 'dir with space/dienste-ü.yaml', detail: 'x' }).message, 'dir with space/dienste-ü.yaml: x');
  t.is(displayFile('ok.yaml'), 'ok.yaml');
  // A detail that carries such characters (e.g. an OS error naming the path) is escaped too.
  t.is(new ManifestError({ file: 'a.yaml', detail: 'cannot read file: open \'\u001b]0;x\u0007\'' }).message, 'a.yaml: cannot read file: open \'\\u001b]0;x\\u0007\'');
  t.is(displayName('web\u009b'), '"web\\u009b"');
  t.is(checkDNSLabel('a\u0085b'), '"a\\u0085b" is not a valid DNS-1123 label (lower-case alphanumerics and \'-\', alphanumeric at both ends, at most 63 characters)');
});
