import test from 'ava';
import { readFileSync } from 'node:fs';
import { buildSnapshot } from '../../src/model/normalise.ts';
import { parseObject } from '../../src/model/parse.ts';
import type { ParsedObject } from '../../src/model/parsed.ts';
import type { Endpoint } from '../../src/model/types.ts';

/** One case of test/fixtures/pods/endpointslice-controller.json (its "about" describes the format). */
interface Case {
  readonly name: string;
  readonly reference: string;
  readonly objects: readonly unknown[];
  readonly endpoints: Readonly<Record<string, readonly string[]>>;
  readonly errors?: readonly string[];
  readonly warnings?: readonly string[];
  readonly notes?: readonly string[];
}

const CASES: readonly Case[] = JSON.parse(readFileSync('test/fixtures/pods/endpointslice-controller.json', 'utf8')).cases;

/** An endpoint as the table writes it: "ip:port ready serving terminating node=… zone=… pod=…". */
function show(e: Endpoint): string {
  const flags = [e.ready && 'ready', e.serving && 'serving', e.terminating && 'terminating'].filter(Boolean);
  const attrs = [e.nodeName && `node=${e.nodeName}`, e.zone && `zone=${e.zone}`, e.pod && `pod=${e.pod}`].filter(Boolean);
  return [`${e.ip}:${e.port}`, ...flags, ...attrs].join(' ');
}

test('the table covers what the issue lists', (t) => {
  t.true(CASES.length >= 20);
  t.is(new Set(CASES.map((c) => c.name)).size, CASES.length);
  for (const c of CASES) t.not(c.reference, '');
});

for (const c of CASES) {
  test(`Pods → endpoints: ${c.name}`, (t) => {
    const objects: ParsedObject[] = [];
    const errors: string[] = [];
    const warnings: string[] = [];
    c.objects.forEach((raw, index) => {
      const r = parseObject({ file: 'case.yaml', index, raw });
      if (r.status === 'ok') {
        objects.push(r.object);
        warnings.push(...r.warnings.map(String));
      } else if (r.status === 'error') errors.push(r.error.message);
      else t.fail(`object #${index + 1} ignored: ${r.reason}`);
    });
    const built = buildSnapshot(objects, { serviceCIDR: '10.96.0.0/12' });
    errors.push(...built.errors.map(String));
    warnings.push(...built.warnings.map(String));
    const got = Object.fromEntries([...built.snapshot.services.values()].map((sp) => [sp.key, sp.endpoints.map(show)]));
    t.deepEqual(got, c.endpoints);
    t.deepEqual(errors, c.errors ?? [], 'errors');
    t.deepEqual(warnings, c.warnings ?? [], 'warnings');
    t.deepEqual(built.notes, c.notes ?? [], 'notes');
  });
}
