/**
 * scripts/transpile.mjs, the builder of npm test's tree and the guest's: its
 * import rewrite (exact text), and a small tree transpiled and run.
 */
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
// @ts-expect-error: a plain .mjs script without types
import { rewriteImports } from '../../scripts/transpile.mjs';

const rewrite = rewriteImports as (code: string) => string;
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Built at run time: written out in this file, these texts would themselves
 * be rewritten when this test is transpiled, and the test would compare a
 * rewritten input with its expected output.
 */
const TS = '.t' + 's';

test('relative imports of .ts, .mts and .cts files point at .js, .mjs and .cjs; nothing else changes', (t) => {
  const lines = (ext: (kind: string) => string) => [
    `import { a } from "./a${ext('')}";`,
    `import "../side${ext('')}";`,
    `export * from "./b/c${ext('')}";`,
    `export { d } from "./d${ext('m')}";`,
    `const e = await import("./e${ext('c')}");`,
  ];
  const untouched = [
    'import f from "node:fs";',
    `import g from "pkg/x${TS}";`,
    `const path = "./not-an-import${TS}";`,
    `const list = Array.from("./a-string${TS}");`,
  ];
  // A limit, where tsc differs: text that reads as an import is rewritten inside a string too (the sources have none but this file's).
  const lookalike = (ext: string) => `const text = \`a from "./in-a-template${ext}"\`;`;
  const code = [...lines((k) => `.${k}${TS.slice(1)}`), ...untouched, lookalike(TS)].join('\n');
  t.is(rewrite(code), [...lines((k) => `.${k}js`), ...untouched, lookalike('.js')].join('\n'));
});

test('a module of src/ and what it imports, transpiled, run with plain Node.js', async (t) => {
  const out = await mkdtemp(join(tmpdir(), 'drover-transpile-'));
  t.teardown(() => rm(out, { recursive: true, force: true }));
  execFileSync(process.execPath, [join(ROOT, 'scripts/transpile.mjs'), out, 'src'], { cwd: ROOT });
  const js = await readFile(join(out, 'src/util/duration.js'), 'utf8');
  t.false(/from "\.{1,2}\/[^"]*\.ts"/.test(js), 'no relative .ts import is left');
  const printed = execFileSync(process.execPath, ['--input-type=module', '-e', `import { parseDurationMs } from ${JSON.stringify(join(out, 'src/util/duration.js'))}; console.log(parseDurationMs('1m30s'))`], { encoding: 'utf8' });
  t.is(printed.trim(), '90000');
});
