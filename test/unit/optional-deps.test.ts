/**
 * The bench's optional packages (src/bench/optional.ts): the progress bar
 * and the chart renderer are optionalDependencies, never loaded by the
 * commands' static import graph (so `drover run` starts without them), and
 * a missing one is one line on stderr, not a failure.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { loadOptional, missingNote } from '../../src/bench/optional.ts';

const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { dependencies: Record<string, string>; optionalDependencies?: Record<string, string> };
const OPTIONAL = ['cli-progress', 'vega', 'vega-lite'];

/** Static value imports of a module (not `import type`, not `import()`), as written. */
function staticImports(file: string): string[] {
  const text = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  const out: string[] = [];
  for (const m of text.matchAll(/^(?:import|export)\s+(?!type\b)(?:[^'";]*?\sfrom\s*)?['"]([^'"]+)['"]/gm)) out.push(m[1]!);
  return out;
}

/** Every package the modules reachable from `entry` by static value imports import. */
function packagesLoadedBy(entry: string): Map<string, string> {
  const seen = new Set<string>();
  const packages = new Map<string, string>();
  const stack = [normalize(entry)];
  while (stack.length > 0) {
    const file = stack.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const spec of staticImports(file)) {
      if (spec.startsWith('.')) stack.push(normalize(join(dirname(file), spec)));
      else if (!spec.startsWith('node:')) packages.set(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!, file);
    }
  }
  return packages;
}

test('the progress bar and chart packages are optional dependencies, not runtime ones', (t) => {
  for (const name of OPTIONAL) {
    t.false(name in pkg.dependencies, name);
    t.truthy(pkg.optionalDependencies?.[name], name);
  }
});

test("the CLI's static import graph loads no optional package: only drover bench imports them, when it needs them", (t) => {
  const loaded = packagesLoadedBy('src/cli/main.ts');
  t.true(loaded.has('commander'), 'the walk follows the imports');
  for (const name of OPTIONAL) t.false(loaded.has(name), `${name} is imported statically by ${loaded.get(name)}`);
});

test('a missing optional package is undefined and one line, said once, with how to install it', async (t) => {
  const lines: string[] = [];
  const stream = { write: (s: string) => lines.push(s) };
  const load = () => import('drover-no-such-package' as string);
  t.is(await loadOptional(['drover-no-such-package'], 'no widgets', load, stream), undefined);
  t.is(await loadOptional(['drover-no-such-package'], 'no widgets', load, stream), undefined);
  t.deepEqual(lines, [missingNote(['drover-no-such-package'], 'no widgets')]);
  t.is(lines[0], 'drover bench: no widgets: drover-no-such-package is not installed (npm install drover-no-such-package)\n');
});

test('an optional package that is there loads; any other error is thrown', async (t) => {
  const stream = { write: () => t.fail('nothing to say') };
  const mod = await loadOptional(['cli-progress'], 'no progress bar', () => import('cli-progress'), stream);
  t.is(typeof mod?.default.MultiBar, 'function');
  await t.throwsAsync(loadOptional(['cli-progress'], 'x', () => Promise.reject(new Error('broken')), stream), { message: 'broken' });
  // A missing module other than the package asked for is not "missing": it is thrown.
  const err = await loadOptional(['cli-progress'], 'x', () => import('drover-other-package' as string), stream).then(
    () => undefined,
    (e: unknown) => e as { code?: string; message?: string },
  );
  t.is(err?.code, 'ERR_MODULE_NOT_FOUND');
  t.regex(err?.message ?? '', /drover-other-package/);
});
