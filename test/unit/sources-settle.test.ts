/**
 * Files written in pieces (file.ts, the settle rule): a file is applied
 * only once it has stopped changing; a file that reads as less than it
 * held keeps what it served for a while; a List cut short before its
 * `kind` line is not read as one object; a file renamed into place is
 * applied at once.
 */
import { open, mkdtemp, rename, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { FileSource, UNSETTLED_WARN_MS, type FileSourceOptions, type LoadResult } from '../../src/sources/file.ts';
import { readManifests } from '../../src/sources/manifests.ts';
import { silentLogger } from '../../src/util/log.ts';
import { recordingLogger, renderAll } from './model-helpers.ts';

const CIDR = '10.96.0.0/12';

async function tempDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-settle-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const service = (name: string, ip: string) => `apiVersion: v1\nkind: Service\nmetadata: {name: ${name}, namespace: default}\nspec: {clusterIP: ${ip}, ports: [{name: http, port: 80}]}\n`;
const slice = (name: string, ips: readonly string[]) =>
  `apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: ${name}-1, namespace: default, labels: {kubernetes.io/service-name: ${name}}}\naddressType: IPv4\nports: [{name: http, port: 8080}]\nendpoints:\n${ips.map((ip) => `  - {addresses: [${ip}], conditions: {ready: true}}\n`).join('')}`;
/** A Service and its EndpointSlice as two documents. */
const pair = (ips: readonly string[]) => `${service('web', '10.96.0.10')}---\n${slice('web', ips)}`;
/** What pair() serves. */
const served = (ips: readonly string[]) => [`default/web:http 10.96.0.10:80/TCP -> ${ips.map((ip) => `${ip}:8080`).join(' ')}`.trimEnd()];

/**
 * A watching FileSource on `dir` (options added), and `next()`: wait for
 * the next onChange (at most 10 s), then load.
 */
async function watching(t: ExecutionContext, dir: string, opts: Partial<FileSourceOptions> = {}): Promise<{ src: FileSource; next: () => Promise<LoadResult> }> {
  const src = new FileSource(dir, { serviceCIDR: CIDR, logger: silentLogger(), debounceMs: 30, ...opts });
  t.teardown(() => src.close());
  const waiters: Array<() => void> = [];
  await src.watch(() => waiters.splice(0).forEach((w) => w()));
  const next = async () => {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no onChange within 10 s')), 10_000);
      waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    return src.load();
  };
  return { src, next };
}

/** Write `text` at the end of the open file (as a writer in pieces does). */
async function append(fh: Awaited<ReturnType<typeof open>>, text: string): Promise<void> {
  await fh.write(text);
  await fh.sync();
}

test('a file changed less than the settle time ago is left unread; one renamed into place is read', async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'a.yaml'), service('a', '10.96.0.10'));
  await writeFile(join(dir, 'b.yaml'), service('b', '10.96.0.11'));
  const now = Date.now() + 100;
  const read = await readManifests(dir, { settle: { ms: 1000, now: () => now, exempt: (f) => f.endsWith('b.yaml') } });
  t.deepEqual(read.files, [join(dir, 'a.yaml'), join(dir, 'b.yaml')]);
  t.deepEqual(read.unsettled.map((u) => u.file), [join(dir, 'a.yaml')]);
  t.true(read.unsettled[0]!.changedAt <= now && read.unsettled[0]!.changedAt > now - 5000);
  t.deepEqual(read.objects.map((o) => o.file), [join(dir, 'b.yaml')]);
  // Settled once the settle time has passed.
  const later = await readManifests(dir, { settle: { ms: 1000, now: () => now + 1000 } });
  t.deepEqual([later.unsettled, later.objects.length], [[], 2]);
});

test('a List cut short before its kind line is an error, not one object, and its file keeps what it held', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'dump.yaml');
  // As kubectl prints it: each item indented under `items`, `kind: List` after them.
  const indent = (doc: string) => doc.trimEnd().split('\n').map((l, i) => `${i === 0 ? '- ' : '  '}${l}\n`).join('');
  const items = `apiVersion: v1\nitems:\n${indent(service('web', '10.96.0.10'))}${indent(slice('web', ['10.180.0.1']))}`;
  await writeFile(file, `${items}kind: List\nmetadata: {resourceVersion: ""}\n`);
  const src = new FileSource(dir, { serviceCIDR: CIDR, logger: silentLogger() });
  t.deepEqual(renderAll((await src.load()).snapshot), served(['10.180.0.1']));
  await writeFile(file, items);
  const cut = await src.load();
  t.deepEqual(cut.errors.map(String), [
    `${file}: has items but no kind: a List cut short before its kind line (kubectl prints "kind: List" after the items), or written without it; file skipped`,
  ]);
  t.is(cut.incomplete.length, 1);
  t.deepEqual(renderAll(cut.snapshot), served(['10.180.0.1']));
  // The same in JSON.
  await writeFile(join(dir, 'dump.yaml'), '');
  await writeFile(join(dir, 'list.json'), JSON.stringify({ apiVersion: 'v1', items: [] }));
  t.deepEqual((await readManifests(join(dir, 'list.json'))).errors.map((e) => e.detail), [
    'has items but no kind: a List cut short before its kind line (kubectl prints "kind: List" after the items), or written without it; file skipped',
  ]);
});

test('a file written in pieces keeps serving what it served until it reads whole again', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'web.yaml');
  await writeFile(file, pair(['10.180.0.1', '10.180.0.2']));
  const { src, next } = await watching(t, dir, { settleMs: 100 });
  t.deepEqual(renderAll((await src.load()).snapshot), served(['10.180.0.1', '10.180.0.2']));

  // First piece: the Service alone, then a pause longer than the settle time.
  const fh = await open(file, 'w');
  t.teardown(() => fh.close().catch(() => undefined));
  await append(fh, `${service('web', '10.96.0.10')}---\n`);
  const cut = await next();
  t.deepEqual(renderAll(cut.snapshot), served(['10.180.0.1', '10.180.0.2']), 'the EndpointSlice it held is kept');
  t.deepEqual(cut.errors.map(String), [
    `${file}: reads as 1 object where it held 2: it may still be being written; keeping what it served until it has not changed for 10 s (rename a file into place to apply it at once)`,
  ]);
  t.is(cut.incomplete.length, 1);

  // The rest arrives.
  await append(fh, slice('web', ['10.180.0.1', '10.180.0.2', '10.180.0.3']));
  const whole = await next();
  t.deepEqual(renderAll(whole.snapshot), served(['10.180.0.1', '10.180.0.2', '10.180.0.3']));
  t.deepEqual([whole.errors, whole.incomplete], [[], []]);
});

test('a file is not read while it is being written: a load meanwhile serves what it served', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'web.yaml');
  await writeFile(file, pair(['10.180.0.1']));
  // A settle time far above any stall of a busy machine between the write and the early load below.
  const { src, next } = await watching(t, dir, { settleMs: 5000 });
  await src.load();
  const changed = Date.now();
  await writeFile(file, pair(['10.180.0.2']));
  // A load before the file has settled (as a periodic sync would make) leaves it as it was.
  const early = await src.load({ full: true });
  t.true(Date.now() - changed < 5000, `the early load ended ${Date.now() - changed} ms after the write`);
  t.deepEqual(renderAll(early.snapshot), served(['10.180.0.1']));
  t.deepEqual(early.incomplete, []);
  // The source calls back once the file has settled, and the load then reads it.
  const settled = await next();
  t.true(Date.now() - changed >= 5000, `read ${Date.now() - changed} ms after the write`);
  t.deepEqual(renderAll(settled.snapshot), served(['10.180.0.2']));
});

test('objects a user removes from the end of a file are removed once the file has not changed for the hold', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'web.yaml');
  await writeFile(file, pair(['10.180.0.1']));
  const { src, next } = await watching(t, dir, { settleMs: 50, shrinkHoldMs: 800 });
  await src.load();
  const removed = Date.now();
  await writeFile(file, service('web', '10.96.0.10'));
  const held = await next();
  t.deepEqual(renderAll(held.snapshot), served(['10.180.0.1']));
  t.is(held.incomplete.length, 1);
  // No other event comes: the source reads the file again by itself once the hold is over.
  const applied = await next();
  t.true(Date.now() - removed >= 800, `applied ${Date.now() - removed} ms after the write`);
  t.deepEqual(renderAll(applied.snapshot), ['default/web:http 10.96.0.10:80/TCP ->']);
  t.deepEqual(applied.incomplete, []);
});

test('a file renamed into place is complete: fewer objects are applied at once', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'web.yaml');
  await writeFile(file, pair(['10.180.0.1']));
  const { src, next } = await watching(t, dir, { settleMs: 5000 });
  await src.load();
  await writeFile(join(dir, '.web.yaml.tmp'), service('web', '10.96.0.10'));
  await rename(join(dir, '.web.yaml.tmp'), file);
  const r = await next();
  t.deepEqual(renderAll(r.snapshot), ['default/web:http 10.96.0.10:80/TCP ->']);
  t.deepEqual(r.incomplete, []);
});

test('a one-shot read (not watching) reads files as they are', async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'web.yaml'), pair(['10.180.0.1']));
  const src = new FileSource(dir, { serviceCIDR: CIDR, logger: silentLogger(), settleMs: 60_000 });
  t.deepEqual(renderAll((await src.load()).snapshot), served(['10.180.0.1']));
  await writeFile(join(dir, 'web.yaml'), service('web', '10.96.0.10'));
  t.deepEqual(renderAll((await src.load()).snapshot), ['default/web:http 10.96.0.10:80/TCP ->']);
});

test('a file that keeps changing is named in one warning once it has stayed unread for 10 s, and serves what it served meanwhile', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'web.yaml');
  await writeFile(file, pair(['10.180.0.1']));
  let offset = 0;
  const { logger, lines } = recordingLogger();
  const warned = () => lines.filter((l) => l.level >= 40 && String(l.msg).includes('has kept changing')).map((l) => l.msg);
  const { src } = await watching(t, dir, { settleMs: 1000, logger, now: () => Date.now() + offset });
  await src.load();
  // Written again and again, each time less than the settle time before the load: never read.
  const touch = async () => {
    const at = (Date.now() + offset - 100) / 1000;
    await utimes(file, at, at);
  };
  await writeFile(file, pair(['10.180.0.2']));
  await touch();
  t.deepEqual(renderAll((await src.load({ full: true })).snapshot), served(['10.180.0.1']));
  t.deepEqual(warned(), [], 'not yet: a file being written for a moment is usual');
  offset = UNSETTLED_WARN_MS + 1000;
  await touch();
  t.deepEqual(renderAll((await src.load({ full: true })).snapshot), served(['10.180.0.1']));
  t.is(warned().length, 1);
  t.regex(warned()[0]!, /web\.yaml has kept changing for 1[01](\.\d)? s: it is applied once it has not changed for 1000 ms \(--file-settle\)/);
  offset += 2000;
  await touch();
  await src.load({ full: true });
  t.is(warned().length, 1, 'once per episode');
  // Left alone, it settles and is read.
  offset += 2000;
  t.deepEqual(renderAll((await src.load({ full: true })).snapshot), served(['10.180.0.2']));
});

test('a file rewritten smaller in place, again and again, is held no longer than the hold from when it first shrank', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'web.yaml');
  await writeFile(file, pair(['10.180.0.1']));
  const { src } = await watching(t, dir, { settleMs: 50, shrinkHoldMs: 1500 });
  await src.load();
  const first = Date.now();
  // A generator rewriting its output (without the EndpointSlice) every 300 ms: each load comes well within the hold of the last write.
  for (;;) {
    await writeFile(file, service('web', '10.96.0.10'));
    await new Promise((r) => setTimeout(r, 150));
    const r = await src.load({ full: true });
    const rendered = renderAll(r.snapshot);
    if (rendered[0] === 'default/web:http 10.96.0.10:80/TCP ->') {
      t.true(Date.now() - first >= 1500, `applied ${Date.now() - first} ms after it first shrank`);
      t.deepEqual(r.incomplete, []);
      return;
    }
    t.deepEqual(rendered, served(['10.180.0.1']), 'held meanwhile');
    t.is(r.incomplete.length, 1);
    if (Date.now() - first > 8000) return t.fail('still held 8 s after it first shrank');
    await new Promise((r) => setTimeout(r, 150));
  }
});
