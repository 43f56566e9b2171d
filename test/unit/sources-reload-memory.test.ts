/**
 * A large source reloaded many times in a row keeps its memory: nothing read
 * at one load (raw objects, validation results of objects that are gone)
 * outlives the next. A smaller shape of scripts/source-scale.ts, which
 * measures the RSS of 10,000 Services reloaded 100 times.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import test from 'ava';
import { FileSource } from '../../src/sources/file.ts';
import { silentLogger } from '../../src/util/log.ts';

const SERVICES = 200;
const ENDPOINTS = 10;

/** A List of SERVICES Services with one EndpointSlice each; `shift` moves every endpoint address, so every slice's text changes. */
function list(shift: number): string {
  const items: object[] = [];
  for (let i = 0; i < SERVICES; i++) {
    const name = `svc-${i}`;
    items.push({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'bench' }, spec: { clusterIP: `10.96.${i >> 8}.${i & 255}`, ports: [{ name: 'http', port: 80 }] } });
    const endpoints = Array.from({ length: ENDPOINTS }, (_, e) => {
      const k = (i * ENDPOINTS + e + shift) % 60_000;
      return { addresses: [`10.244.${k >> 8}.${(k & 255) + 0}`], conditions: { ready: true } };
    });
    items.push({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: `${name}-x`, namespace: 'bench', labels: { 'kubernetes.io/service-name': name } },
      addressType: 'IPv4',
      ports: [{ name: 'http', port: 8080 }],
      endpoints,
    });
  }
  return JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
}

/** Heap in use after a full garbage collection, bytes. */
function heapAfterGC(): number {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
  return process.memoryUsage().heapUsed;
}

test('100 reloads of a List whose every slice changes each time: the heap stays within 10 %, and each reload reports every slice', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-reload-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'list.json');
  const src = new FileSource(file, { serviceCIDR: '10.96.0.0/12', logger: silentLogger() });
  let tenth = 0;
  let largest = 0;
  for (let n = 0; n <= 100; n++) {
    await writeFile(file, list(n));
    const r = await src.load();
    t.is(r.snapshot.services.size, SERVICES);
    t.deepEqual(r.errors, []);
    if (n > 0) t.is(r.changed?.size, SERVICES, `reload ${n}`);
    t.is(r.snapshot.services.get('bench/svc-7:http')?.endpoints.length, ENDPOINTS);
    if (n === 10) tenth = heapAfterGC();
    if (n > 10 && n % 10 === 0) largest = Math.max(largest, heapAfterGC());
  }
  t.log(`heap after the 10th reload ${(tenth / 1e6).toFixed(1)} MB, largest after ${(largest / 1e6).toFixed(1)} MB`);
  t.true(largest <= tenth * 1.1, `heap grew from ${tenth} to ${largest} bytes`);
});
