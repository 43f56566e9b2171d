/**
 * `npm run build` must give a complete dist/: every file a module loads by a
 * path relative to itself has to be found from the module's compiled copy
 * too. The copy step (scripts/build-copy.ts) runs into a temporary folder;
 * tsc's part is known without running it (src/X.ts becomes dist/X.js).
 */
import test from 'ava';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { copyAssets, isCompiledSource, listFiles, runtimeAssets } from '../../scripts/build-copy.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SRC = join(ROOT, 'src');
const DIST = join(ROOT, 'dist');

/** A path a source module loads relative to a module (itself, or the module that resolves it). */
interface Reference {
  /** The module the path is resolved against, relative to src/. */
  readonly base: string;
  readonly path: string;
  /** Where it was found, for messages. */
  readonly at: string;
}

/**
 * Every literal path resolved against a module's own URL:
 * `new URL('…', import.meta.url)`, and the script names given to topology.ts
 * helperArgv, which resolves them against topology.ts.
 */
async function references(): Promise<Reference[]> {
  const refs: Reference[] = [];
  for (const file of (await listFiles(SRC)).filter(isCompiledSource)) {
    const text = await readFile(join(SRC, file), 'utf8');
    for (const m of text.matchAll(/new URL\(\s*(['"`])([^'"`$]+)\1\s*,\s*import\.meta\.url\s*\)/g)) {
      refs.push({ base: file, path: m[2]!, at: file });
    }
    for (const m of text.matchAll(/helperArgv\(\s*(['"`])([^'"`$]+)\1/g)) {
      refs.push({ base: 'testbed/topology.ts', path: m[2]!, at: file });
    }
  }
  return refs;
}

/** Where tsc writes a compiled module: the same path under dist/, ending in .js. */
const compiledPath = (srcRelative: string) => join(DIST, srcRelative.replace(/\.ts$/, '.js'));

test('the build copies every file under src/ that tsc does not compile, unchanged', async (t) => {
  const out = await mkdtemp(join(tmpdir(), 'drover-build-'));
  try {
    const copied = await copyAssets(SRC, out);
    t.deepEqual(copied, (await listFiles(SRC)).filter((p) => !/\.(?:ts|mts|cts|tsx)$/.test(p)), 'TypeScript, declarations (send-order.d.mts) included, is not copied');
    t.deepEqual(await listFiles(out), copied);
    for (const rel of copied) t.is(await readFile(join(out, rel), 'utf8'), await readFile(join(SRC, rel), 'utf8'), rel);
  } finally {
    await rm(out, { recursive: true, force: true });
  }
});

test('every file a module loads by a relative URL is found from its compiled copy in dist/', async (t) => {
  const refs = await references();
  const named = new Set(refs.map((r) => r.path.split('/').at(-1)));
  for (const known of ['echo-server.mjs', 'probe-cli.mjs', 'prober.mjs', 'static.rules', 'package.json']) {
    t.true(named.has(known), `the scan finds the reference to ${known}`);
  }
  const copied = new Set(await runtimeAssets(SRC));
  for (const ref of refs) {
    const fromSource = resolve(dirname(join(SRC, ref.base)), ref.path);
    const fromBuild = resolve(dirname(compiledPath(ref.base)), ref.path);
    const what = `${ref.at}: ${ref.path}`;
    t.true(existsSync(fromSource), `${what}: ${fromSource} exists`);
    const inBuild = relative(DIST, fromBuild);
    if (inBuild.startsWith('..')) {
      // Outside dist/ (rules/, package.json): the same file as from src/.
      t.is(fromBuild, fromSource, what);
    } else {
      // Inside dist/: a copied file, or a module tsc compiles.
      const source = join(SRC, inBuild);
      t.true(copied.has(inBuild) || (inBuild.endsWith('.js') && existsSync(source.replace(/\.js$/, '.ts'))), `${what}: dist/${inBuild} is built`);
    }
  }
});
