/**
 * The bench's optional packages: the progress bar (cli-progress) and the
 * chart renderer (vega, vega-lite) are `optionalDependencies` of drover,
 * loaded only by `drover bench` (dynamic `import()`), so that `drover run`
 * and a daemon install do without them. When one is missing the bench says
 * so in one line on stderr, once per package, and goes on without it: its
 * numbers are written all the same.
 */

const warned = new Set<string>();

/** True for the error of `import()` of a package that is not installed (Node.js: ERR_MODULE_NOT_FOUND naming it). */
function isMissing(err: unknown, name: string): boolean {
  const e = err as { code?: unknown; message?: unknown };
  return e?.code === 'ERR_MODULE_NOT_FOUND' && typeof e.message === 'string' && e.message.includes(`'${name}'`);
}

/**
 * The one-line note for a missing optional package: what the bench does
 * without it, and how to install it.
 */
export function missingNote(packages: readonly string[], without: string): string {
  return `drover bench: ${without}: ${packages.join(' and ')} ${packages.length === 1 ? 'is' : 'are'} not installed (npm install ${packages.join(' ')})\n`;
}

/**
 * Import the optional packages `packages` (all or none).
 * @param without what the bench does without them, e.g. "no SVG charts"; written once per package set to `stream` when one is missing.
 * @param load the imports, e.g. `() => Promise.all([import('vega'), import('vega-lite')])`.
 * @returns what `load` resolves to, or undefined when one of `packages` is not installed.
 * @throws any other error of `load` (a package that is there but fails to load).
 */
export async function loadOptional<T>(packages: readonly string[], without: string, load: () => Promise<T>, stream: { write(s: string): unknown } = process.stderr): Promise<T | undefined> {
  try {
    return await load();
  } catch (err) {
    if (!packages.some((p) => isMissing(err, p))) throw err;
    const key = packages.join(' ');
    if (!warned.has(key)) {
      warned.add(key);
      stream.write(missingNote(packages, without));
    }
    return undefined;
  }
}
