/**
 * The Services only DNS serves (Snapshot.dnsOnly): headless and ExternalName
 * Services, from the objects a file or the Kubernetes API gives, kept apart
 * from the service ports every mode programs.
 */
import test from 'ava';
import { BuildMemo, buildSnapshot } from '../../src/model/normalise.ts';
import type { ParsedObject } from '../../src/model/parsed.ts';
import type { ParseResult } from '../../src/model/parse.ts';
import { parse, renderAll } from './model-helpers.ts';

const service = (name: string, spec: Record<string, unknown>) => ({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default' }, spec });
const slice = (name: string, svc: string, endpoints: unknown[], ports: unknown[] = [{ name: 'pg', port: 5432 }]) => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': svc, 'service.kubernetes.io/headless': '' } },
  addressType: 'IPv4',
  endpoints,
  ports,
});
const pod = (name: string, ip: string, ready: boolean, dns: { hostname?: unknown; subdomain?: unknown } = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'default', labels: { app: 'cache' } },
  spec: { ...dns, containers: [{ name: 'c', ports: [{ name: 'redis', containerPort: 6379 }] }] },
  status: { podIP: ip, conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
});

/** The parsed objects of `raws` and every parse warning, as text. */
function parsed(raws: unknown[]): { objects: ParsedObject[]; warnings: string[] } {
  const results: ParseResult[] = raws.map((raw, i) => parse(raw, i));
  return {
    objects: results.flatMap((r) => (r.status === 'ok' ? [r.object] : [])),
    warnings: results.flatMap((r) => (r.status === 'ok' ? r.warnings.map(String) : r.status === 'error' ? [r.error.message] : [])),
  };
}

const DB_OBJECTS = [
  service('db', { clusterIP: 'None', ports: [{ name: 'pg', port: 5432 }] }),
  slice('db-1', 'db', [
    { addresses: ['10.244.1.2'], hostname: 'db-0', conditions: { ready: true } },
    { addresses: ['10.244.1.3'] },
    { addresses: ['10.244.1.4'], hostname: 'db-2', conditions: { ready: false } },
  ]),
  service('docs', { type: 'ExternalName', externalName: 'Docs.Example.com.', ports: [{ port: 443 }] }),
  service('web', { clusterIP: '10.96.0.10', ports: [{ port: 80 }] }),
];

test('headless and ExternalName Services are carried for DNS only: the service ports are those of the proxied Services alone', (t) => {
  const { objects, warnings } = parsed(DB_OBJECTS);
  t.deepEqual(warnings, []);
  const { snapshot, errors } = buildSnapshot(objects, { serviceCIDR: '10.96.0.0/12' });
  t.deepEqual(errors, []);
  t.deepEqual(renderAll(snapshot), ['default/web 10.96.0.10:80/TCP ->']);
  t.deepEqual([...snapshot.dnsOnly!.keys()], ['default/db', 'default/docs']);
  t.deepEqual(snapshot.dnsOnly!.get('default/docs'), { kind: 'externalName', namespace: 'default', name: 'docs', externalName: 'docs.example.com' });
  const db = snapshot.dnsOnly!.get('default/db');
  if (db?.kind !== 'headless') return t.fail('db is not headless');
  t.deepEqual(
    db.groups.map((g) => [g.ports, g.addresses.map((a) => [a.ip, a.ready]), g.hostnames]),
    [[[{ name: 'pg', port: 5432, protocol: 'TCP' }], [['10.244.1.2', true], ['10.244.1.3', true], ['10.244.1.4', false]], new Map([['10.244.1.2', 'db-0'], ['10.244.1.4', 'db-2']])]],
  );
});

test('a snapshot without such Services has no dnsOnly part; an unchanged one keeps its object from build to build', (t) => {
  const plain = parsed([service('web', { clusterIP: '10.96.0.10', ports: [{ port: 80 }] })]).objects;
  t.false('dnsOnly' in buildSnapshot(plain, { serviceCIDR: '10.96.0.0/12' }).snapshot);
  const { objects } = parsed(DB_OBJECTS);
  const memo = new BuildMemo();
  const first = buildSnapshot(objects, { serviceCIDR: '10.96.0.0/12', memo }).snapshot;
  const again = buildSnapshot(objects, { serviceCIDR: '10.96.0.0/12', memo, previous: first }).snapshot;
  t.is(again.dnsOnly!.get('default/db'), first.dnsOnly!.get('default/db'));
  t.is(again.dnsOnly!.get('default/docs'), first.dnsOnly!.get('default/docs'));
  // A new slice object: a new DNS-only Service.
  const changed = parsed([...DB_OBJECTS.slice(0, 1), slice('db-1', 'db', [{ addresses: ['10.244.1.9'] }]), ...DB_OBJECTS.slice(2)]).objects;
  t.not(buildSnapshot(changed, { serviceCIDR: '10.96.0.0/12', memo, previous: again }).snapshot.dnsOnly!.get('default/db'), first.dnsOnly!.get('default/db'));
});

test('a headless Service with a selector takes its endpoints from the Pods: ready, and named by spec.hostname when spec.subdomain is the Service', (t) => {
  const { objects, warnings } = parsed([
    service('cache', { clusterIP: 'None', selector: { app: 'cache' }, ports: [{ name: 'redis', port: 6379, targetPort: 'redis' }] }),
    pod('cache-0', '10.244.3.2', true, { hostname: 'cache-0', subdomain: 'cache' }),
    pod('cache-1', '10.244.3.3', false, { hostname: 'cache-1', subdomain: 'cache' }),
    pod('cache-2', '10.244.3.4', true, { hostname: 'cache-2', subdomain: 'other' }),
    pod('cache-3', '10.244.3.5', true, { hostname: 'Cache_3', subdomain: 'cache' }),
  ]);
  t.deepEqual(warnings, [
    'in.yaml: Pod default/cache-3: spec.hostname: "Cache_3" is not a valid DNS-1123 label (lower-case alphanumerics and \'-\', alphanumeric at both ends, at most 63 characters); hostname ignored (DNS names the endpoint by its address)',
  ]);
  const { snapshot } = buildSnapshot(objects, { serviceCIDR: '10.96.0.0/12' });
  t.deepEqual(renderAll(snapshot), []);
  const cache = snapshot.dnsOnly!.get('default/cache');
  if (cache?.kind !== 'headless') return t.fail('cache is not headless');
  t.deepEqual(
    cache.groups.map((g) => [g.ports.map((p) => `${p.name}:${p.port}`), g.addresses.map((a) => [a.ip, a.ready]), g.hostnames]),
    [
      [['redis:6379'], [['10.244.3.2', true]], new Map([['10.244.3.2', 'cache-0']])],
      [['redis:6379'], [['10.244.3.3', false]], new Map([['10.244.3.3', 'cache-1']])],
      [['redis:6379'], [['10.244.3.4', true]], undefined],
      [['redis:6379'], [['10.244.3.5', true]], undefined],
    ],
  );
});

test('bad input: a bad externalName or hostname is one warning naming file, object and field; only DNS loses it', (t) => {
  const { objects, warnings } = parsed([
    service('bad', { type: 'ExternalName', externalName: 'not a name', ports: [] }),
    service('none', { type: 'ExternalName' }),
    service('db', { clusterIP: 'None', ports: [{ name: 'pg', port: 5432 }] }),
    slice('db-1', 'db', [{ addresses: ['10.244.1.2'], hostname: 'Bad_Host' }, { addresses: ['10.244.1.3'], hostname: 7 }]),
  ]);
  t.deepEqual(warnings, [
    'in.yaml: Service default/bad: spec.externalName: "not a name" is not a valid DNS-1123 subdomain (dot-separated DNS-1123 labels, at most 253 characters); the Service gets no DNS name',
    'in.yaml: Service default/none: spec.externalName: required for a Service of type ExternalName; the Service gets no DNS name',
    'in.yaml: EndpointSlice default/db-1: endpoints[0].hostname: "Bad_Host" is not a valid DNS-1123 label (lower-case alphanumerics and \'-\', alphanumeric at both ends, at most 63 characters); hostname ignored (DNS names the endpoint by its address)',
    'in.yaml: EndpointSlice default/db-1: endpoints[1].hostname: expected a string; hostname ignored (DNS names the endpoint by its address)',
  ]);
  t.is(objects.length, 4);
  const { snapshot, errors } = buildSnapshot(objects, { serviceCIDR: '10.96.0.0/12' });
  t.deepEqual(errors, []);
  t.deepEqual([...snapshot.dnsOnly!.keys()], ['default/db']);
  const db = snapshot.dnsOnly!.get('default/db');
  t.is(db?.kind === 'headless' ? db.groups[0]!.hostnames : 'not headless', undefined);
});
