/**
 * The Service fast path (src/model/fast-service.ts) against the zod schema
 * it stands in for: whatever it accepts, the schema accepts with the very
 * same output (values and keys), and parseObject gives the same result with
 * and without it, over random and hostile Services.
 */
import { isDeepStrictEqual } from 'node:util';
import test from 'ava';
import fc from 'fast-check';
import { readCommonService } from '../../src/model/fast-service.ts';
import { k8sServiceSchema } from '../../src/model/kubernetes.ts';
import { parseObject } from '../../src/model/parse.ts';
import { comparable } from './model-helpers.ts';
import { hostile } from '../support/hostile.ts';

/** A value that is not what any field wants: for wrong-type cases. */
const junk = fc.constantFrom<unknown>(1, 0, -1, 1.5, NaN, Infinity, true, false, [], {}, ['x'], { a: 1 }, '');

/** A field value: mostly from `good`, sometimes null, explicit undefined, a bad value, hostile or junk. */
function field(good: fc.Arbitrary<unknown>, bad: readonly unknown[] = []): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 40, arbitrary: good },
    { weight: 1, arbitrary: fc.constantFrom<unknown>(null, undefined) },
    { weight: 1, arbitrary: bad.length > 0 ? fc.constantFrom(...bad) : hostile },
    { weight: 1, arbitrary: hostile },
    { weight: 1, arbitrary: junk },
  );
}

/** Keys of `model`, each absent or not. */
const someOf = <T extends Record<string, fc.Arbitrary<unknown>>>(model: T, requiredKeys: Array<keyof T> = []) =>
  fc.record(model, { requiredKeys: requiredKeys as never[] });

const clusterIP = fc.constantFrom('10.96.0.10', '10.96.0.11', '', 'None', 'fd00::10');
const port = fc.constantFrom(80, 443, 8080, 53);

const servicePort = someOf(
  {
    name: field(fc.constantFrom('', 'http', 'https', 'dns'), ['HTTP', '-x', 'a_b']),
    protocol: field(fc.constantFrom('TCP', 'UDP', 'SCTP'), ['tcp', 'ICMP']),
    port: field(port, [0, 70000, 1.5, '80']),
    targetPort: field(fc.constantFrom(8080, 9090, 'http', 'metrics'), [0, 70000, 'Http', 'a--b', 'toolongportname1']),
    nodePort: field(fc.constantFrom(30080, 30443), [0, 70000]),
    appProtocol: fc.constant('http'),
  },
  ['port'],
);

const labelMap = fc.oneof(
  { weight: 10, arbitrary: fc.dictionary(fc.constantFrom('app', 'tier', 'app.kubernetes.io/name', '9', 'Bad Key', '__proto__', 'constructor', '-x'), field(fc.constantFrom('web', 'db', '', 'a.b_c'), ['bad value', '-x']), { maxKeys: 3 }) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, undefined, [], 'app=web', Object.create({ app: 'web' }), Object.assign(Object.create(null), { app: 'web' }), new (class Labels { app = 'web' })(), { app: 'web', [Symbol('s')]: 'x' }) },
);

const spec = someOf({
  type: field(fc.constantFrom('ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName'), ['clusterip']),
  clusterIP: field(clusterIP, ['10.96.0.256', '127.0.0.1', '10.096.0.1']),
  clusterIPs: field(fc.array(fc.oneof(clusterIP, fc.constantFrom('fd00::11', '10.96.0.12', 'x')), { maxLength: 3 })),
  ipFamilies: field(fc.array(fc.constantFrom('IPv4', 'IPv6', 'ipv4'), { maxLength: 3 })),
  externalIPs: field(fc.array(fc.constantFrom('192.0.2.1', 'fd00::1', '127.0.0.1', 'x'), { maxLength: 2 })),
  loadBalancerSourceRanges: field(fc.array(fc.constantFrom('203.0.113.0/24', ' 10.0.0.0/8 ', 'x'), { maxLength: 2 })),
  healthCheckNodePort: field(fc.constantFrom(30000, 32767), [0, 70000]),
  ports: field(fc.array(servicePort, { maxLength: 3 })),
  sessionAffinity: field(fc.constantFrom('None', 'ClientIP'), ['clientip']),
  sessionAffinityConfig: field(
    someOf({ clientIP: field(someOf({ timeoutSeconds: field(fc.constantFrom(1, 10800, 86400), [0, 86401, 1.5]) })) }),
  ),
  internalTrafficPolicy: field(fc.constantFrom('Cluster', 'Local'), ['local']),
  externalTrafficPolicy: field(fc.constantFrom('Cluster', 'Local'), ['local']),
  selector: labelMap,
  publishNotReadyAddresses: field(fc.boolean(), ['true']),
  ipFamilyPolicy: fc.constant('SingleStack'),
});

const status = field(
  someOf({
    loadBalancer: field(
      someOf({
        ingress: field(
          fc.array(
            someOf({
              ip: field(fc.constantFrom('192.0.2.10', 'fd00::20'), ['192.0.2.300']),
              hostname: field(fc.constantFrom('lb.example.com')),
              ipMode: field(fc.constantFrom('VIP', 'Proxy'), ['vip']),
              ports: fc.constant([{ port: 80 }]),
            }),
            { maxLength: 2 },
          ),
        ),
      }),
    ),
  }),
);

const metadata = field(
  someOf(
    {
      name: field(fc.constantFrom('web', 'db-1', 'a'), ['Web', 'web.x', '']),
      namespace: field(fc.constantFrom('', 'default', 'shop'), ['Shop']),
      labels: fc.oneof(
        fc.constantFrom<unknown>(null, undefined, [], 'x', {}),
        someOf({
          'service.kubernetes.io/service-proxy-name': field(fc.constantFrom('other')),
          'service.kubernetes.io/headless': fc.constantFrom<unknown>('', null, undefined, 1),
          app: fc.constant('web'),
        }),
      ),
      uid: fc.constant('u'),
    },
    ['name'],
  ),
);

/** A value or null, or the key absent (with someOf). */
const orNull = <T>(a: fc.Arbitrary<T>) => fc.oneof({ weight: 4, arbitrary: a }, { weight: 1, arbitrary: fc.constant(null) });

/** A Service that is mostly valid as a whole (the ClusterIPs agree, the ports are told apart), for the fast path's side. */
const coherentBody = fc
  .record({
    name: fc.constantFrom('web', 'db-1'),
    namespace: fc.constantFrom(undefined, 'shop', ''),
    clusterIP: fc.constantFrom('10.96.0.10', '', 'None', undefined),
    listIPs: fc.boolean(),
    ports: fc.array(
      someOf({ protocol: orNull(fc.constantFrom('TCP', 'UDP')), targetPort: orNull(fc.constantFrom(8080, 'http')), nodePort: orNull(fc.constant(30080)) }),
      { maxLength: 3 },
    ),
    rest: someOf({
      type: orNull(fc.constantFrom('ClusterIP', 'NodePort', 'LoadBalancer')),
      selector: orNull(fc.dictionary(fc.constantFrom('app', 'tier', 'app.kubernetes.io/name'), fc.constantFrom('web', '', 'a.b'), { maxKeys: 2 })),
      sessionAffinity: orNull(fc.constantFrom('None', 'ClientIP')),
      sessionAffinityConfig: orNull(someOf({ clientIP: orNull(someOf({ timeoutSeconds: orNull(fc.constant(60)) })) })),
      externalTrafficPolicy: orNull(fc.constantFrom('Cluster', 'Local')),
      externalIPs: orNull(fc.constant(['192.0.2.1'])),
      publishNotReadyAddresses: orNull(fc.boolean()),
    }),
    status: fc.constantFrom<unknown>(undefined, null, {}, { loadBalancer: {} }, { loadBalancer: { ingress: [{ ip: '192.0.2.10' }] } }),
  })
  .map(({ name, namespace, clusterIP, listIPs, ports, rest, status }) => ({
    metadata: { name, ...(namespace !== undefined ? { namespace } : {}) },
    spec: {
      ...(clusterIP !== undefined ? { clusterIP } : {}),
      ...(listIPs && clusterIP ? { clusterIPs: [clusterIP], ipFamilies: clusterIP === 'None' ? [] : ['IPv4'] } : {}),
      ports: ports.map((p, i) => ({ name: ports.length > 1 ? `p${i}` : '', port: 80 + i, ...p })),
      ...rest,
    },
    ...(status !== undefined ? { status } : {}),
  }));

/** A Service's fields after dispatch, anything from the common shape to hostile. */
const serviceBody = fc.oneof(someOf({ metadata, spec: field(spec), status }, ['metadata', 'spec']), coherentBody);

test('whatever the fast path accepts, the schema accepts with the same output, keys included', (t) => {
  let accepted = 0;
  let refused = 0;
  fc.assert(
    fc.property(serviceBody, (raw) => {
      const fast = readCommonService(raw as Record<string, unknown>);
      if (fast === undefined) {
        refused++;
        return true;
      }
      accepted++;
      const schema = k8sServiceSchema.safeParse(raw);
      return schema.success && isDeepStrictEqual(fast, schema.data);
    }),
    { numRuns: 8000, seed: 5151 },
  );
  // Both sides are exercised: the test would prove nothing if the fast path never (or always) answered.
  t.true(accepted > 800, `accepted ${accepted}`);
  t.true(refused > 800, `refused ${refused}`);
});

test('parseObject gives the same result with and without the fast path', (t) => {
  fc.assert(
    fc.property(serviceBody, fc.nat(5), (body, index) => {
      const o = { file: 'in.yaml', index, raw: { apiVersion: 'v1', kind: 'Service', ...body } };
      return isDeepStrictEqual(comparable(parseObject(o)), comparable(parseObject(o, { schemasOnly: true })));
    }),
    { numRuns: 8000, seed: 5152 },
  );
  t.pass();
});

test('the common shape is read without the schema, exactly', (t) => {
  const raw = {
    metadata: { name: 'web', namespace: 'shop', labels: { app: 'web', 'service.kubernetes.io/headless': '' }, uid: 'u' },
    spec: {
      type: 'LoadBalancer',
      clusterIP: '10.96.0.10',
      clusterIPs: ['10.96.0.10'],
      ipFamilies: ['IPv4'],
      ipFamilyPolicy: 'SingleStack',
      ports: [
        { name: 'http', port: 80, targetPort: 'http', nodePort: 30080, protocol: 'TCP' },
        { name: 'dns', port: 53, targetPort: 5353, protocol: 'UDP', nodePort: null },
      ],
      selector: { app: 'web', tier: 'front' },
      sessionAffinity: 'ClientIP',
      sessionAffinityConfig: { clientIP: {} },
      externalTrafficPolicy: 'Local',
      healthCheckNodePort: 32000,
    },
    status: { loadBalancer: { ingress: [{ ip: '192.0.2.10', ports: [] }, { hostname: 'lb.example.com', ipMode: 'Proxy' }] } },
  };
  const fast = readCommonService(raw);
  const expected = {
    metadata: { name: 'web', namespace: 'shop', labels: { 'service.kubernetes.io/headless': '' } },
    spec: {
      type: 'LoadBalancer',
      clusterIP: '10.96.0.10',
      clusterIPs: ['10.96.0.10'],
      ipFamilies: ['IPv4'],
      externalIPs: [],
      loadBalancerSourceRanges: [],
      healthCheckNodePort: 32000,
      ports: [
        { name: 'http', protocol: 'TCP', port: 80, targetPort: 'http', nodePort: 30080 },
        { name: 'dns', protocol: 'UDP', port: 53, targetPort: 5353, nodePort: undefined },
      ],
      sessionAffinity: 'ClientIP',
      sessionAffinityConfig: { clientIP: { timeoutSeconds: 10800 } },
      internalTrafficPolicy: 'Cluster',
      externalTrafficPolicy: 'Local',
      selector: new Map([['app', 'web'], ['tier', 'front']]),
      publishNotReadyAddresses: false,
    },
    status: { loadBalancer: { ingress: [{ ip: '192.0.2.10', ipMode: 'VIP' }, { hostname: 'lb.example.com', ipMode: 'Proxy' }] } },
  };
  t.deepEqual(fast, expected);
  t.true(isDeepStrictEqual(fast, k8sServiceSchema.parse(raw)));
  // Keys the input does not hold stay absent, as in the schema's output.
  t.deepEqual(Object.keys(readCommonService({ metadata: { name: 'a' }, spec: { ports: [{ port: 80 }] } })!), ['metadata', 'spec']);
  t.deepEqual(Object.keys(readCommonService({ metadata: { name: 'a' }, spec: { ports: [{ port: 80 }] } })!.spec.ports[0]!), ['name', 'protocol', 'port']);
});

test('anything unusual or invalid is left to the schema', (t) => {
  const base = { metadata: { name: 'web' }, spec: { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80 }] } };
  t.not(readCommonService(base), undefined);
  const spec = (extra: object) => ({ ...base, spec: { ...base.spec, ...extra } });
  const variants: Array<[string, unknown]> = [
    ['a bad name', { ...base, metadata: { name: 'Web' } }],
    ['a port out of range', spec({ ports: [{ port: 70000 }] })],
    ['protocol tcp', spec({ ports: [{ port: 80, protocol: 'tcp' }] })],
    ['two unnamed ports', spec({ ports: [{ port: 80 }, { port: 81 }] })],
    ['a duplicate port', spec({ ports: [{ name: 'a', port: 80 }, { name: 'b', port: 80 }] })],
    ['clusterIPs[0] not the clusterIP', spec({ clusterIPs: ['10.96.0.11'] })],
    ['a loopback clusterIP', spec({ clusterIP: '127.0.0.1' })],
    ['a selector value with a space', spec({ selector: { app: 'a b' } })],
    ['a timeout of 0', spec({ sessionAffinityConfig: { clientIP: { timeoutSeconds: 0 } } })],
    ['an unknown type', spec({ type: 'Headless' })],
    ['a bad ingress ip', { ...base, status: { loadBalancer: { ingress: [{ ip: '192.0.2.300' }] } } }],
  ];
  for (const [what, raw] of variants) t.is(readCommonService(raw as Record<string, unknown>), undefined, what);
});

test('errors are the schema\'s words with the fast path on', (t) => {
  const r = parseObject({ file: 'in.yaml', index: 0, raw: { apiVersion: 'v1', kind: 'Service', metadata: { name: 'web' }, spec: { ports: [{ port: 80 }, { port: 81 }] } } });
  t.is(r.status === 'error' ? r.error.message : r.status, 'in.yaml: Service default/web: spec.ports[0].name: a name is required when the Service has more than one port (and 1 more problem)');
});
