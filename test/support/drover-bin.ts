/**
 * The `drover` command the tests spawn. Where the tests run compiled
 * (`npm test`'s tree, scripts/test.sh, and the IPVS guest's,
 * scripts/vm/build-js.sh: both built by scripts/build-js.sh, with
 * `dist -> src` compiled), it is that tree's bin/drover.js, as it is.
 *
 * Where a test file runs from the sources (`npx ava test/unit/foo.test.ts`),
 * it is bin/drover.js over a compiled copy
 * of this checkout's src/, built once per state of the sources and shared by
 * every test process, so that each spawned CLI starts as the installed
 * (compiled) one does instead of transpiling src/ through tsx again (about
 * half the CPU of every spawn).
 *
 * The copy lives in `$TMPDIR/drover-test-build/HASH/` (HASH: sha256 of the
 * checkout's path and of every file under src/, bin/drover.js and tsconfig.json): `dist/` is src/ with
 * each .ts file transpiled alone (TypeScript's transpileModule, the same
 * per-file view tsx takes; relative `.ts` imports rewritten to `.js`, as
 * tsconfig.build.json does) and every other file copied; `bin/drover.js` is
 * a copy; `package.json`, `rules/` and `node_modules/` are links to the
 * checkout's, so that paths modules resolve against `import.meta.url`
 * (rules/, package.json, bin/drover.js, dist/…/*.mjs) resolve as in a build.
 * Type errors are `npm test`'s tsc's job, not this build's.
 *
 * `DROVER_TEST_ENTRY=src` spawns the checkout's bin/drover.js on the
 * TypeScript sources instead (through tsx).
 */
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { until } from './wait.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SRC = join(ROOT, 'src');

/** Every file under `dir` (relative paths, sorted), links not followed. */
function files(dir: string): string[] {
  const found: string[] = [];
  const walk = (at: string): void => {
    for (const e of readdirSync(at, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(at, e.name));
      else if (e.isFile()) found.push(relative(dir, join(at, e.name)));
    }
  };
  walk(dir);
  return found.sort();
}

/**
 * sha256 (hex, first 16 characters) of the paths and contents the build
 * depends on, and of the checkout itself: its links lead into the checkout
 * (node_modules/, rules/, package.json), so another checkout of the same
 * sources, or one removed since, must not reuse it.
 */
function sourceHash(sources: readonly string[]): string {
  const h = createHash('sha256');
  h.update(`${ROOT}\0`);
  for (const f of sources) h.update(`src/${f}\0`).update(readFileSync(join(SRC, f))).update('\0');
  for (const f of ['bin/drover.js', 'tsconfig.json']) h.update(`${f}\0`).update(readFileSync(join(ROOT, f))).update('\0');
  return h.digest('hex').slice(0, 16);
}

/** Write the build of `sources` into `out` (an empty, new directory). */
async function build(sources: readonly string[], out: string): Promise<void> {
  // Loaded only here: most test processes find the build done.
  const { default: ts } = await import('typescript');
  const compilerOptions: import('typescript').CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    rewriteRelativeImportExtensions: true,
    esModuleInterop: true,
    sourceMap: false,
  };
  for (const f of sources) {
    const from = join(SRC, f);
    const to = join(out, 'dist', f);
    mkdirSync(dirname(to), { recursive: true });
    if (f.endsWith('.ts')) {
      const { outputText } = ts.transpileModule(readFileSync(from, 'utf8'), { fileName: from, compilerOptions });
      writeFileSync(to.replace(/\.ts$/, '.js'), outputText);
    } else cpSync(from, to);
  }
  mkdirSync(join(out, 'bin'));
  cpSync(join(ROOT, 'bin/drover.js'), join(out, 'bin/drover.js'));
  for (const link of ['package.json', 'rules', 'node_modules']) symlinkSync(join(ROOT, link), join(out, link));
  writeFileSync(join(out, 'done'), '');
}

/**
 * Whether the builder holding `lock` still runs: the process named by the
 * lock's `pid` file exists. A lock without that file yet is its builder's
 * for two minutes after it was made (the builder writes it right after).
 */
function builderAlive(lock: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(join(lock, 'pid'), 'utf8'));
  } catch {
    try {
      return Date.now() - statSync(lock).mtimeMs < 120_000;
    } catch {
      return false;
    }
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The path of the shared build's bin/drover.js, building it first when this
 * state of the sources has none. One test process builds (it holds
 * `HASH.lock`, a directory holding its process id); the others wait for its
 * `done` marker, and take the lock over when its builder is gone. A build
 * takes seconds of CPU, minutes of wall time on a loaded machine: the lock
 * is held for as long as its builder runs, however long that is.
 * @throws Error when the build fails or does not appear within five minutes.
 */
async function compiledDrover(): Promise<string> {
  const sources = files(SRC);
  const base = join(tmpdir(), 'drover-test-build');
  const dir = join(base, sourceHash(sources));
  const bin = join(dir, 'bin/drover.js');
  if (existsSync(join(dir, 'done'))) return bin;
  mkdirSync(base, { recursive: true });
  const lock = `${dir}.lock`;
  const take = (): boolean => {
    try {
      mkdirSync(lock);
    } catch {
      return false;
    }
    writeFileSync(join(lock, 'pid'), String(process.pid));
    return true;
  };
  await until(
    `the test build of drover in ${dir}`,
    async () => {
      if (existsSync(join(dir, 'done'))) return true;
      if (!take()) {
        if (builderAlive(lock)) return false;
        rmSync(lock, { recursive: true, force: true });
        if (!take()) return false;
      }
      const tmp = `${dir}.tmp-${process.pid}`;
      try {
        rmSync(tmp, { recursive: true, force: true });
        mkdirSync(tmp);
        await build(sources, tmp);
        rmSync(dir, { recursive: true, force: true });
        renameSync(tmp, dir);
      } finally {
        rmSync(tmp, { recursive: true, force: true });
        rmSync(lock, { recursive: true, force: true });
      }
      return true;
    },
    300_000,
    200,
  );
  return bin;
}

/** True when this module runs compiled (a tree built by scripts/build-js.sh), whose bin/drover.js already starts compiled code. */
const runsCompiled = import.meta.url.endsWith('.js');

/** bin/drover.js to spawn (`node DROVER args…`): the shared compiled build, or with DROVER_TEST_ENTRY=src (or when the tests run compiled) the checkout's. */
export const DROVER: string =
  process.env.DROVER_TEST_ENTRY === 'src' || runsCompiled ? join(ROOT, 'bin/drover.js') : await compiledDrover();
