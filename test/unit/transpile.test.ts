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

test('relative imports of .ts, .mts and .cts files point at .js, .mjs and .cjs; nothing else changes', (t) => {
  const code = [
    'import { a } from "./a.ts";',
    'import "../side.ts";',
    'export * from "./b/c.ts";',
    'export { d } from "./d.mts";',
    'const e = await import("./e.cts");',
    'import f from "node:fs";',
    'import g from "pkg/x.ts";',
    'const path = "./not-an-import.ts";',
    'const text = `import x from "./in-a-string.js"`;',
  ].join('\n');
  t.is(
    rewrite(code),
    [
      'import { a } from "./a.js";',
      'import "../side.js";',
      'export * from "./b/c.js";',
      'export { d } from "./d.mjs";',
      'const e = await import("./e.cjs");',
      'import f from "node:fs";',
      'import g from "pkg/x.ts";',
      'const path = "./not-an-import.ts";',
      'const text = `import x from "./in-a-string.js"`;',
    ].join('\n'),
  );
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
