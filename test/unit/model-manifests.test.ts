import { mkdtemp, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { isIgnoredName, isManifestFileName, readManifests } from '../../src/sources/manifests.ts';
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
