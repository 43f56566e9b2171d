/**
 * The second step of `npm run build`, after `tsc -p tsconfig.build.json`:
 * copy every file under src/ that tsc does not emit to the same place under
 * dist/. tsc compiles the TypeScript modules only; drover also starts plain
 * .mjs helpers by path (src/testbed/echo-server.mjs and probe-cli.mjs through
 * topology.ts helperArgv, src/bench/prober.mjs through datapath.ts), which
 * resolve them next to the calling module with `new URL(…, import.meta.url)`.
 * Without this step, the compiled CLI (which bin/drover.js prefers) fails
 * with "Cannot find module …/dist/testbed/echo-server.mjs".
 *
 * Files outside src/ that modules read by path (rules/, package.json) are not
 * copied: dist/ sits at the same depth as src/, so the same relative URL
 * reaches them from both.
 *
 *   tsx scripts/build-copy.ts [SRC_DIR [OUT_DIR]]   # defaults: src dist
 */
import { copyFile, mkdir, readdir } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The repository's root (this script lives in scripts/). */
const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Source files that tsc compiles (its outputs are .js/.mjs/.cjs, written by tsc itself). */
const COMPILED = /\.(?:ts|mts|cts|tsx)$/;

/**
 * Every file under `dir`, at any depth (folders are followed, symbolic links
 * are not).
 * @returns paths relative to `dir`, with `/` separators, sorted.
 * @throws the readdir error when a folder cannot be read.
 */
export async function listFiles(dir: string): Promise<string[]> {
  const found: string[] = [];
  const walk = async (at: string): Promise<void> => {
    for (const e of await readdir(at, { withFileTypes: true })) {
      const path = join(at, e.name);
      if (e.isDirectory()) await walk(path);
      else if (e.isFile()) found.push(relative(dir, path).split(sep).join('/'));
    }
  };
  await walk(dir);
  return found.sort();
}

/** True for a source file that tsc compiles (and so emits itself). */
export function isCompiledSource(path: string): boolean {
  return COMPILED.test(path);
}

/**
 * Every file under `srcDir` that the build must copy rather than compile:
 * all files whose name does not end in .ts, .mts, .cts or .tsx. (A .d.ts
 * file is not copied either: it holds types only.)
 * @returns paths relative to `srcDir`, with `/` separators, sorted.
 * @throws the readdir error when `srcDir` cannot be read.
 */
export async function runtimeAssets(srcDir: string): Promise<string[]> {
  return (await listFiles(srcDir)).filter((p) => !isCompiledSource(p));
}

/**
 * Copy {@link runtimeAssets} of `srcDir` into `outDir`, keeping their paths
 * (creating folders as needed, overwriting older copies).
 * @returns the copied paths, relative to both folders.
 * @throws the fs error of the first file that cannot be read or written.
 */
export async function copyAssets(srcDir: string, outDir: string): Promise<string[]> {
  const assets = await runtimeAssets(srcDir);
  for (const rel of assets) {
    const to = join(outDir, rel);
    await mkdir(dirname(to), { recursive: true });
    await copyFile(join(srcDir, rel), to);
  }
  return assets;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const [srcArg = join(ROOT, 'src'), outArg = join(ROOT, 'dist')] = process.argv.slice(2);
  const copied = await copyAssets(resolve(srcArg), resolve(outArg));
  process.stdout.write(`build: copied ${copied.length} files from ${relative(process.cwd(), resolve(srcArg)) || '.'} to ${relative(process.cwd(), resolve(outArg)) || '.'}: ${copied.join(', ')}\n`);
}
