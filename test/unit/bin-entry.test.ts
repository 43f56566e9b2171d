/**
 * bin/drover.js picks the compiled CLI (dist/) when it exists, else the
 * sources; DROVER_ENTRY chooses. Run on a copy of bin/drover.js in a
 * temporary tree whose dist/ and src/ entry points only print their name.
 */
import test from 'ava';
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** A tree with bin/drover.js, src/cli/main.ts and, if `built`, dist/cli/main.js; the result of running bin/drover.js in it. */
async function runIn(built: boolean, entry: string | undefined) {
  const dir = await mkdtemp(join(tmpdir(), 'drover-bin-'));
  try {
    await mkdir(join(dir, 'bin'));
    await copyFile(join(ROOT, 'bin/drover.js'), join(dir, 'bin/drover.js'));
    await symlink(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
    await mkdir(join(dir, 'src/cli'), { recursive: true });
    await writeFile(join(dir, 'src/cli/main.ts'), "const from: string = 'src';\nprocess.stdout.write(`${from}\\n`);\n");
    await writeFile(join(dir, 'package.json'), '{"type": "module"}\n');
    if (built) {
      await mkdir(join(dir, 'dist/cli'), { recursive: true });
      await writeFile(join(dir, 'dist/cli/main.js'), "process.stdout.write('dist\\n');\n");
    }
    const env = { ...process.env };
    delete env.DROVER_ENTRY;
    if (entry !== undefined) env.DROVER_ENTRY = entry;
    return await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile(process.execPath, [join(dir, 'bin/drover.js')], { env, timeout: 30_000 }, (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr });
      });
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

test('without DROVER_ENTRY: dist/ when built, else the sources', async (t) => {
  t.like(await runIn(true, undefined), { code: 0, stdout: 'dist\n' });
  t.like(await runIn(false, undefined), { code: 0, stdout: 'src\n' });
});

test('DROVER_ENTRY=src runs the sources even when built; DROVER_ENTRY=dist runs dist/', async (t) => {
  t.like(await runIn(true, 'src'), { code: 0, stdout: 'src\n' });
  t.like(await runIn(true, 'dist'), { code: 0, stdout: 'dist\n' });
});

test('DROVER_ENTRY=dist without a build, or an unknown value, is one line and exit 1', async (t) => {
  t.like(await runIn(false, 'dist'), {
    code: 1,
    stdout: '',
    stderr: 'drover: DROVER_ENTRY=dist, but dist/cli/main.js does not exist: run npm run build\n',
  });
  t.like(await runIn(true, 'build'), {
    code: 1,
    stdout: '',
    stderr: 'drover: DROVER_ENTRY is "build"; use dist (the build in dist/) or src (the TypeScript sources)\n',
  });
});
