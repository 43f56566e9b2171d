#!/usr/bin/env node
// Transpile the TypeScript files under some folders of the checkout to plain
// JavaScript, without a type check: the builder of npm test's tree and of the
// IPVS guest's (scripts/build-js.sh). esbuild strips the types of each file
// alone (as tsx does when it runs the sources), and every relative import of
// a .ts, .mts or .cts file is rewritten to .js, .mjs or .cjs, as tsc's
// rewriteRelativeImportExtensions does. `npm run build` (the product's dist/)
// stays tsc's.
//
//   node scripts/transpile.mjs OUT_DIR DIR...
//
// DIR: a folder or a file, relative to the repository. OUT_DIR gets, for each DIR/.../x.ts of the checkout (not .d.ts), its
// OUT_DIR/DIR/.../x.js. Prints nothing on success; exits 1 with esbuild's
// errors otherwise. Takes about a second for the whole checkout, where tsc
// takes 15-20 s to emit the same files.
import { build } from 'esbuild';
import { realpathSync } from 'node:fs';
import { mkdir, readdir, stat, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));

/**
 * The module specifiers of relative imports, as esbuild prints them (double
 * quotes): `from "./a.ts"`, `import "./a.ts"`, `import("./a.ts")`. Only
 * these are rewritten, as tsc rewrites only import and export declarations
 * and import() calls with a literal specifier; not a method named `from` or
 * `import` (`Array.from("./a.ts")`). Two limits, where tsc differs: text
 * inside a string or template that reads as such an import is rewritten
 * too, and an import() of a computed specifier is left as it is (tsc adds a
 * helper that rewrites it at run time). The sources have neither
 * (test/unit/transpile.test.ts builds its examples at run time).
 */
const RELATIVE_TS_IMPORT = /((?<![.\w$])(?:from|import)\s*\(?\s*)"(\.\.?\/[^"\n]*?)\.([cm]?)ts"/g;

/** `code` with each relative import of a .ts/.mts/.cts file pointed at its .js/.mjs/.cjs. Pure. */
export function rewriteImports(code) {
  return code.replace(RELATIVE_TS_IMPORT, (_m, head, path, kind) => `${head}"${path}.${kind}js"`);
}

/** The .ts files under `dir` (absolute; a file: itself if it is one), but .d.ts and those in node_modules. */
async function sources(dir) {
  if (!(await stat(dir)).isDirectory()) return dir.endsWith('.ts') && !dir.endsWith('.d.ts') ? [dir] : [];
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'))
    .map((e) => join(e.parentPath ?? e.path, e.name))
    .filter((f) => !relative(ROOT, f).split('/').includes('node_modules'));
}

async function main() {
  const [out, ...dirs] = process.argv.slice(2);
  if (out === undefined || dirs.length === 0) throw new Error('usage: transpile.mjs OUT_DIR DIR...');
  const files = (await Promise.all(dirs.map((d) => sources(resolve(ROOT, d))))).flat();
  if (files.length === 0) return;
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: files,
    outdir: resolve(out),
    outbase: ROOT,
    bundle: false,
    format: 'esm',
    platform: 'node',
    target: 'es2022',
    tsconfig: join(ROOT, 'tsconfig.json'),
    write: false,
    logLevel: 'error',
  });
  await Promise.all([...new Set(result.outputFiles.map((f) => dirname(f.path)))].map((d) => mkdir(d, { recursive: true })));
  await Promise.all(result.outputFiles.map((f) => writeFile(f.path, rewriteImports(f.text))));
}

if (process.argv[1] !== undefined && realpathSync(resolve(process.argv[1])) === realpathSync(fileURLToPath(import.meta.url))) {
  main().catch((err) => {
    process.stderr.write(`transpile.mjs: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
