/**
 * The EndpointSlice fast path (src/model/fast-slice.ts) against the zod
 * schema it stands in for: whatever it accepts, the schema accepts with the
 * very same output (values and keys), and parseObject gives the same result
 * with and without it, over random and hostile slices.
 */
import { isDeepStrictEqual } from 'node:util';
import test from 'ava';
import fc from 'fast-check';
import { readCommonSlice } from '../../src/model/fast-slice.ts';
import { k8sEndpointSliceSchema } from '../../src/model/kubernetes.ts';
import { parseObject } from '../../src/model/parse.ts';
import { comparable } from './model-helpers.ts';
import { hostile } from '../support/hostile.ts';

const LABEL = 'kubernetes.io/service-name';

/** A value that is not what any field wants: for wrong-type cases. */
const junk = fc.constantFrom<unknown>(1, 0, -1, 1.5, NaN, Infinity, true, false, [], {}, ['x'], { a: 1 }, '');

/** A field value: mostly from `good`, sometimes null, explicit undefined, a bad string, hostile or junk. */
function field(good: fc.Arbitrary<unknown>, bad: readonly unknown[] = []): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 30, arbitrary: good },
    { weight: 1, arbitrary: fc.constantFrom<unknown>(null, undefined) },
    { weight: 1, arbitrary: bad.length > 0 ? fc.constantFrom(...bad) : hostile },
    { weight: 1, arbitrary: hostile },
    { weight: 1, arbitrary: junk },
  );
}

const dnsName = fc.constantFrom('web', 'web-abc', 'a', 'x1', 'ns-7', 'b'.repeat(63));
const subdomain = fc.constantFrom('web-abc.1', 'node-a', 'node-a.example.com', 'n1', `${'a'.repeat(63)}.b`);
const zoneName = fc.constantFrom('z1', 'us-east-1a', 'Zone_A.1', 'a'.repeat(63));
const address = fc.constantFrom('10.244.0.1', '10.244.0.01', '10.180.0.999', '127.0.0.1', 'fd00::1', 'abc', '', '10.0.0.1 -j ACCEPT');

const conditions = fc.oneof(
  { weight: 6, arbitrary: fc.record({ ready: field(fc.boolean()), serving: field(fc.boolean()), terminating: field(fc.boolean()) }, { requiredKeys: [] }) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, undefined, [], 'ready', true) },
);

const hints = fc.oneof(
  fc.constantFrom<unknown>(null, undefined, {}, [], 'x'),
  fc.record({ forZones: fc.array(fc.record({ name: field(zoneName) }), { maxLength: 2 }) }, { requiredKeys: [] }),
);

const addresses = fc.oneof(
  { weight: 8, arbitrary: fc.array(address, { minLength: 1, maxLength: 3 }) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>([], new Array(101).fill('10.0.0.1'), new Array(100).fill('10.0.0.2'), ['10.0.0.1', 5], '10.0.0.1', null) },
);

const endpoint = fc.oneof(
  {
    weight: 10,
    arbitrary: fc.record(
      {
        addresses,
        conditions,
        nodeName: field(subdomain, ['Node A', '-a', 'a..b', 'a'.repeat(254)]),
        zone: field(zoneName, ['-z', 'z z', 'a'.repeat(64)]),
        hints,
        hostname: fc.constant('h'),
        targetRef: fc.constant({ kind: 'Pod', name: 'p' }),
      },
      { requiredKeys: ['addresses'] },
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, [], 'x', 1, {}) },
);

const port = fc.oneof(
  {
    weight: 10,
    arbitrary: fc.record(
      {
        name: field(fc.constantFrom('', 'http', 'dns-udp', 'metrics'), ['HTTP', 'a_b', '-x']),
        protocol: field(fc.constantFrom('TCP', 'UDP', 'SCTP'), ['tcp', 'Tcp', 'ICMP', 'ſctp']),
        port: field(fc.constantFrom(80, 8080, 1, 65535), [0, 65536, 1.5, -1, NaN, Infinity, '80']),
        appProtocol: fc.constant('http'),
      },
      { requiredKeys: [] },
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, [], 'x', 80) },
);

const labels = fc.oneof(
  { weight: 8, arbitrary: fc.record({ [LABEL]: field(dnsName, ['Web!', 'web.x']), other: fc.constant('x') }, { requiredKeys: [LABEL] }) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, undefined, [], 'web') },
);

const metadata = fc.oneof(
  {
    weight: 10,
    arbitrary: fc.record(
      { name: field(subdomain, ['Web', 'a_b', '']), namespace: field(fc.constantFrom('', 'default', 'nsd'), ['NS', 'a.b']), labels, uid: fc.constant('u') },
      { requiredKeys: ['name', 'labels'] },
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, [], 'm') },
);

/** An EndpointSlice's fields after dispatch, anything from the common shape to hostile. */
const sliceBody = fc.record(
  {
    metadata,
    endpoints: fc.oneof({ weight: 8, arbitrary: fc.array(endpoint, { maxLength: 4 }) }, { weight: 1, arbitrary: fc.constantFrom<unknown>(null, undefined, {}, 'x') }),
    ports: fc.oneof({ weight: 8, arbitrary: fc.array(port, { maxLength: 3 }) }, { weight: 1, arbitrary: fc.constantFrom<unknown>(null, undefined, {}, 'x') }),
  },
  { requiredKeys: ['metadata'] },
);

test('whatever the fast path accepts, the schema accepts with the same output, keys included', (t) => {
  let accepted = 0;
  let refused = 0;
  fc.assert(
    fc.property(sliceBody, (raw) => {
      const fast = readCommonSlice(raw as Record<string, unknown>);
      const schema = k8sEndpointSliceSchema.safeParse(raw);
      if (fast === undefined) {
        refused++;
        return true;
      }
      accepted++;
      return schema.success && isDeepStrictEqual(fast, schema.data);
    }),
    { numRuns: 5000, seed: 4242 },
  );
  // Both sides are exercised: the test would prove nothing if the fast path never (or always) answered.
  t.true(accepted > 500, `accepted ${accepted}`);
  t.true(refused > 500, `refused ${refused}`);
});

test('parseObject gives the same result with and without the fast path', (t) => {
  const wrap = (body: object) => ({ apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', addressType: 'IPv4', ...body });
  fc.assert(
    fc.property(sliceBody, fc.nat(5), (body, index) => {
      const o = { file: 'in.yaml', index, raw: wrap(body) };
      return isDeepStrictEqual(comparable(parseObject(o)), comparable(parseObject(o, { schemasOnly: true })));
    }),
    { numRuns: 5000, seed: 4243 },
  );
  t.pass();
});

test('the common shape is read without the schema, exactly', (t) => {
  const raw = {
    metadata: { name: 'web-abc.1', labels: { [LABEL]: 'web', other: 'x' }, uid: 'u' },
    endpoints: [
      { addresses: ['10.244.0.1', '10.244.0.100'], conditions: { ready: true }, nodeName: 'node-a', zone: 'z1', targetRef: { kind: 'Pod' } },
      { addresses: ['10.244.0.2'], conditions: { ready: false, serving: null }, nodeName: null },
      { addresses: ['10.244.0.3'], conditions: null, hints: null },
    ],
    ports: [{ name: 'http', port: 8080, protocol: 'UDP', appProtocol: 'http' }, { port: null }, {}],
  };
  const fast = readCommonSlice(raw);
  const expected = {
    metadata: { name: 'web-abc.1', namespace: 'default', labels: { [LABEL]: 'web' } },
    endpoints: [
      { addresses: ['10.244.0.1', '10.244.0.100'], conditions: { ready: true, serving: true, terminating: false }, nodeName: 'node-a', zone: 'z1' },
      { addresses: ['10.244.0.2'], conditions: { ready: false, serving: false, terminating: false }, nodeName: undefined },
      { addresses: ['10.244.0.3'], conditions: { ready: true, serving: true, terminating: false }, hints: undefined },
    ],
    ports: [{ name: 'http', protocol: 'UDP', port: 8080 }, { name: '', protocol: 'TCP', port: undefined }, { name: '', protocol: 'TCP' }],
  };
  t.deepEqual(fast, expected);
  // Keys the input does not hold stay absent, as in the schema's output.
  t.deepEqual(Object.keys(fast!.endpoints[0]!), ['addresses', 'conditions', 'nodeName', 'zone']);
  t.deepEqual(Object.keys(fast!.endpoints[1]!), ['addresses', 'conditions', 'nodeName']);
  t.deepEqual(Object.keys(fast!.ports[2]!), ['name', 'protocol']);
  t.true(isDeepStrictEqual(fast, k8sEndpointSliceSchema.parse(raw)));
});

test('anything unusual is left to the schema', (t) => {
  const base = { metadata: { name: 'web-abc', labels: { [LABEL]: 'web' } }, endpoints: [{ addresses: ['10.244.0.1'] }], ports: [{ port: 80 }] };
  t.not(readCommonSlice(base), undefined);
  const variants: Array<[string, unknown]> = [
    ['hints', { ...base, endpoints: [{ addresses: ['10.244.0.1'], hints: { forZones: [{ name: 'z1' }] } }] }],
    ['a string condition', { ...base, endpoints: [{ addresses: ['10.244.0.1'], conditions: { ready: 'true' } }] }],
    ['no address', { ...base, endpoints: [{ addresses: [] }] }],
    ['101 addresses', { ...base, endpoints: [{ addresses: new Array(101).fill('10.244.0.1') }] }],
    ['a bad node name', { ...base, endpoints: [{ addresses: ['10.244.0.1'], nodeName: 'Node A' }] }],
    ['a bad zone', { ...base, endpoints: [{ addresses: ['10.244.0.1'], zone: 'z z' }] }],
    ['a port 1.5', { ...base, ports: [{ port: 1.5 }] }],
    ['protocol tcp', { ...base, ports: [{ port: 80, protocol: 'tcp' }] }],
    ['a bad port name', { ...base, ports: [{ port: 80, name: 'HTTP' }] }],
    ['a bad namespace', { ...base, metadata: { ...base.metadata, namespace: 'NS' } }],
    ['a bad label', { ...base, metadata: { name: 'web-abc', labels: { [LABEL]: 'Web!' } } }],
    ['endpoints not a list', { ...base, endpoints: { addresses: ['10.244.0.1'] } }],
  ];
  for (const [what, raw] of variants) t.is(readCommonSlice(raw as Record<string, unknown>), undefined, what);
});

test('errors and warnings are the same words with the fast path on', (t) => {
  const raw = {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    addressType: 'IPv4',
    metadata: { name: 'good-1', namespace: 'nsd', labels: { [LABEL]: 'good' } },
    endpoints: [
      { addresses: ['10.180.0.1'], nodeName: 'node-a' },
      { addresses: ['10.180.0.01', 'abc'], nodeName: 'node-a' },
      { addresses: ['127.0.0.1'] },
    ],
    ports: [{ name: 'http', port: 8080 }, { name: 'all' }],
  };
  const r = parseObject({ file: 'in.yaml', index: 0, raw });
  if (r.status !== 'ok') return t.fail(`expected ok, got ${r.status}`);
  const at = 'in.yaml: EndpointSlice nsd/good-1:';
  t.deepEqual(r.warnings.map(String), [
    `${at} ports[1].port: absent ("all ports" is not supported by kube-proxy); port ignored`,
    `${at} endpoints[1].addresses[0]: "10.180.0.01" has leading zeros; read as 10.180.0.1, as kube-proxy does`,
    `${at} endpoints[1].addresses[1]: "abc" is not a valid IPv4 address; address ignored`,
    `${at} endpoints[2].addresses[0]: "127.0.0.1" is a loopback address; endpoint ignored`,
  ]);
  t.deepEqual(r.object.kind === 'EndpointSlice' ? r.object.groups : undefined, [
    {
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
      addresses: [
        { ip: '10.180.0.1', ready: true, serving: true, terminating: false, nodeName: 'node-a' },
        { ip: '10.180.0.1', ready: true, serving: true, terminating: false, nodeName: 'node-a' },
      ],
    },
  ]);
  const bad = parseObject({ file: 'in.yaml', index: 0, raw: { ...raw, endpoints: [{ addresses: ['10.180.0.1'], nodeName: 'node a' }, { addresses: [] }] } });
  t.is(
    bad.status === 'error' ? bad.error.message : bad.status,
    `${at} endpoints[0].nodeName: "node a" is not a valid DNS-1123 subdomain (dot-separated DNS-1123 labels, at most 253 characters) (and 1 more problem)`,
  );
});

test('parseObject gives the same result with and without the fast path for IPv6 slices', (t) => {
  const v6 = fc.array(fc.constantFrom('fd00::1', 'FD00::0:2', '10.244.0.1', 'fe80::1', '::1', 'fd00::1%eth0', 'x'), { minLength: 1, maxLength: 3 });
  const body = fc.record({ metadata: fc.constant({ name: 'web-v6', labels: { 'kubernetes.io/service-name': 'web' } }), endpoints: fc.array(fc.record({ addresses: v6 }), { maxLength: 4 }), ports: fc.constant([{ port: 80 }]) });
  fc.assert(
    fc.property(fc.oneof(body, sliceBody), fc.nat(5), (b, index) => {
      const o = { file: 'in.yaml', index, raw: { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', addressType: 'IPv6', ...b } };
      return isDeepStrictEqual(comparable(parseObject(o)), comparable(parseObject(o, { schemasOnly: true })));
    }),
    { numRuns: 3000, seed: 4244 },
  );
  t.pass();
});
