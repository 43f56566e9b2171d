import test from 'ava';
import { mkdir, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeFileAtomic } from '../../src/util/atomic-file.ts';

test('a durable write creates the folder, replaces the file whole, with its mode, and leaves no temporary file', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-atomic-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'sub', 'state.json');
  await writeFileAtomic(path, 'first\n', { durable: true, mode: 0o600 });
  await writeFileAtomic(path, 'second\n', { durable: true, mode: 0o600 });
  t.is(await readFile(path, 'utf8'), 'second\n');
  t.is((await stat(path)).mode & 0o777, 0o600);
  t.deepEqual(await readdir(join(dir, 'sub')), ['state.json']);
});

test('a write whose rename fails throws and removes its temporary file', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'drover-atomic-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'taken');
  await mkdir(join(path, 'inside'), { recursive: true });
  const err = await t.throwsAsync(writeFileAtomic(path, 'x', { durable: true }));
  t.regex(err!.message, /EISDIR|ENOTEMPTY|EEXIST/);
  t.deepEqual((await readdir(dir)).sort(), ['taken']);
});
