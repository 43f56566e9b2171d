/**
 * The Decoder's patch of the last snapshot for a change of Services alone
 * (decoder.ts patchServices) against a whole build: over random sequences
 * of Services and endpoint objects added, replaced and removed, one group
 * per object as the Kubernetes source makes them (and now and then a group
 * of several), with ClusterIPs, NodePorts and external IPs that clash,
 * NodePorts out of range, creation times, dual-stack, headless and
 * Shepherd Services and a Pod, a Decoder that patches gives exactly what
 * one that always builds whole gives: snapshot, errors, warnings,
 * refusals, allocations, notes, changed service ports and new refusals.
 */
import { deepStrictEqual, strictEqual } from 'node:assert/strict';
import test from 'ava';
import fc from 'fast-check';
import { parseObject } from '../../src/model/parse.ts';
import type { ParsedObject } from '../../src/model/parsed.ts';
import { Decoder, type DecodeResult, type DecoderChanges } from '../../src/sources/decoder.ts';
import { RARE_OBJECTS } from '../support/decoder-objects.ts';

const NAMES = ['a', 'b', 'c', 'd'];

/** Parsed once per distinct text, so that an unchanged object is the same reference, as the sources hand it. */
const cache = new Map<string, ParsedObject>();
function parsed(raw: object): ParsedObject {
  const text = JSON.stringify(raw);
  let o = cache.get(text);
  if (o === undefined) {
    const r = parseObject({ file: '<kubernetes>', index: 0, raw });
    if (r.status !== 'ok') throw new Error(`${text}: ${r.status}`);
    cache.set(text, (o = r.object));
  }
  return o;
}

const service = fc
  .record({
    name: fc.constantFrom(...NAMES),
    ip: fc.constantFrom('10.96.0.10', '10.96.0.11', '10.96.0.12', '10.96.0.13', '10.96.0.14'),
    v6: fc.constantFrom(undefined, undefined, 'fd00:96::10', 'fd00:96::11'),
    two: fc.boolean(),
    nodePort: fc.constantFrom(undefined, undefined, 30080, 30081, 80),
    externalIP: fc.constantFrom(undefined, undefined, undefined, '10.96.0.10', '192.0.2.1'),
    created: fc.constantFrom(undefined, '2026-01-01T00:00:00Z', '2026-01-02T00:00:00Z'),
    headless: fc.constantFrom(false, false, false, false, true),
  })
  .map(({ name, ip, v6, two, nodePort, externalIP, created, headless }) => ({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: 'default', ...(created !== undefined ? { creationTimestamp: created } : {}) },
    spec: {
      ...(headless ? { clusterIP: 'None' } : { clusterIP: ip, ...(v6 !== undefined ? { clusterIPs: [ip, v6], ipFamilies: ['IPv4', 'IPv6'] } : {}) }),
      ...(nodePort !== undefined && !headless ? { type: 'NodePort' } : {}),
      ...(externalIP !== undefined ? { externalIPs: [externalIP] } : {}),
      ports: [
        { name: 'http', port: 80, ...(nodePort !== undefined && !headless ? { nodePort } : {}) },
        ...(two ? [{ name: 'dns', port: 53, protocol: 'UDP' }] : []),
      ],
    },
  }));

const slice = fc
  .record({ svc: fc.constantFrom(...NAMES, 'e'), suffix: fc.constantFrom('x', 'y'), v6: fc.boolean(), ports: fc.constantFrom(['http'], ['http', 'dns'], ['metrics']), ip: fc.constantFrom(1, 2, 3) })
  .map(({ svc, suffix, v6, ports, ip }) => ({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `${svc}-${suffix}${v6 ? '6' : ''}`, namespace: 'default', labels: { 'kubernetes.io/service-name': svc } },
    addressType: v6 ? 'IPv6' : 'IPv4',
    ports: ports.map((name) => ({ name, port: name === 'dns' ? 5353 : 8080, protocol: name === 'dns' ? 'UDP' : 'TCP' })),
    endpoints: [{ addresses: [v6 ? `fd00:244::${ip}` : `10.244.0.${ip}`] }],
  }));

const endpoints = fc.record({ svc: fc.constantFrom(...NAMES, 'e'), ip: fc.constantFrom(1, 2) }).map(({ svc, ip }) => ({
  apiVersion: 'v1',
  kind: 'Endpoints',
  metadata: { name: svc, namespace: 'default' },
  subsets: [{ addresses: [{ ip: `10.244.1.${ip}` }], ports: [{ name: 'http', port: 8080 }] }],
}));

const rare = fc.constantFrom(...RARE_OBJECTS);

/** A Shepherd Service with its own address, whose EndpointSlices are ignored (with a warning that goes with the missing Services' ones). */
const shepherd = fc.constant({ kind: 'Service', metadata: { name: 'e', namespace: 'default' }, spec: { ports: [{ name: 'http', port: 80, target_port: 8080 }] }, status: { cluster_ip: '10.96.0.50', endpoints: ['10.244.0.1:8080'] } });

const object: fc.Arbitrary<object> = fc.oneof({ weight: 8, arbitrary: service }, { weight: 5, arbitrary: slice }, { weight: 1, arbitrary: endpoints }, { weight: 1, arbitrary: rare }, { weight: 1, arbitrary: shepherd });

/** One change: an object upserted in its own group (the Kubernetes source's), that group removed, or a group of two objects (two copies of an identity may meet). */
const change = fc.oneof(
  { weight: 8, arbitrary: object.map((o) => ({ kind: 'own' as const, o })) },
  { weight: 4, arbitrary: object.map((o) => ({ kind: 'remove' as const, o })) },
  { weight: 2, arbitrary: fc.record({ group: fc.constantFrom('g0', 'g1', 'z'), objects: fc.array(fc.oneof(slice, endpoints, object), { maxLength: 3 }) }).map((g) => ({ kind: 'group' as const, ...g })) },
);

const view = (r: DecodeResult) => ({
  services: [...r.snapshot.services],
  ipv6Services: r.snapshot.ipv6Services === undefined ? undefined : [...r.snapshot.ipv6Services],
  node: r.snapshot.node,
  dnsOnly: r.snapshot.dnsOnly === undefined ? undefined : [...r.snapshot.dnsOnly],
  errors: r.errors.map(String),
  warnings: r.warnings.map(String),
  refusals: r.refusals.map(String),
  allocations: r.allocations,
  notes: r.notes,
  changed: r.changed === undefined ? undefined : [...r.changed].sort(),
  newRefusals: r.newRefusals.map(String),
});

test('patching the last snapshot for Service changes gives what a whole build gives', (t) => {
  let servicePatches = 0;
  fc.assert(
    fc.property(fc.array(change, { minLength: 1, maxLength: 30 }), (changes) => {
      const patching = new Decoder({ serviceCIDR: '10.96.0.0/12' });
      const whole = new Decoder({ serviceCIDR: '10.96.0.0/12', patch: false });
      for (const c of changes) {
        let d: DecoderChanges;
        if (c.kind === 'group') d = c.objects.length > 0 ? { upsert: [[c.group, c.objects.map(parsed)]], remove: [] } : { upsert: [], remove: [c.group] };
        else {
          const o = parsed(c.o);
          d = c.kind === 'own' ? { upsert: [[o.identity, [o]]], remove: [] } : { upsert: [], remove: [o.identity] };
        }
        const before = patching.patches;
        deepStrictEqual(view(patching.apply(d)), view(whole.apply(d)));
        if (patching.patches > before && c.kind !== 'group' && parsed(c.o).kind === 'Service') servicePatches++;
      }
      strictEqual(whole.patches, 0);
    }),
    { numRuns: 400, seed: 11 },
  );
  t.true(servicePatches > 300, `only ${servicePatches} Service changes were patched`);
});

test('a Service removed patches the snapshot, its endpoint objects warned about among the others whose Service is missing, in the order a whole build gives', (t) => {
  const svc = (name: string, ip: string) => parsed({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default' }, spec: { clusterIP: ip, ports: [{ name: 'http', port: 80 }] } });
  const slice = (name: string, svcName: string) =>
    parsed({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': svcName } },
      addressType: 'IPv4',
      ports: [{ name: 'http', port: 8080 }],
      endpoints: [{ addresses: ['10.244.0.1'] }],
    });
  const legacy = parsed({ apiVersion: 'v1', kind: 'Endpoints', metadata: { name: 'x', namespace: 'default' }, subsets: [{ addresses: [{ ip: '10.244.0.2' }], ports: [{ name: 'http', port: 8080 }] }] });
  const shepherd = parsed({ kind: 'Service', metadata: { name: 'e', namespace: 'default' }, spec: { ports: [{ name: 'http', port: 80, target_port: 8080 }] }, status: { cluster_ip: '10.96.0.50', endpoints: ['10.244.0.1:8080'] } });
  const own = (...objects: ParsedObject[]): DecoderChanges => ({ upsert: objects.map((o) => [o.identity, [o]] as const), remove: [] });
  const steps: DecoderChanges[] = [
    {
      upsert: [
        ['a-file', [legacy, slice('b-x', 'b')]],
        ['z', [slice('c-x', 'c'), slice('a-x', 'a')]],
      ],
      remove: [],
    },
    own(shepherd, slice('e-x', 'e'), svc('a', '10.96.0.10'), svc('b', '10.96.0.11'), svc('c', '10.96.0.12')),
    { upsert: [], remove: ['Service/default/a'] },
    { upsert: [], remove: ['Service/default/c'] },
    own(svc('c', '10.96.0.12')),
  ];
  const patching = new Decoder({ serviceCIDR: '10.96.0.0/12' });
  const whole = new Decoder({ serviceCIDR: '10.96.0.0/12', patch: false });
  let last: DecodeResult | undefined;
  for (const step of steps) {
    last = patching.apply(step);
    t.deepEqual(view(last), view(whole.apply(step)));
  }
  t.is(patching.patches, 3);
  t.deepEqual(
    last!.warnings.map((w) => w.object),
    ['default/e-x', 'default/a-x', 'default/x'],
  );
});
