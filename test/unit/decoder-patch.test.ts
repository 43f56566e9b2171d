/**
 * The Decoder's patch of the last snapshot for a change of endpoint objects
 * alone (decoder.ts patchEndpoints) against a whole build: over random
 * sequences of changes, a Decoder that patches gives exactly what one that
 * always builds whole gives (snapshot, errors, warnings, allocations,
 * notes and changed service ports).
 */
import { deepStrictEqual, strictEqual } from 'node:assert/strict';
import test from 'ava';
import fc from 'fast-check';
import { parseObject } from '../../src/model/parse.ts';
import type { ParsedObject } from '../../src/model/parsed.ts';
import { Decoder, type DecodeResult } from '../../src/sources/decoder.ts';
import { RARE_OBJECTS } from '../support/decoder-objects.ts';

const NAMES = ['a', 'b', 'c'];
const IPS = ['10.244.0.1', '10.244.0.2', '10.244.0.3'];
const IPS6 = ['fd00:244::1', 'fd00:244::2'];

/**
 * Parsed once per group (read as its file) and distinct text, so that an
 * unchanged object is the same reference, as the sources hand it, and the
 * same text in two groups is two objects, as in two files.
 */
const cache = new Map<string, ParsedObject>();
function parsed(raw: object, file = 'f.yaml'): ParsedObject {
  const text = `${file} ${JSON.stringify(raw)}`;
  let o = cache.get(text);
  if (o === undefined) {
    const r = parseObject({ file, index: 0, raw });
    if (r.status !== 'ok') throw new Error(`${text}: ${r.status}`);
    cache.set(text, (o = r.object));
  }
  return o;
}

const portsOf = (names: readonly string[]) => names.map((name) => ({ name, port: name === 'http' ? 8080 : 5353, protocol: name === 'http' ? 'TCP' : 'UDP' }));

/** One object: mostly endpoint objects, with Services (two ports, or one; sometimes a ClusterIP taken by another), a Pod and a Shepherd Service now and then. */
const object: fc.Arbitrary<object> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .record({
        svc: fc.constantFrom(...NAMES, 'gone'),
        suffix: fc.constantFrom('x', 'y'),
        ports: fc.constantFrom(['http'], ['http', 'dns'], ['metrics'], ['dns']),
        ips: fc.subarray(IPS, { minLength: 1 }),
        ready: fc.boolean(),
      })
      .map(({ svc, suffix, ports, ips, ready }) => ({
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        metadata: { name: `${svc}-${suffix}`, namespace: 'default', labels: { 'kubernetes.io/service-name': svc } },
        addressType: 'IPv4',
        ports: portsOf(ports),
        endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready } })),
      })),
  },
  {
    // IPv6 slices, for the IPv6 view of dual-stack and single-stack IPv6 Services.
    weight: 3,
    arbitrary: fc
      .record({ svc: fc.constantFrom(...NAMES, 'v6'), suffix: fc.constantFrom('x6', 'y6'), ports: fc.constantFrom(['http'], ['http', 'dns']), ips: fc.subarray(IPS6, { minLength: 1 }), ready: fc.boolean() })
      .map(({ svc, suffix, ports, ips, ready }) => ({
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        metadata: { name: `${svc}-${suffix}`, namespace: 'default', labels: { 'kubernetes.io/service-name': svc } },
        addressType: 'IPv6',
        ports: portsOf(ports),
        endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready } })),
      })),
  },
  {
    // Dual-stack Services (either primary) and a single-stack IPv6 one.
    weight: 2,
    arbitrary: fc.record({ svc: fc.constantFrom(...NAMES, 'v6'), v4: fc.constantFrom('10.96.0.10', '10.96.0.13', undefined), v6: fc.constantFrom('fd00:96::10', 'fd00:96::11'), two: fc.boolean() }).map(({ svc, v4, v6, two }) => ({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: svc, namespace: 'default' },
      spec: {
        clusterIP: v6,
        clusterIPs: v4 === undefined ? [v6] : [v6, v4],
        ipFamilies: v4 === undefined ? ['IPv6'] : ['IPv6', 'IPv4'],
        ports: two ? [{ name: 'http', port: 80 }, { name: 'dns', port: 53, protocol: 'UDP' }] : [{ name: 'http', port: 80 }],
      },
    })),
  },
  {
    weight: 2,
    arbitrary: fc.record({ svc: fc.constantFrom(...NAMES), ips: fc.subarray(IPS, { minLength: 1 }), ports: fc.constantFrom(['http'], ['dns']) }).map(({ svc, ips, ports }) => ({
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: { name: svc, namespace: 'default' },
      subsets: [{ addresses: ips.map((ip) => ({ ip })), ports: portsOf(ports) }],
    })),
  },
  {
    weight: 2,
    arbitrary: fc.record({ svc: fc.constantFrom(...NAMES), ip: fc.constantFrom('10.96.0.10', '10.96.0.11', '10.96.0.12', '10.96.0.10'), two: fc.boolean() }).map(({ svc, ip, two }) => ({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: svc, namespace: 'default' },
      spec: { clusterIP: ip, ports: two ? [{ name: 'http', port: 80 }, { name: 'dns', port: 53, protocol: 'UDP' }] : [{ name: 'http', port: 80 }] },
    })),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(...RARE_OBJECTS),
  },
);

/** A change: upsert group `group` with these objects (none: remove it). Few groups, so that duplicates across groups happen. */
const change = fc.record({ group: fc.constantFrom('g0', 'g1', 'g2', 'g3', 'g4', 'g5', 'g6', 'g7'), objects: fc.array(object, { maxLength: 2 }) });

const view = (r: DecodeResult) => ({
  services: [...r.snapshot.services],
  ipv6Services: r.snapshot.ipv6Services === undefined ? undefined : [...r.snapshot.ipv6Services],
  node: r.snapshot.node,
  errors: r.errors.map(String),
  warnings: r.warnings.map(String),
  allocations: r.allocations,
  notes: r.notes,
  changed: r.changed === undefined ? undefined : [...r.changed].sort(),
});

for (const shared of [false, true]) {
  // Shared: the same text in two groups is the same object, as a source that reuses one parse result for equal texts hands it (Shepherd's does).
  test(`patching the last snapshot for endpoint changes gives what a whole build gives${shared ? ', with objects shared between groups' : ''}`, (t) => {
    let patches = 0;
    fc.assert(
      fc.property(fc.array(change, { minLength: 1, maxLength: 25 }), (changes) => {
        const patching = new Decoder({ serviceCIDR: '10.96.0.0/12' });
        const whole = new Decoder({ serviceCIDR: '10.96.0.0/12', patch: false });
        for (const { group, objects } of changes) {
          const c = objects.length > 0 ? { upsert: [[group, objects.map((o) => parsed(o, shared ? 'f.yaml' : `${group}.yaml`))] as const], remove: [] } : { upsert: [], remove: [group] };
          const a = patching.apply(c);
          const b = whole.apply(c);
          deepStrictEqual(view(a), view(b));
        }
        strictEqual(whole.patches, 0);
        patches += patching.patches;
      }),
      { numRuns: 300, seed: 42 },
    );
    t.true(patches > 300, `only ${patches} applies were patched`);
  });
}

test('a changed slice of one Service among many patches the snapshot: the other service ports are the very objects of the last one', (t) => {
  const decoder = new Decoder({ serviceCIDR: '10.96.0.0/12' });
  const upsert: Array<[string, ParsedObject[]]> = [];
  const slice = (i: number, ip: string) =>
    parsed({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: `s${i}-1`, namespace: 'default', labels: { 'kubernetes.io/service-name': `s${i}` } },
      addressType: 'IPv4',
      ports: [{ name: 'http', port: 8080 }],
      endpoints: [{ addresses: [ip] }],
    });
  for (let i = 0; i < 50; i++) {
    upsert.push([`svc-${i}`, [parsed({ apiVersion: 'v1', kind: 'Service', metadata: { name: `s${i}`, namespace: 'default' }, spec: { clusterIP: `10.96.1.${i}`, ports: [{ name: 'http', port: 80 }] } })]]);
    upsert.push([`slice-${i}`, [slice(i, '10.244.1.1')]]);
  }
  const first = decoder.apply({ upsert, remove: [] });
  const next = decoder.apply({ upsert: [['slice-7', [slice(7, '10.244.1.2')]]], remove: [] });
  t.is(decoder.patches, 1);
  t.deepEqual(next.changed, new Set(['default/s7:http']));
  t.deepEqual(next.snapshot.services.get('default/s7:http')?.endpoints.map((e) => e.ip), ['10.244.1.2']);
  for (const [key, sp] of first.snapshot.services) if (key !== 'default/s7:http') t.is(next.snapshot.services.get(key), sp);
  t.deepEqual([...next.snapshot.services.keys()], [...first.snapshot.services.keys()]);
});

test('endpoint-port warnings come in Service key order, whichever Services are incumbents', (t) => {
  const slice = (name: string, svc: string) => ({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': svc } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080 }, { name: 'dns', port: 5353, protocol: 'UDP' }],
    endpoints: [{ addresses: ['10.244.0.2'] }],
  });
  const service = (name: string, ip: string) => ({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default' }, spec: { clusterIP: ip, ports: [{ name: 'http', port: 80 }] } });
  const patching = new Decoder({ serviceCIDR: '10.96.0.0/12' });
  const whole = new Decoder({ serviceCIDR: '10.96.0.0/12', patch: false });
  const steps: Array<[string, object[]]> = [
    ['g5', [slice('s-x', 'c'), service('c', '10.96.0.10')]],
    ['g1', [slice('s-y', 'a')]],
    ['g0', [service('a', '10.96.0.12')]], // a is new, c an incumbent
    ['g4', []],
  ];
  let last: DecodeResult | undefined;
  for (const [group, objects] of steps) {
    const c = objects.length > 0 ? { upsert: [[group, objects.map((o) => parsed(o, `${group}.yaml`))] as const], remove: [] } : { upsert: [], remove: [group] };
    last = patching.apply(c);
    t.deepEqual(view(last), view(whole.apply(c)), group);
  }
  t.deepEqual(
    last!.warnings.map((w) => w.object),
    ['default/s-y', 'default/s-x'],
  );
});

test('an endpoint change of a dual-stack or a single-stack IPv6 Service patches the snapshot: each family view gets its own endpoints', (t) => {
  const decoder = new Decoder({ serviceCIDR: '10.96.0.0/12' });
  const svc = (name: string, clusterIPs: string[]) =>
    parsed({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default' }, spec: { clusterIP: clusterIPs[0], clusterIPs, ports: [{ name: 'http', port: 80 }] } });
  const slice = (svcName: string, name: string, addressType: string, ip: string) =>
    parsed({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': svcName } },
      addressType,
      ports: [{ name: 'http', port: 8080 }],
      endpoints: [{ addresses: [ip] }],
    });
  decoder.apply({
    upsert: [
      ['svc', [svc('dual', ['10.96.0.10', 'fd00:96::10']), svc('v6', ['fd00:96::20'])]],
      ['v4', [slice('dual', 'dual-4', 'IPv4', '10.244.0.1')]],
      ['v6', [slice('dual', 'dual-6', 'IPv6', 'fd00:244::1'), slice('v6', 'v6-1', 'IPv6', 'fd00:244::3')]],
    ],
    remove: [],
  });
  const before = decoder.patches;
  const r = decoder.apply({ upsert: [['v6', [slice('dual', 'dual-6', 'IPv6', 'fd00:244::2'), slice('v6', 'v6-1', 'IPv6', 'fd00:244::4')]]], remove: [] });
  t.is(decoder.patches, before + 1);
  t.deepEqual([...r.changed!].sort(), ['default/dual:http', 'default/v6:http']);
  const ips = (m: ReadonlyMap<string, { endpoints: ReadonlyArray<{ ip: string }> }> | undefined, key: string) => m?.get(key)?.endpoints.map((e) => e.ip);
  t.deepEqual(ips(r.snapshot.services, 'default/dual:http'), ['10.244.0.1']);
  t.deepEqual(ips(r.snapshot.ipv6Services, 'default/dual:http'), ['fd00:244::2']);
  t.deepEqual(ips(r.snapshot.ipv6Services, 'default/v6:http'), ['fd00:244::4']);
  t.false(r.snapshot.services.has('default/v6:http'));
});
