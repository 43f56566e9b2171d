/**
 * What one change costs the Decoder (src/sources/decoder.ts) alone at
 * scale, as the Kubernetes source hands changes to it (one group per
 * object, keyed "Kind/namespace/name"; Services with their ClusterIP
 * given, each with one EndpointSlice):
 *
 *   npx tsx scripts/decoder-cost.ts [--services 10000] [--endpoints 10] [--rounds 20] [--whole]
 *
 * After one apply of every object and a few warm-up rounds, it times
 * ROUNDS of each change (median, min and max of `Decoder.apply`, ms):
 * a Service added (its EndpointSlice applied just before, untimed), that
 * Service removed again, and an EndpointSlice of an existing Service
 * changed. It also says how many of the timed applies patched the last
 * snapshot instead of building a whole one; with --whole the Decoder
 * never patches (the cost of a whole build). Prints a table.
 */
import { performance } from 'node:perf_hooks';
import { parseObject } from '../src/model/parse.ts';
import type { ParsedObject } from '../src/model/parsed.ts';
import { Decoder, type DecoderChanges } from '../src/sources/decoder.ts';
import { syntheticSlice } from './synthetic-slice.ts';

/** The value of `--name` on the command line, or `fallback`. */
function flag(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  const value = at >= 0 ? Number(process.argv[at + 1]) : fallback;
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} wants a positive whole number`);
  return value;
}

const services = flag('services', 10_000);
const endpoints = flag('endpoints', 10);
const rounds = flag('rounds', 20);
const WARM_UP = 3;
/** --whole: a Decoder that always builds the whole Snapshot. */
const whole = process.argv.includes('--whole');
/** The file name the Kubernetes source gives its objects (KUBERNETES_ORIGIN). */
const ORIGIN = '<kubernetes>';

/** A parsed object, as the Kubernetes source hands it; throws when `raw` is not valid. */
function parsed(raw: object): ParsedObject {
  const r = parseObject({ file: ORIGIN, index: 0, raw });
  if (r.status !== 'ok') throw new Error(`object not valid: ${JSON.stringify(raw)}`);
  return r.object;
}

/** Namespace and name of Service `i`. */
const nameOf = (i: number) => ({ namespace: `ns-${i % 50}`, name: `svc-${i}` });

/** Service `i`, with a ClusterIP of its own (10.96.0.0/12 holds a million). */
function service(i: number): ParsedObject {
  const { namespace, name } = nameOf(i);
  const created = new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString().replace('.000Z', 'Z');
  return parsed({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace, creationTimestamp: created },
    spec: { clusterIP: `10.${96 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`, ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }] },
  });
}

/** The EndpointSlice of Service `i`; `edit` (if not 0) moves its first endpoint. */
function slice(i: number, edit = 0): ParsedObject {
  const { namespace, name } = nameOf(i);
  return parsed(syntheticSlice(namespace, name, i, endpoints, edit));
}

/** The group key the Kubernetes source gives `o`. */
const keyOf = (o: ParsedObject) => o.identity;

const upsert = (...objects: ParsedObject[]): DecoderChanges => ({ upsert: objects.map((o) => [keyOf(o), [o]] as const), remove: [] });
const remove = (...objects: ParsedObject[]): DecoderChanges => ({ upsert: [], remove: objects.map(keyOf) });

const decoder = new Decoder({ serviceCIDR: '10.96.0.0/12', nodeName: 'node-a', ...(whole ? { patch: false } : {}) });
const all: ParsedObject[] = [];
for (let i = 0; i < services; i++) all.push(service(i), slice(i));
let t0 = performance.now();
decoder.apply(upsert(...all));
const firstApply = performance.now() - t0;

/** Wall time of one apply, ms, and whether it patched. */
function timed(c: DecoderChanges): { ms: number; patched: boolean } {
  const patches = decoder.patches;
  t0 = performance.now();
  decoder.apply(c);
  return { ms: performance.now() - t0, patched: decoder.patches > patches };
}

const rows = { 'Service added': [] as number[], 'Service removed': [] as number[], 'EndpointSlice changed': [] as number[] };
const patchedCount = { 'Service added': 0, 'Service removed': 0, 'EndpointSlice changed': 0 };
for (let r = 0; r < WARM_UP + rounds; r++) {
  const i = services + r;
  const svc = service(i);
  const sl = slice(i);
  decoder.apply(upsert(sl));
  const add = timed(upsert(svc));
  const del = timed(remove(svc));
  decoder.apply(remove(sl));
  const edited = (r * 7919) % services;
  const change = timed(upsert(slice(edited, r + 1)));
  if (r < WARM_UP) continue;
  for (const [row, t] of [['Service added', add], ['Service removed', del], ['EndpointSlice changed', change]] as const) {
    rows[row].push(t.ms);
    if (t.patched) patchedCount[row]++;
  }
}

const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
const ms = (x: number) => x.toFixed(1);
console.log(`Decoder.apply${whole ? ' (whole builds only)' : ''} at ${services} Services x ${endpoints} endpoints (first apply ${Math.round(firstApply)} ms), ${rounds} rounds after ${WARM_UP} warm-up`);
console.log(`loadavg ${(await import('node:fs')).readFileSync('/proc/loadavg', 'utf8').trim()}`);
console.log('| change | median ms | min ms | max ms | patched |');
console.log('|---|---:|---:|---:|---:|');
for (const [row, xs] of Object.entries(rows)) {
  const s = sorted(xs);
  console.log(`| ${row} | ${ms(s[Math.floor(s.length / 2)]!)} | ${ms(s[0]!)} | ${ms(s[s.length - 1]!)} | ${patchedCount[row as keyof typeof patchedCount]}/${rounds} |`);
}
