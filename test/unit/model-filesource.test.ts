import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { FileSource } from '../../src/sources/file.ts';
import { ERROR_LOG_INTERVAL_MS, ErrorLogLimit } from '../../src/sources/watch.ts';
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
  // Debounced by 2 s, so that the two writes below fall in one window also on a busy machine; a second call would
  // come no sooner than 2 s after the first event it follows, so the check for one waits longer than that.
  const src = new FileSource(dir, { serviceCIDR: '10.96.0.0/12', logger: silentLogger(), debounceMs: 2000 });
  t.teardown(() => src.close());
  let calls = 0;
  const { fired, wait } = firedWithin(30_000);
  await src.watch(() => {
    calls++;
    fired();
  });
  await writeFile(file, svc('web', '10.96.0.10', 81));
  await writeFile(file, svc('web', '10.96.0.10', 82));
  await wait;
  await new Promise((r) => setTimeout(r, 2500));
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

/** Load `text` in place of the first object of a two-object file that was valid: what is served, and the errors. */
async function afterTypo(t: ExecutionContext, text: string): Promise<{ file: string; served: string[]; errors: string[] }> {
  const dir = await tempDir(t);
  const file = join(dir, 'svc.yaml');
  await writeFile(file, `${svc('web', '10.96.0.10', 80)}---\n${svc('api', '10.96.0.11', 80)}`);
  const src = new FileSource(dir, { serviceCIDR: '10.96.0.0/12', logger: silentLogger() });
  await src.load();
  await writeFile(file, `${text}---\n${svc('api', '10.96.0.11', 81)}`);
  const r = await src.load();
  // Still the same typo on the next load: still kept.
  t.deepEqual(renderAll((await src.load()).snapshot), renderAll(r.snapshot));
  return { file, served: renderAll(r.snapshot), errors: r.errors.map(String) };
}

const KEPT = ['default/api:http 10.96.0.11:81/TCP ->', 'default/web:http 10.96.0.10:80/TCP ->'];
const KEEP_WEB = 'keeping the last valid version of Service default/web, which was object #1 of this file';

test('a typo that hides or changes the identity keeps the last valid version of the object at that position', async (t) => {
  const web = svc('web', '10.96.0.10', 8080);
  const cases: Array<[string, string, string]> = [
    ['nmae', web.replace('{name: web', '{nmae: web'), `Service #1: metadata.name: required; ${KEEP_WEB}`],
    ['metdata', web.replace('metadata:', 'metdata:'), `Service #1: metadata: required; ${KEEP_WEB}`],
    [
      'name: Web',
      web.replace('name: web', 'name: Web'),
      `Service default/Web: metadata.name: "Web" is not a valid DNS-1123 label (lower-case alphanumerics and '-', alphanumeric at both ends, at most 63 characters); ${KEEP_WEB}`,
    ],
    ['apiVersion: V1', web.replace('apiVersion: v1', 'apiVersion: V1'), `object #1: Service of apiVersion V1 is neither a core v1 nor a Shepherd Service; ${KEEP_WEB}`],
    ['kind: Servce', web.replace('kind: Service', 'kind: Servce'), `object #1: kind Servce is not read by drover; ${KEEP_WEB}`],
    ['kind: service', web.replace('kind: Service', 'kind: service'), `object #1: kind service is not read by drover; ${KEEP_WEB}`],
    ['wrapped in a list', `- ${web.trimEnd().split('\n').join('\n  ')}\n`, `object #1: expected an object, got a list; ${KEEP_WEB}`],
  ];
  for (const [what, text, error] of cases) {
    const r = await afterTypo(t, text);
    t.deepEqual(r.served, KEPT, what);
    t.deepEqual(r.errors, [`${r.file}: ${error}`], what);
  }
});

test('a renamed object replaces the old one; an object moved down by an insertion is not kept twice', async (t) => {
  const renamed = await afterTypo(t, svc('www', '10.96.0.12', 80));
  t.deepEqual(renamed.served, ['default/api:http 10.96.0.11:81/TCP ->', 'default/www:http 10.96.0.12:80/TCP ->']);
  t.deepEqual(renamed.errors, []);

  const dir = await tempDir(t);
  const file = join(dir, 'svc.yaml');
  await writeFile(file, `${svc('web', '10.96.0.10', 80)}---\n${svc('api', '10.96.0.11', 80)}`);
  const src = new FileSource(dir, { serviceCIDR: '10.96.0.0/12', logger: silentLogger() });
  await src.load();
  // A broken object inserted above: web and api move to #2 and #3, and are valid there.
  await writeFile(file, `kind: Service\n---\n${svc('web', '10.96.0.10', 80)}---\n${svc('api', '10.96.0.11', 80)}`);
  const moved = await src.load();
  t.deepEqual(moved.errors.map(String), [`${file}: Service #1: metadata: required (and 1 more problem)`]);
  t.deepEqual(renderAll(moved.snapshot), ['default/api:http 10.96.0.11:80/TCP ->', 'default/web:http 10.96.0.10:80/TCP ->']);
  // An object moved to another file while a typo takes its old place: the valid copy wins, nothing is kept twice.
  await writeFile(join(dir, 'other.yaml'), svc('api', '10.96.0.11', 82));
  await writeFile(file, `kind: Service\n---\n${svc('web', '10.96.0.10', 80)}---\nkind: Servce\n`);
  const elsewhere = await src.load();
  t.deepEqual(elsewhere.errors.map(String), [`${file}: Service #1: metadata: required (and 1 more problem)`]);
  t.deepEqual(renderAll(elsewhere.snapshot), ['default/api:http 10.96.0.11:82/TCP ->', 'default/web:http 10.96.0.10:80/TCP ->']);
});

test('endpoint objects without a Service and endpoint ports of another protocol are warnings', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'eps.yaml');
  const slice = (name: string, service: string, protocol: string) =>
    `apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: ${name}, labels: {kubernetes.io/service-name: ${service}}}\naddressType: IPv4\nendpoints: [{addresses: [10.244.0.7]}]\nports: [{name: http, port: 8080, protocol: ${protocol}}]\n`;
  await writeFile(file, `${svc('web', '10.96.0.10', 80)}---\n${slice('web-1', 'web', 'UDP')}---\n${slice('ghost-1', 'ghost', 'TCP')}`);
  const r = await new FileSource(dir, { serviceCIDR: '10.96.0.0/12', logger: silentLogger() }).load();
  t.deepEqual(r.errors, []);
  t.deepEqual(r.warnings.map(String), [
    `${file}: EndpointSlice default/ghost-1: Service default/ghost does not exist; endpoints ignored`,
    `${file}: EndpointSlice default/web-1: endpoint port "http" is UDP but port "http" of Service default/web is TCP; endpoint port ignored`,
  ]);
  t.deepEqual(renderAll(r.snapshot), ['default/web:http 10.96.0.10:80/TCP ->']);
});

test('a watched folder that is swapped or recreated is watched again after the next load', async (t) => {
  const base = await tempDir(t);
  const root = join(base, 'src');
  await mkdir(root);
  await writeFile(join(root, 'svc.yaml'), svc('web', '10.96.0.10', 80));
  const { logger, lines } = recordingLogger();
  const src = new FileSource(root, { serviceCIDR: '10.96.0.0/12', logger, debounceMs: 50 });
  t.teardown(() => src.close());
  let next = { fired: () => {}, wait: Promise.resolve() };
  await src.watch(() => next.fired());
  const settle = () => new Promise((r) => setTimeout(r, 400));

  // mv src src.old; mv new src
  const fresh = join(base, 'new');
  await mkdir(fresh);
  await writeFile(join(fresh, 'svc.yaml'), svc('web', '10.96.0.10', 81));
  await rename(root, join(base, 'src.old'));
  await rename(fresh, root);
  t.deepEqual(renderAll((await src.load()).snapshot), ['default/web:http 10.96.0.10:81/TCP ->']); // e.g. the periodic resync
  await settle();
  next = firedWithin(5000);
  await writeFile(join(root, 'svc.yaml'), svc('web', '10.96.0.10', 82));
  await next.wait;
  t.deepEqual(renderAll((await src.load()).snapshot), ['default/web:http 10.96.0.10:82/TCP ->']);

  // rm -r src; (a load fails meanwhile); mkdir src
  await rm(root, { recursive: true });
  await t.throwsAsync(src.load(), { message: `manifest path not found: ${root}` });
  await mkdir(root);
  await writeFile(join(root, 'svc.yaml'), svc('web', '10.96.0.10', 83));
  await src.load();
  await settle();
  next = firedWithin(5000);
  await writeFile(join(root, 'svc.yaml'), svc('web', '10.96.0.10', 84));
  await next.wait;
  t.deepEqual(renderAll((await src.load()).snapshot), ['default/web:http 10.96.0.10:84/TCP ->']);
  t.deepEqual(
    lines.filter((l) => l.msg.startsWith('watched folder')).map((l) => l.msg),
    [
      `watched folder ${root} was replaced; watching the new one`,
      `watched folder ${root} is gone; watching again once it is back`,
      `watched folder ${root} was replaced; watching the new one`,
    ],
  );
});

test('symlink loops in the folder do not make the watcher walk an endless tree', async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'svc.yaml'), svc('web', '10.96.0.10', 80));
  for (const name of ['self', 'again', 'more']) await symlink('.', join(dir, name));
  await mkdir(join(dir, 'sub'));
  await symlink('..', join(dir, 'sub', 'up'));
  const { logger, lines } = recordingLogger();
  const src = new FileSource(dir, { serviceCIDR: '10.96.0.0/12', logger, debounceMs: 50 });
  t.teardown(() => src.close());
  const next = firedWithin(5000);
  const ready = src.watch(() => next.fired());
  const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error('watch not ready within 10 s')), 10_000).unref());
  await Promise.race([ready, timeout]);
  await writeFile(join(dir, 'sub', 'more.yaml'), svc('more', '10.96.0.11', 80));
  await next.wait;
  t.deepEqual(lines.filter((l) => l.level >= 40), []);
  t.deepEqual(renderAll((await src.load()).snapshot), ['default/more:http 10.96.0.11:80/TCP ->', 'default/web:http 10.96.0.10:80/TCP ->']);
});

test('watcher errors are logged once per code per minute, with the count of those left out', (t) => {
  let now = 0;
  const limit = new ErrorLogLimit(ERROR_LOG_INTERVAL_MS, () => now);
  t.is(ERROR_LOG_INTERVAL_MS, 60_000);
  t.is(limit.admit('ELOOP'), 0);
  for (let i = 0; i < 5000; i++) t.is(limit.admit('ELOOP'), undefined);
  t.is(limit.admit('EACCES'), 0);
  now = 59_999;
  t.is(limit.admit('ELOOP'), undefined);
  now = 60_000;
  t.is(limit.admit('ELOOP'), 5001);
  t.is(limit.admit('ELOOP'), undefined);
});

test('a broken document keeps what it held; the other documents of its file follow the file; the read says it is incomplete', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'svc.yaml');
  await writeFile(file, `${svc('web', '10.96.0.10', 80)}---\n${svc('api', '10.96.0.11', 80)}---\n${svc('db', '10.96.0.12', 80)}`);
  const src = new FileSource(dir, { serviceCIDR: '10.96.0.0/12', logger: silentLogger() });
  const whole = await src.load();
  t.deepEqual(whole.incomplete, []);
  t.is(whole.snapshot.services.size, 3);

  // api's document breaks; db's port changes and is followed.
  await writeFile(file, `${svc('web', '10.96.0.10', 80)}---\n${svc('api', '10.96.0.11', 80).replace('{name: api, namespace: default}', '{name: api, namespace: default')}---\n${svc('db', '10.96.0.12', 5432)}`);
  const r = await src.load();
  t.deepEqual(r.errors.map(String), [
    `${file}:11:1: document #2 (from line 7): syntax error: Flow map in block collection must be sufficiently indented and end with a }; document skipped`,
  ]);
  t.deepEqual(r.incomplete, r.errors.map(String));
  t.deepEqual(renderAll(r.snapshot), ['default/api:http 10.96.0.11:80/TCP ->', 'default/db:http 10.96.0.12:5432/TCP ->', 'default/web:http 10.96.0.10:80/TCP ->']);
  // Broken again on the next load: still kept.
  t.deepEqual(renderAll((await src.load()).snapshot), renderAll(r.snapshot));

  // Fixed: whole again.
  await writeFile(file, `${svc('web', '10.96.0.10', 80)}---\n${svc('db', '10.96.0.12', 5432)}`);
  const fixed = await src.load();
  t.deepEqual(fixed.incomplete, []);
  t.deepEqual(renderAll(fixed.snapshot), ['default/db:http 10.96.0.12:5432/TCP ->', 'default/web:http 10.96.0.10:80/TCP ->']);
});

test('one bad endpoint address skips that endpoint only; the rest of its slice is served', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'nsd.yaml');
  await writeFile(
    file,
    'apiVersion: v1\nkind: Service\nmetadata: {name: good, namespace: nsd}\nspec:\n  clusterIP: 10.96.0.10\n  ports: [{name: http, port: 80}]\n---\n' +
      'apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: good-1, namespace: nsd, labels: {kubernetes.io/service-name: good}}\naddressType: IPv4\n' +
      'endpoints: [{addresses: ["10.180.0.01"]}, {addresses: [10.180.2.1]}, {addresses: ["10.180.0.999"]}]\nports: [{name: http, port: 8080}]\n',
  );
  const r = await new FileSource(dir, { serviceCIDR: '10.96.0.0/12', logger: silentLogger() }).load();
  t.deepEqual(r.errors, []);
  t.deepEqual(r.warnings.map(String), [
    `${file}: EndpointSlice nsd/good-1: endpoints[0].addresses[0]: "10.180.0.01" has leading zeros; read as 10.180.0.1, as kube-proxy does`,
    `${file}: EndpointSlice nsd/good-1: endpoints[2].addresses[0]: "10.180.0.999" is not a valid IPv4 address; endpoint ignored`,
  ]);
  t.deepEqual(renderAll(r.snapshot), ['nsd/good:http 10.96.0.10:80/TCP -> 10.180.0.1:8080 10.180.2.1:8080']);
});
