import { mkdtemp, rm, truncate, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { RACY_MS } from '../../src/sources/cache.ts';
import { isIgnoredName, isManifestFileName, ManifestCache, MAX_MANIFEST_FILE_BYTES, readManifests } from '../../src/sources/manifests.ts';
import { FIXTURES } from './model-helpers.ts';

const names = (objects: Array<{ raw: unknown }>) => objects.map((o) => (o.raw as { metadata: { name: string } }).metadata.name);

test('a folder is read recursively in path order; dotfiles, editor files and other extensions are skipped', async (t) => {
  const r = await readManifests(`${FIXTURES}/tree`);
  t.deepEqual(r.errors, []);
  t.deepEqual(
    r.objects.map((o) => [o.file, o.index]),
    [
      [`${FIXTURES}/tree/one.json`, 0],
      [`${FIXTURES}/tree/sub/two.yml`, 0],
    ],
  );
  t.deepEqual(names(r.objects), ['one', 'two']);
});

test('multi-document YAML and Lists are flattened, empty documents dropped', async (t) => {
  const r = await readManifests(`${FIXTURES}/multi-doc.yaml`);
  t.deepEqual(r.errors, []);
  t.deepEqual(names(r.objects), ['api', 'api-1', 'settings', 'cart']);
  t.deepEqual(r.objects.map((o) => o.index), [0, 1, 2, 3]);
  const list = await readManifests('examples/kubernetes.yaml');
  t.deepEqual(names(list.objects), ['linkding', 'linkding-db', 'linkding-x7v2q']);
});

test('syntax errors name file, line and column; other files are still read', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-manifests-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'a.json'), '{"kind": "Service",\n  "metadata": {"name": "x"\n');
  await writeFile(join(dir, 'b.yaml'), 'a: 1\na: 2\n');
  await writeFile(join(dir, 'c.yaml'), 'apiVersion: v1\nkind: Service\nmetadata: {name: ok}\n');
  await writeFile(join(dir, 'd.yaml'), '');
  const r = await readManifests(dir);
  t.deepEqual(r.errors.map(String), [
    `${dir}/a.json:3:1: syntax error: Flow map in block collection must be sufficiently indented and end with a }; file skipped`,
    `${dir}/b.yaml:2:1: syntax error: Map keys must be unique; file skipped`,
  ]);
  t.deepEqual(names(r.objects), ['ok']);
});

test('a single file is read whatever its extension; a missing path throws', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-manifests-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'services.txt'), 'kind: Service\nmetadata: {name: plain}\n');
  t.deepEqual(names((await readManifests(join(dir, 'services.txt'))).objects), ['plain']);
  await t.throwsAsync(readManifests(join(dir, 'nope.yaml')), { message: `manifest path not found: ${join(dir, 'nope.yaml')}` });
});

test('ignored names', (t) => {
  for (const n of ['.hidden.yaml', 'svc.yaml~', '.svc.yaml.swp', 'svc.yaml.swx', '#svc.yaml#', '.#svc.yaml']) t.true(isIgnoredName(n), n);
  for (const n of ['svc.yaml', 'svc.YML', 'svc.json']) t.true(isManifestFileName(n), n);
  for (const n of ['README.md', 'svc.yaml.bak', '.svc.yaml']) t.false(isManifestFileName(n), n);
});

test('a List of 200,000 items is read (no argument spreading)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-manifests-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const n = 200_000;
  await writeFile(join(dir, 'big.json'), `{"apiVersion":"v1","kind":"List","items":[${Array(n).fill('1').join(',')}]}`);
  const r = await readManifests(dir);
  t.deepEqual(r.errors, []);
  t.is(r.objects.length, n);
  t.deepEqual(r.objects[n - 1], { file: join(dir, 'big.json'), index: n - 1, raw: 1 });
});

test('a file over the size limit is skipped unread, with one error naming it', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-manifests-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  t.is(MAX_MANIFEST_FILE_BYTES, 32 * 1024 * 1024);
  await writeFile(join(dir, 'a.yaml'), 'kind: Service\nmetadata: {name: small}\n');
  await writeFile(join(dir, 'huge.yaml'), '');
  await truncate(join(dir, 'huge.yaml'), 40 * 1024 * 1024 + 1); // sparse: no disk used
  const r = await readManifests(dir);
  t.deepEqual(r.errors.map(String), [`${dir}/huge.yaml: file is 40.1 MiB, larger than the 32 MiB limit; file skipped`]);
  t.deepEqual(names(r.objects), ['small']);
  t.deepEqual(r.files, [join(dir, 'a.yaml'), join(dir, 'huge.yaml')]);
  const small = await readManifests(dir, { maxFileBytes: 1024 * 1024 });
  t.deepEqual(small.errors.map(String), [`${dir}/huge.yaml: file is 40.1 MiB, larger than the 1 MiB limit; file skipped`]);
});

test('the cache hands out an unchanged file\'s objects again and re-reads any change', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-manifests-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const a = join(dir, 'a.yaml');
  const b = join(dir, 'b.yaml');
  const hourAgo = new Date(Date.now() - 3_600_000);
  await writeFile(a, 'kind: Service\nmetadata: {name: one}\n');
  await writeFile(b, 'kind: Service\nmetadata: {name: bbb}\n');
  await utimes(a, hourAgo, hourAgo);
  await utimes(b, hourAgo, hourAgo);
  const cache = new ManifestCache();
  const first = await readManifests(dir, { cache });
  t.is(cache.size, 2);
  const again = await readManifests(dir, { cache });
  t.is(again.objects[0], first.objects[0]);
  t.is(again.objects[1], first.objects[1]);

  // Same size, mtime set back: the ctime still differs, so the file is read again.
  await writeFile(a, 'kind: Service\nmetadata: {name: two}\n');
  await utimes(a, hourAgo, hourAgo);
  const changed = await readManifests(dir, { cache });
  t.deepEqual(names(changed.objects), ['two', 'bbb']);
  t.is(changed.objects[1], first.objects[1]);

  // A file modified just now is not cached: a second write in the same timestamp tick could not be told apart.
  await writeFile(b, 'kind: Service\nmetadata: {name: ccc}\n');
  const fresh = await readManifests(dir, { cache });
  t.deepEqual(names(fresh.objects), ['two', 'ccc']);
  t.not((await readManifests(dir, { cache })).objects[1], fresh.objects[1]);
  t.is(cache.size, 1);

  // A removed file's entry is dropped.
  await rm(a);
  t.deepEqual(names((await readManifests(dir, { cache })).objects), ['ccc']);
  t.is(cache.size, 0);
});

test('the cache ignores an entry whose stamp differs and forgets racy files', (t) => {
  let now = 10_000_000;
  const cache = new ManifestCache(() => now);
  const st = { dev: 1n, ino: 2n, size: 3n, mtimeNs: 4_000_000_000_000n, ctimeNs: 4_000_000_000_000n, mtimeMs: 4_000_000n };
  const read = { objects: [], errors: [] };
  cache.set('a.yaml', st, read);
  t.is(cache.get('a.yaml', st), read);
  t.is(cache.get('a.yaml', { ...st, ino: 9n }), undefined);
  t.is(cache.get('a.yaml', { ...st, mtimeNs: st.mtimeNs + 1n }), undefined);
  t.is(cache.get('b.yaml', st), undefined);
  now = 4_000_000 + RACY_MS - 1;
  cache.set('a.yaml', st, read);
  t.is(cache.get('a.yaml', st), undefined);
});

test('a file name with control characters cannot forge a line in an error', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-manifests-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const name = 'x\ndrover: fake.yaml: all good\u001b[31m.yaml';
  await writeFile(join(dir, name), 'a: [\n');
  const r = await readManifests(dir);
  t.deepEqual(r.errors.map(String), [
    `"${dir}/x\\ndrover: fake.yaml: all good\\u001b[31m.yaml":2:1: syntax error: Flow sequence in block collection must be sufficiently indented and end with a ]; file skipped`,
  ]);
});

test('a syntax error in one document skips that document only; the others keep their positions', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-manifests-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'f.yaml');
  await writeFile(
    file,
    [
      'kind: Service\nmetadata: {name: first}',
      'kind: Service\nmetadata: {name: broken, namespace: nsd\nspec: {clusterIP: 172.30.0.62}',
      'kind: List\nitems:\n- {kind: Service, metadata: {name: third}}\n- {kind: Service, metadata: {name: fourth}}',
    ].join('\n---\n') + '\n',
  );
  const r = await readManifests(file);
  t.deepEqual(r.errors.map(String), [
    `${file}:6:1: document #2 (from line 3): syntax error: Flow map in block collection must be sufficiently indented and end with a }; document skipped`,
  ]);
  t.deepEqual(names(r.objects), ['first', 'third', 'fourth']);
  t.deepEqual(r.objects.map((o) => o.index), [0, 2, 3]);
});

test('an error that runs over a document marker makes the whole file unreadable', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-manifests-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'f.yaml');
  await writeFile(file, 'kind: Service\nmetadata: {name: first}\n---\nkind: "Service\nmetadata: {name: x}\n---\nkind: Service\nmetadata: {name: last}\n');
  const r = await readManifests(file);
  t.is(r.errors.length, 1);
  t.regex(String(r.errors[0]), /^.*f\.yaml:\d+:\d+: document #2 \(from line 3\): syntax error: .*; file skipped$/);
  t.deepEqual(r.objects, []);
});

test('a JSON file is read as JSON: a repeated key is not an error (the last wins); YAML saved as .json is still read', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-manifests-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'a.json'), '{"kind": "Service", "metadata": {"name": "first", "name": "last"}}');
  await writeFile(join(dir, 'b.json'), 'kind: Service\nmetadata: {name: yaml}\n');
  const r = await readManifests(dir);
  t.deepEqual(r.errors, []);
  t.deepEqual(names(r.objects), ['last', 'yaml']);
});

test('with a decode function, each object comes with a digest of its text: equal for an unchanged item of a changed List, and the raw object is not kept', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-manifests-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const item = (name: string, port: number) => ({ kind: 'Service', metadata: { name }, spec: { ports: [{ port }] } });
  const read = async (file: string) =>
    (await readManifests(file, { decode: (o, digest) => ({ index: o.index, digest, name: (o.raw as { metadata: { name: string } }).metadata.name }) })).objects;
  const json = join(dir, 'list.json');
  await writeFile(json, JSON.stringify({ kind: 'List', items: [item('a', 80), item('b', 80)] }));
  const before = await read(json);
  await writeFile(json, JSON.stringify({ kind: 'List', items: [item('a', 80), item('b', 81)] }));
  const after = await read(json);
  t.deepEqual(after.map((o) => [o.index, o.name]), [[0, 'a'], [1, 'b']]);
  t.is(after[0]!.digest, before[0]!.digest);
  t.not(after[1]!.digest, before[1]!.digest);
  t.false('raw' in after[0]!);

  // YAML: by the text of the document and the position in it.
  const yaml = join(dir, 'f.yaml');
  await writeFile(yaml, 'kind: Service\nmetadata: {name: a}\n---\nkind: List\nitems:\n- {kind: Service, metadata: {name: b}}\n- {kind: Service, metadata: {name: c}}\n');
  const y1 = await read(yaml);
  await writeFile(yaml, 'kind: Service\nmetadata: {name: a}\n---\nkind: List\nitems:\n- {kind: Service, metadata: {name: b}}\n- {kind: Service, metadata: {name: d}}\n');
  const y2 = await read(yaml);
  t.deepEqual(y2.map((o) => o.name), ['a', 'b', 'd']);
  t.is(y2[0]!.digest, y1[0]!.digest);
  t.not(y2[1]!.digest, y1[1]!.digest); // same item, but its document's text changed
  t.not(y1[1]!.digest, y1[2]!.digest);
});
