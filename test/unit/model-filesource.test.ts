import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { FileSource } from '../../src/sources/file.ts';
import { silentLogger } from '../../src/util/log.ts';
import { recordingLogger, renderAll } from './model-helpers.ts';

async function tempDir(t: { teardown: (fn: () => Promise<void>) => void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-filesource-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const svc = (name: string, ip: string, port: number) =>
  `apiVersion: v1\nkind: Service\nmetadata: {name: ${name}, namespace: default}\nspec:\n  clusterIP: ${ip}\n  ports: [{name: http, port: ${port}}]\n`;

test('an object made invalid keeps its last valid version; the others follow their files', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'svc.yaml');
  await writeFile(file, `${svc('web', '10.96.0.10', 80)}---\n${svc('api', '10.96.0.11', 80)}`);
  const src = new FileSource(dir, { serviceCIDR: '10.96.0.0/12', logger: silentLogger() });
  t.deepEqual(renderAll((await src.load()).snapshot), ['default/api:http 10.96.0.11:80/TCP ->', 'default/web:http 10.96.0.10:80/TCP ->']);

  await writeFile(file, `${svc('web', '10.96.0.10', 70000)}---\n${svc('api', '10.96.0.11', 8080)}`);
  const r = await src.load();
  t.deepEqual(r.errors.map(String), [`${file}: Service default/web: spec.ports[0].port: 70000 is out of range 1-65535; keeping the last valid version`]);
  t.deepEqual(renderAll(r.snapshot), ['default/api:http 10.96.0.11:8080/TCP ->', 'default/web:http 10.96.0.10:80/TCP ->']);

  // Still invalid on the next load: still kept.
  t.deepEqual(renderAll((await src.load()).snapshot), ['default/api:http 10.96.0.11:8080/TCP ->', 'default/web:http 10.96.0.10:80/TCP ->']);

  // The object disappears from its file: gone.
  await writeFile(file, svc('api', '10.96.0.11', 8080));
  const gone = await src.load();
  t.deepEqual(gone.errors, []);
  t.deepEqual(renderAll(gone.snapshot), ['default/api:http 10.96.0.11:8080/TCP ->']);

  // An object that was never valid is simply skipped.
  await writeFile(file, `${svc('api', '10.96.0.11', 8080)}---\n${svc('new', '10.96.0.12', 0)}`);
  const fresh = await src.load();
  t.deepEqual(fresh.errors.map(String), [`${file}: Service default/new: spec.ports[0].port: 0 is out of range 1-65535`]);
  t.deepEqual(renderAll(fresh.snapshot), ['default/api:http 10.96.0.11:8080/TCP ->']);
});

test('a file with a syntax error keeps its objects; a removed file loses them', async (t) => {
  const dir = await tempDir(t);
  const a = join(dir, 'a.yaml');
  const b = join(dir, 'b.yaml');
  await writeFile(a, svc('a', '10.96.0.20', 80));
  await writeFile(b, svc('b', '10.96.0.21', 80));
  const src = new FileSource(dir, { serviceCIDR: '10.96.0.0/12', logger: silentLogger() });
  t.deepEqual(renderAll((await src.load()).snapshot), ['default/a:http 10.96.0.20:80/TCP ->', 'default/b:http 10.96.0.21:80/TCP ->']);

  await writeFile(a, 'apiVersion: v1\nkind: Service\nmetadata: {name: a\n');
  await writeFile(b, svc('b', '10.96.0.21', 81));
  const broken = await src.load();
  t.deepEqual(broken.errors.map(String), [`${a}:4:1: syntax error: Flow map in block collection must be sufficiently indented and end with a }; file skipped`]);
  t.deepEqual(renderAll(broken.snapshot), ['default/a:http 10.96.0.20:80/TCP ->', 'default/b:http 10.96.0.21:81/TCP ->']);
  // Broken twice in a row: still kept.
  t.deepEqual(renderAll((await src.load()).snapshot), ['default/a:http 10.96.0.20:80/TCP ->', 'default/b:http 10.96.0.21:81/TCP ->']);

  await writeFile(a, svc('a', '10.96.0.20', 82));
  t.deepEqual(renderAll((await src.load()).snapshot), ['default/a:http 10.96.0.20:82/TCP ->', 'default/b:http 10.96.0.21:81/TCP ->']);

  await rm(a);
  const removed = await src.load();
  t.deepEqual(removed.errors, []);
  t.deepEqual(renderAll(removed.snapshot), ['default/b:http 10.96.0.21:81/TCP ->']);
});

test('errors are logged at warn on every load, allocations at info once', async (t) => {
  const { logger, lines } = recordingLogger();
  const src = new FileSource('examples/shepherd.json', { serviceCIDR: '10.96.0.0/12', logger });
  await src.load();
  await src.load();
  const info = lines.filter((l) => l.level === 30).map((l) => l.msg);
  t.deepEqual(info, ['allocated ClusterIP 10.107.148.169 to default/web-service']);

  const dir = await tempDir(t);
  await writeFile(join(dir, 'bad.yaml'), svc('web', '10.96.1.300', 80));
  const rec = recordingLogger();
  const bad = new FileSource(dir, { serviceCIDR: '10.96.0.0/12', logger: rec.logger });
  await bad.load();
  await bad.load();
  const warns = rec.lines.filter((l) => l.level === 40);
  t.deepEqual(warns.map((l) => l.msg), [
    `${join(dir, 'bad.yaml')}: Service default/web: spec.clusterIP: "10.96.1.300" is not a valid IPv4 address (dotted quad, no leading zeros)`,
    `${join(dir, 'bad.yaml')}: Service default/web: spec.clusterIP: "10.96.1.300" is not a valid IPv4 address (dotted quad, no leading zeros)`,
  ]);
  t.like(warns[0], { file: join(dir, 'bad.yaml'), kind: 'Service', object: 'default/web', field: 'spec.clusterIP' });
});

test('an invalid service CIDR fails at construction', (t) => {
  t.throws(() => new FileSource('examples', { serviceCIDR: '10.96.0.1/12', logger: silentLogger() }), {
    message: '"10.96.0.1/12" has host bits set; did you mean "10.96.0.0/12"?',
  });
});

/** Resolve when `fired` has been called, or reject after `ms`. */
function firedWithin(ms: number): { fired: () => void; wait: Promise<void> } {
  let fired!: () => void;
  const wait = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`onChange not called within ${ms} ms`)), ms);
    fired = () => {
      clearTimeout(timer);
      resolve();
    };
  });
  return { fired, wait };
}

test('watch fires (debounced, once) after a file in the folder is edited', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'svc.yaml');
  await writeFile(file, svc('web', '10.96.0.10', 80));
  const src = new FileSource(dir, { serviceCIDR: '10.96.0.0/12', logger: silentLogger(), debounceMs: 200 });
  t.teardown(() => src.close());
  let calls = 0;
  const { fired, wait } = firedWithin(5000);
  await src.watch(() => {
    calls++;
    fired();
  });
  await writeFile(file, svc('web', '10.96.0.10', 81));
  await writeFile(file, svc('web', '10.96.0.10', 82));
  await wait;
  await new Promise((r) => setTimeout(r, 500));
  t.is(calls, 1);
  t.deepEqual(renderAll((await src.load()).snapshot), ['default/web:http 10.96.0.10:82/TCP ->']);
});

test('watching a single file survives rename-replace and ignores its neighbours', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'svc.yaml');
  await writeFile(file, svc('web', '10.96.0.10', 80));
  const src = new FileSource(file, { serviceCIDR: '10.96.0.0/12', logger: silentLogger(), debounceMs: 50 });
  t.teardown(() => src.close());
  let calls = 0;
  let next = firedWithin(5000);
  await src.watch(() => {
    calls++;
    next.fired();
  });
  await writeFile(join(dir, 'other.yaml'), svc('other', '10.96.0.11', 80));
  await new Promise((r) => setTimeout(r, 400));
  t.is(calls, 0);
  await writeFile(join(dir, 'svc.yaml.tmp'), svc('web', '10.96.0.10', 90));
  await rename(join(dir, 'svc.yaml.tmp'), file);
  await next.wait;
  t.is(calls, 1);
  next = firedWithin(5000);
  await writeFile(file, svc('web', '10.96.0.10', 91));
  await next.wait;
  t.is(calls, 2);
  t.deepEqual(renderAll((await src.load()).snapshot), ['default/web:http 10.96.0.10:91/TCP ->']);
});

test('a file emptied while it is rewritten keeps its objects; deleting it removes them', async (t) => {
  const dir = await tempDir(t);
  const a = join(dir, 'a.yaml');
  await writeFile(a, `${svc('a', '10.96.0.20', 80)}---\n${svc('c', '10.96.0.22', 80)}`);
  await writeFile(join(dir, 'b.yaml'), svc('b', '10.96.0.21', 80));
  const src = new FileSource(dir, { serviceCIDR: '10.96.0.0/12', logger: silentLogger() });
  await src.load();
  await writeFile(a, '');
  const emptied = await src.load();
  t.deepEqual(renderAll(emptied.snapshot), ['default/a:http 10.96.0.20:80/TCP ->', 'default/b:http 10.96.0.21:80/TCP ->', 'default/c:http 10.96.0.22:80/TCP ->']);
  t.deepEqual(emptied.warnings.map(String), [`${a}: file is empty; keeping the 2 objects it held (delete the file to remove them)`]);
  await rm(a);
  t.deepEqual(renderAll((await src.load()).snapshot), ['default/b:http 10.96.0.21:80/TCP ->']);
  // A file that was always empty is just empty.
  await writeFile(join(dir, 'new.yaml'), '');
  t.deepEqual((await src.load()).warnings, []);
});
