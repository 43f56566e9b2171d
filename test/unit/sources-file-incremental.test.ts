/**
 * The file source while it watches: a load reads only the files the
 * watcher reported, and serves exactly what a full read of the same folder
 * serves; anything it cannot decide from those files alone falls back to a
 * full read.
 */
import { mkdir, mkdtemp, rename, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { FileSource, type FileSourceOptions, type LoadResult } from '../../src/sources/file.ts';
import { silentLogger } from '../../src/util/log.ts';
import { renderAll } from './model-helpers.ts';

const CIDR = '10.96.0.0/12';

async function tempDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-incremental-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const service = (name: string, ip: string, port: number) =>
  JSON.stringify({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default' }, spec: { clusterIP: ip, ports: [{ name: 'http', port, targetPort: 8080 }] } });

const slice = (name: string, ips: readonly string[]) =>
  JSON.stringify({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `${name}-1`, namespace: 'default', labels: { 'kubernetes.io/service-name': name } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080 }],
    endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true } })),
  });

/**
 * A watching FileSource on `dir`, and `after(act)`: do `act`, wait for the
 * onChange it causes, then for stray events to settle (a source's own
 * read again of a broken file fires onChange too).
 */
async function watching(
  t: ExecutionContext,
  dir: string,
  opts: Partial<FileSourceOptions> = {},
): Promise<{ src: FileSource; after: (act: () => Promise<unknown>) => Promise<void> }> {
  const src = new FileSource(dir, { serviceCIDR: CIDR, logger: silentLogger(), debounceMs: 60, ...opts });
  t.teardown(() => src.close());
  let waiter: (() => void) | undefined;
  await src.watch(() => waiter?.());
  const after = async (act: () => Promise<unknown>) => {
    const fired = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no onChange within 5 s')), 5000);
      waiter = () => {
        clearTimeout(timer);
        waiter = undefined;
        resolve();
      };
    });
    await act();
    await fired;
    await new Promise((r) => setTimeout(r, 400));
  };
  return { src, after };
}

/** What a fresh, full read of `dir` gives: rendered service ports, errors and warnings. */
async function fullRead(dir: string): Promise<{ services: string[]; errors: string[]; warnings: string[] }> {
  const r = await new FileSource(dir, { serviceCIDR: CIDR, logger: silentLogger() }).load();
  return view(r);
}

function view(r: LoadResult): { services: string[]; errors: string[]; warnings: string[] } {
  return { services: renderAll(r.snapshot), errors: r.errors.map(String), warnings: r.warnings.map(String) };
}

test('an edit, an added file, a replaced file and a removed file are read alone, and serve what a full read serves', async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'a.json'), service('a', '10.96.0.10', 80));
  await writeFile(join(dir, 'a-slice.json'), slice('a', ['10.180.0.1', '10.180.0.2']));
  await writeFile(join(dir, 'b.json'), service('b', '10.96.0.11', 80));
  // A bad endpoint address is a warning that every load reports, incremental or not.
  await writeFile(join(dir, 'b-slice.json'), slice('b', ['10.180.1.1', '10.180.1.300']));
  const { src, after } = await watching(t, dir);
  const first = await src.load();
  t.is(first.reread, undefined, 'the first load after the watch starts reads everything');
  t.deepEqual(view(first), await fullRead(dir));
  t.is(first.warnings.length, 1);

  const steps: Array<[string, string, () => Promise<void>, string[]]> = [
    ['edit', 'a-slice.json', () => writeFile(join(dir, 'a-slice.json'), slice('a', ['10.180.0.1', '10.180.0.3'])), ['default/a:http']],
    ['add', 'c.json', () => writeFile(join(dir, 'c.json'), service('c', '10.96.0.12', 80)), ['default/c:http']],
    [
      'replace by rename',
      'b.json',
      async () => {
        await writeFile(join(dir, '.b.tmp'), service('b', '10.96.0.11', 81));
        await rename(join(dir, '.b.tmp'), join(dir, 'b.json'));
      },
      ['default/b:http'],
    ],
    ['remove', 'c.json', () => unlink(join(dir, 'c.json')), ['default/c:http']],
  ];
  for (const [what, file, act, keys] of steps) {
    await after(act);
    const r = await src.load();
    t.deepEqual(r.reread, [join(dir, file)], `${what}: only ${file} is read`);
    t.deepEqual([...(r.changed ?? [])].sort(), keys, `${what}: changed`);
    t.deepEqual(view(r), await fullRead(dir), `${what}: the same as a full read`);
  }
  t.deepEqual(renderAll((await src.load()).snapshot), [
    'default/a:http 10.96.0.10:80/TCP -> 10.180.0.1:8080 10.180.0.3:8080',
    'default/b:http 10.96.0.11:81/TCP -> 10.180.1.1:8080',
  ]);
});

test('a full load reads everything while watching', async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'a.json'), service('a', '10.96.0.10', 80));
  const { src, after } = await watching(t, dir);
  await src.load();
  await after(() => writeFile(join(dir, 'a.json'), service('a', '10.96.0.10', 81)));
  const r = await src.load({ full: true });
  t.is(r.reread, undefined);
  t.deepEqual(renderAll(r.snapshot), ['default/a:http 10.96.0.10:81/TCP ->']);
  t.deepEqual(r.changed, new Set(['default/a:http']));
});

test('while a file is broken every load is full and keeps its objects; once whole again, loads read alone', async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'a.json'), service('a', '10.96.0.10', 80));
  await writeFile(join(dir, 'b.json'), service('b', '10.96.0.11', 80));
  const { src, after } = await watching(t, dir);
  await src.load();

  await after(() => writeFile(join(dir, 'a.json'), '{"apiVersion": "v1", "kind": "Serv'));
  const broken = await src.load();
  t.is(broken.reread, undefined);
  t.is(broken.incomplete.length, 1);
  t.deepEqual(renderAll(broken.snapshot), ['default/a:http 10.96.0.10:80/TCP ->', 'default/b:http 10.96.0.11:80/TCP ->']);

  await after(() => writeFile(join(dir, 'b.json'), service('b', '10.96.0.11', 81)));
  const still = await src.load();
  t.is(still.reread, undefined, 'another file changes while one is broken: full');
  t.deepEqual(renderAll(still.snapshot), ['default/a:http 10.96.0.10:80/TCP ->', 'default/b:http 10.96.0.11:81/TCP ->']);

  await after(() => writeFile(join(dir, 'a.json'), service('a', '10.96.0.10', 82)));
  const whole = await src.load();
  t.is(whole.reread, undefined, 'the first load after the repair is still full (the last one kept an object)');
  t.deepEqual(whole.errors, []);

  await after(() => writeFile(join(dir, 'b.json'), service('b', '10.96.0.11', 83)));
  const alone = await src.load();
  t.deepEqual(alone.reread, [join(dir, 'b.json')]);
  t.deepEqual(renderAll(alone.snapshot), ['default/a:http 10.96.0.10:82/TCP ->', 'default/b:http 10.96.0.11:83/TCP ->']);
});

test('an identity in two files, an emptied file and an invalid object are decided by a full read', async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'a.json'), service('a', '10.96.0.10', 80));
  await writeFile(join(dir, 'b.json'), service('b', '10.96.0.11', 80));
  const { src, after } = await watching(t, dir);
  await src.load();

  // The Service a also in b.json: which copy counts is the full read's rule (the first file).
  await after(() => writeFile(join(dir, 'b.json'), service('a', '10.96.0.10', 90)));
  const dup = await src.load();
  t.is(dup.reread, undefined);
  t.deepEqual(view(dup).services, (await fullRead(dir)).services);

  // Back to one copy each: the copy that goes was one of two, so this too is a full read; the next edit reads alone.
  await after(() => writeFile(join(dir, 'b.json'), service('b', '10.96.0.11', 80)));
  t.is((await src.load()).reread, undefined);
  await after(() => writeFile(join(dir, 'b.json'), service('b', '10.96.0.11', 81)));
  t.deepEqual((await src.load()).reread, [join(dir, 'b.json')]);
  await after(() => writeFile(join(dir, 'b.json'), service('b', '10.96.0.11', 80)));
  await src.load();

  // An emptied file keeps what it held (it is most likely being rewritten).
  await after(() => writeFile(join(dir, 'b.json'), ''));
  const emptied = await src.load();
  t.is(emptied.reread, undefined);
  t.deepEqual(renderAll(emptied.snapshot), ['default/a:http 10.96.0.10:80/TCP ->', 'default/b:http 10.96.0.11:80/TCP ->']);
  await after(() => writeFile(join(dir, 'b.json'), service('b', '10.96.0.11', 80)));
  await src.load();

  // An invalid object keeps its last valid version.
  await after(() => writeFile(join(dir, 'a.json'), service('a', '10.96.0.10', 70000)));
  const invalid = await src.load();
  t.is(invalid.reread, undefined);
  t.deepEqual(invalid.errors.map(String), [`${join(dir, 'a.json')}: Service default/a: spec.ports[0].port: 70000 is out of range 1-65535; keeping the last valid version`]);
  t.deepEqual(renderAll(invalid.snapshot), ['default/a:http 10.96.0.10:80/TCP ->', 'default/b:http 10.96.0.11:80/TCP ->']);
});

test('a file that does not parse just after it was written is read again without another event', async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'a.json'), service('a', '10.96.0.10', 80));
  // Files read as they are: this is the read again of a file that did not parse, not the settle rule.
  const src = new FileSource(dir, { serviceCIDR: CIDR, logger: silentLogger(), debounceMs: 60, settleMs: 0 });
  t.teardown(() => src.close());
  const fired: number[] = [];
  await src.watch(() => fired.push(Date.now()));
  await src.load();
  await writeFile(join(dir, 'a.json'), '{"apiVersion": "v1", "kind": "Serv');
  while (fired.length === 0) await new Promise((r) => setTimeout(r, 10));
  await new Promise((r) => setTimeout(r, 100)); // the write's events are in
  const loadedAt = Date.now();
  fired.length = 0;
  t.is((await src.load()).incomplete.length, 1);
  await new Promise((r) => setTimeout(r, 1000));
  t.true(fired.length >= 1, 'the source reads the file again by itself');
  t.true(fired[0]! - loadedAt >= 200, `read again ${fired[0]! - loadedAt} ms after the load`);
  // Once the file is older than the racy window, a broken file is left for the next event.
  await new Promise((r) => setTimeout(r, 2000));
  fired.length = 0;
  await src.load();
  await new Promise((r) => setTimeout(r, 600));
  t.deepEqual(fired, []);
});

test('a single-file source whose file is deleted rejects the load, as a full read does', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'svc.json');
  await writeFile(file, service('a', '10.96.0.10', 80));
  const { src, after } = await watching(t, file);
  await src.load();
  await after(() => unlink(file));
  await t.throwsAsync(src.load(), { message: `manifest path not found: ${file}` });
});

test('a symlinked file whose target is saved by rename, again and again, is followed each time', async (t) => {
  const dir = await tempDir(t);
  const outside = await tempDir(t);
  await writeFile(join(outside, 'a.json'), service('a', '10.96.0.10', 80));
  await symlink(join(outside, 'a.json'), join(dir, 'a.json'));
  const { src, after } = await watching(t, dir, { followExternalLinks: true });
  await src.load();
  for (const port of [81, 82, 83]) {
    await after(async () => {
      await writeFile(join(outside, '.a.tmp'), service('a', '10.96.0.10', port));
      await rename(join(outside, '.a.tmp'), join(outside, 'a.json'));
    });
    t.deepEqual(renderAll((await src.load()).snapshot), [`default/a:http 10.96.0.10:${port}/TCP ->`]);
  }
});

test('a subfolder swapped for another is watched anew', async (t) => {
  const dir = await tempDir(t);
  await mkdir(join(dir, 'sub'));
  await writeFile(join(dir, 'sub', 'a.json'), service('a', '10.96.0.10', 80));
  const { src, after } = await watching(t, dir);
  await src.load();
  await after(async () => {
    await mkdir(join(dir, 'staged'));
    await writeFile(join(dir, 'staged', 'a.json'), service('a', '10.96.0.10', 81));
    await rename(join(dir, 'sub'), join(dir, 'sub.old'));
    await rename(join(dir, 'staged'), join(dir, 'sub'));
    await rm(join(dir, 'sub.old'), { recursive: true });
  });
  t.deepEqual(renderAll((await src.load()).snapshot), ['default/a:http 10.96.0.10:81/TCP ->']);
  await after(() => writeFile(join(dir, 'sub', 'a.json'), service('a', '10.96.0.10', 82)));
  const r = await src.load();
  t.deepEqual(r.reread, [join(dir, 'sub', 'a.json')]);
  t.deepEqual(renderAll(r.snapshot), ['default/a:http 10.96.0.10:82/TCP ->']);
});

test('a folder reached through a symlink first is named by it in reads and in events alike', async (t) => {
  const dir = await tempDir(t);
  await mkdir(join(dir, 'real'));
  await writeFile(join(dir, 'real', 'svc.json'), service('a', '10.96.0.10', 80));
  await symlink('real', join(dir, 'alias')); // "alias" comes first: the scan reads real/ as alias/
  const { src, after } = await watching(t, dir);
  await src.load();
  await after(() => writeFile(join(dir, 'real', 'svc.json'), service('b', '10.96.0.11', 80)));
  const r = await src.load();
  t.deepEqual(r.reread, [join(dir, 'alias', 'svc.json')]);
  t.deepEqual(view(r), await fullRead(dir));
  await after(() => unlink(join(dir, 'real', 'svc.json')));
  t.deepEqual(renderAll((await src.load()).snapshot), []);
});

test('a dangling symlinked file whose target appears is watched from the next full read on', async (t) => {
  const dir = await tempDir(t);
  const outside = await tempDir(t);
  await symlink(join(outside, 'a.json'), join(dir, 'a.json'));
  const { src, after } = await watching(t, dir, { followExternalLinks: true });
  await src.load();
  await writeFile(join(outside, 'a.json'), service('a', '10.96.0.10', 80));
  t.deepEqual(renderAll((await src.load({ full: true })).snapshot), ['default/a:http 10.96.0.10:80/TCP ->']);
  await after(() => writeFile(join(outside, 'a.json'), service('a', '10.96.0.10', 81)));
  const r = await src.load();
  t.deepEqual(r.reread, [join(dir, 'a.json')]);
  t.deepEqual(renderAll(r.snapshot), ['default/a:http 10.96.0.10:81/TCP ->']);
});
