/**
 * The link rule of the file source (links.ts): a manifest folder's symlinks
 * never lead drover out of it, and never back to it or its parents; each
 * link skipped is named in one warning.
 */
import { mkdir, mkdtemp, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { FileSource } from '../../src/sources/file.ts';
import { linkVerdict } from '../../src/sources/links.ts';
import { readManifests } from '../../src/sources/manifests.ts';
import { walkManifestTree } from '../../src/sources/tree.ts';
import { ManifestWatcher, type WatchedChanges } from '../../src/sources/watch.ts';
import { silentLogger, type Logger } from '../../src/util/log.ts';
import { recordingLogger, renderAll } from './model-helpers.ts';

async function tempDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-links-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const svc = (name: string, ip: string) => `apiVersion: v1\nkind: Service\nmetadata: {name: ${name}, namespace: default}\nspec: {clusterIP: ${ip}, ports: [{name: http, port: 80}]}\n`;

/**
 * A parent folder holding a Service and the source folder `manifests`,
 * which holds one Service of its own.
 */
async function parentAndSource(t: ExecutionContext): Promise<{ parent: string; source: string }> {
  const parent = await tempDir(t);
  const source = join(parent, 'manifests');
  await mkdir(source);
  await writeFile(join(parent, 'outside.yaml'), svc('outside', '10.96.0.99'));
  await writeFile(join(source, 'web.yaml'), svc('web', '10.96.0.10'));
  return { parent, source };
}

/** A logger that keeps its lines, and the messages of those at warn or above. */
function warnings(): { logger: Logger; lines: () => string[] } {
  const { logger, lines } = recordingLogger();
  return { logger, lines: () => lines.filter((l) => l.level >= 40).map((l) => l.msg) };
}

test('the verdict: inside is followed; the root and its parents never; outside only when external links are allowed', (t) => {
  t.is(linkVerdict('/srv/m/sub', '/srv/m', 'inside'), undefined);
  t.is(linkVerdict('/srv/m/sub/f.yaml', '/srv/m', 'inside'), undefined);
  t.is(linkVerdict('/srv/m', '/srv/m', 'external'), 'loop');
  t.is(linkVerdict('/srv', '/srv/m', 'external'), 'loop');
  t.is(linkVerdict('/', '/srv/m', 'external'), 'loop');
  t.is(linkVerdict('/srv/mx', '/srv/m', 'inside'), 'outside', 'a sibling whose name starts with the root name is outside');
  t.is(linkVerdict('/srv/other', '/srv/m', 'inside'), 'outside');
  t.is(linkVerdict('/srv/other', '/srv/m', 'external'), undefined);
});

test('ln -s .. up: nothing of the parent folder is read, and the link is listed as a loop', async (t) => {
  const { parent, source } = await parentAndSource(t);
  await symlink('..', join(source, 'up'));
  await symlink('/', join(source, 'root'));
  await symlink('.', join(source, 'self'));
  const read = await readManifests(source);
  t.deepEqual(read.files, [join(source, 'web.yaml')]);
  t.deepEqual(
    read.skippedLinks.map((l) => [l.path, l.target, l.reason]),
    [
      [join(source, 'root'), '/', 'loop'],
      [join(source, 'self'), source, 'loop'],
      [join(source, 'up'), parent, 'loop'],
    ],
  );
  // Even when external links are allowed: they would read the source again.
  t.deepEqual((await readManifests(source, { links: 'external' })).files, [join(source, 'web.yaml')]);
});

test('links out of the folder are skipped unless allowed; links inside it are followed', async (t) => {
  const { parent, source } = await parentAndSource(t);
  const elsewhere = await tempDir(t);
  await writeFile(join(elsewhere, 'far.yaml'), svc('far', '10.96.0.98'));
  await symlink(elsewhere, join(source, 'far'));
  await symlink(join(parent, 'outside.yaml'), join(source, 'outside.yaml'));
  await mkdir(join(source, 'real'));
  await writeFile(join(source, 'real', 'inner.yaml'), svc('inner', '10.96.0.11'));
  await symlink('real', join(source, 'alias'));
  await symlink(join('real', 'inner.yaml'), join(source, 'inner-link.yaml'));
  // A link in the external folder back to the source's parent: a loop even when external links are allowed.
  await symlink(parent, join(elsewhere, 'back'));

  const inside = await walkManifestTree(source);
  t.deepEqual(
    inside.files.map((f) => f.path),
    [join(source, 'alias', 'inner.yaml'), join(source, 'inner-link.yaml'), join(source, 'web.yaml')],
  );
  t.deepEqual(
    inside.skippedLinks.map((l) => [l.path, l.reason]),
    [
      [join(source, 'far'), 'outside'],
      [join(source, 'outside.yaml'), 'outside'],
    ],
  );
  const external = await walkManifestTree(source, { links: 'external' });
  t.deepEqual(
    external.files.map((f) => f.path),
    [join(source, 'alias', 'inner.yaml'), join(source, 'far', 'far.yaml'), join(source, 'inner-link.yaml'), join(source, 'outside.yaml'), join(source, 'web.yaml')],
  );
  t.deepEqual(external.skippedLinks.map((l) => [l.path, l.reason]), [[join(source, 'far', 'back'), 'loop']]);
});

test('the file source names each skipped link in one warning, however often it reads the folder', async (t) => {
  const { source } = await parentAndSource(t);
  await symlink('..', join(source, 'up'));
  const { logger, lines } = warnings();
  const src = new FileSource(source, { serviceCIDR: '10.96.0.0/12', logger });
  const first = await src.load();
  t.deepEqual(renderAll(first.snapshot), ['default/web:http 10.96.0.10:80/TCP ->']);
  t.deepEqual(first.incomplete, [], 'a skipped link is not a part that could not be read');
  const warning = `${join(source, 'up')}: symlink to ${JSON.stringify(join(source, '..'))} (the source folder or one of its parent folders) is not followed: it would read the source folder again`;
  t.deepEqual(first.warnings.map(String), [warning]);
  for (let i = 0; i < 3; i++) t.deepEqual((await src.load({ full: true })).warnings.map(String), []);
  t.deepEqual(lines(), [warning]);
  // Removed and made again: warned about again.
  await unlink(join(source, 'up'));
  await src.load({ full: true });
  await symlink('..', join(source, 'up'));
  t.deepEqual((await src.load({ full: true })).warnings.map(String), [warning]);
  t.is(lines().length, 2);
});

test('with ln -s .. up, the watcher watches nothing outside the folder: writes there cause no read', async (t) => {
  const { parent, source } = await parentAndSource(t);
  await symlink('..', join(source, 'up'));
  const seen: WatchedChanges[] = [];
  const w = await ManifestWatcher.start(source, { logger: silentLogger(), debounceMs: 30, onChange: (c) => seen.push(c) });
  t.teardown(() => w.close());
  for (let i = 0; i < 5; i++) await writeFile(join(parent, 'drover.log.json'), `{"line": ${i}}\n`);
  await writeFile(join(parent, 'outside.yaml'), svc('outside', '10.96.0.97'));
  await new Promise((r) => setTimeout(r, 500));
  t.deepEqual(seen, []);
  // The folder itself is still watched.
  await writeFile(join(source, 'web.yaml'), svc('web', '10.96.0.12'));
  const deadline = Date.now() + 5000;
  while (seen.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.deepEqual([...(seen[0]?.files ?? [])], [join(source, 'web.yaml')]);
});

test('a symlink out of the folder made while watching is not read, even on its own event', async (t) => {
  const { parent, source } = await parentAndSource(t);
  const { logger, lines } = warnings();
  const src = new FileSource(source, { serviceCIDR: '10.96.0.0/12', logger, debounceMs: 30 });
  t.teardown(() => src.close());
  let fired = 0;
  await src.watch(() => fired++);
  await src.load();
  await symlink(join(parent, 'outside.yaml'), join(source, 'outside.yaml'));
  const deadline = Date.now() + 5000;
  while (fired === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.true(fired > 0, 'the new link was reported');
  const r = await src.load();
  t.deepEqual(renderAll(r.snapshot), ['default/web:http 10.96.0.10:80/TCP ->']);
  t.deepEqual(lines(), [
    `${join(source, 'outside.yaml')}: symlink to ${JSON.stringify(join(parent, 'outside.yaml'))}, outside the source folder, is not followed (--file-follow-external-links allows it)`,
  ]);
});
