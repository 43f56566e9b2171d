/**
 * The folder watcher of the file source (watch.ts): what each kind of
 * change on disk is reported as.
 */
import { mkdir, mkdtemp, rename, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import type { LinkPolicy } from '../../src/sources/links.ts';
import { ManifestWatcher, type WatchedChanges } from '../../src/sources/watch.ts';
import { silentLogger } from '../../src/util/log.ts';

async function tempDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-watch-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A watcher on `path`, and `after(act)`: the changes reported once `act` is done and its events have settled. */
async function watcher(t: ExecutionContext, path: string, links: LinkPolicy = 'inside'): Promise<(act: () => Promise<unknown>) => Promise<{ files: string[]; all: boolean }>> {
  const seen: WatchedChanges[] = [];
  const w = await ManifestWatcher.start(path, { logger: silentLogger(), debounceMs: 30, onChange: (c) => seen.push(c), links });
  t.teardown(() => w.close());
  return async (act) => {
    seen.length = 0;
    await act();
    const deadline = Date.now() + 2000;
    while (seen.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 300));
    return { files: [...new Set(seen.flatMap((c) => [...c.files]))].sort(), all: seen.some((c) => c.all) };
  };
}

test('a file written, replaced by rename or removed is reported by its path; temp and other files are not', async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'a.yaml'), 'x');
  const after = await watcher(t, dir);
  t.deepEqual(await after(() => writeFile(join(dir, 'a.yaml'), 'y')), { files: [join(dir, 'a.yaml')], all: false });
  t.deepEqual(
    await after(async () => {
      await writeFile(join(dir, '.a.yaml.swp'), 'z');
      await rename(join(dir, '.a.yaml.swp'), join(dir, 'a.yaml'));
      await writeFile(join(dir, 'notes.txt'), 'n');
    }),
    { files: [join(dir, 'a.yaml')], all: false },
  );
  t.deepEqual(await after(() => unlink(join(dir, 'a.yaml'))), { files: [join(dir, 'a.yaml')], all: false });
});

test('a folder created is reported as all, and is watched from then on', async (t) => {
  const dir = await tempDir(t);
  const after = await watcher(t, dir);
  t.deepEqual(await after(() => mkdir(join(dir, 'sub'))), { files: [], all: true });
  t.deepEqual(await after(() => writeFile(join(dir, 'sub', 'b.json'), '{}')), { files: [join(dir, 'sub', 'b.json')], all: false });
  t.deepEqual(await after(() => rm(join(dir, 'sub'), { recursive: true })), { files: [join(dir, 'sub', 'b.json')], all: true });
});

test('a symlinked manifest file out of the folder is reported when its target changes, when external links are followed', async (t) => {
  const dir = await tempDir(t);
  const outside = await tempDir(t);
  await writeFile(join(outside, 'real.yaml'), 'x');
  await symlink(join(outside, 'real.yaml'), join(dir, 'svc.yaml'));
  const after = await watcher(t, dir, 'external');
  t.deepEqual(await after(() => writeFile(join(outside, 'real.yaml'), 'y')), { files: [join(dir, 'svc.yaml')], all: false });
});

test('the ..data swap of a ConfigMap volume is reported as all', async (t) => {
  const dir = await tempDir(t);
  await mkdir(join(dir, '..2026_01'));
  await writeFile(join(dir, '..2026_01', 'svc.yaml'), 'x');
  await symlink('..2026_01', join(dir, '..data'));
  await symlink(join('..data', 'svc.yaml'), join(dir, 'svc.yaml'));
  const after = await watcher(t, dir);
  const swapped = await after(async () => {
    await mkdir(join(dir, '..2026_02'));
    await writeFile(join(dir, '..2026_02', 'svc.yaml'), 'y');
    await symlink('..2026_02', join(dir, '..data_tmp'));
    await rename(join(dir, '..data_tmp'), join(dir, '..data'));
  });
  t.true(swapped.all);
});

test('watching a single file reports it alone', async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'svc.yaml'), 'x');
  const after = await watcher(t, join(dir, 'svc.yaml'));
  t.deepEqual(await after(() => writeFile(join(dir, 'other.yaml'), 'o')), { files: [], all: false });
  t.deepEqual(await after(() => writeFile(join(dir, 'svc.yaml'), 'y')), { files: [join(dir, 'svc.yaml')], all: false });
});
