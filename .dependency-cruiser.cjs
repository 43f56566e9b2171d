/**
 * drover's architecture floors, checked by `npm run check:deps`
 * (dependency-cruiser): the import rules of the layers
 * `sources/ → model/ → proxier/ → modes/ → kernel/`, with inspect/,
 * server/ and bench/ on top and cli/ at the very top. Type-only imports
 * count as imports. The rules, and nothing else:
 * - no circular imports in src/;
 * - nothing outside src/cli/ imports src/cli/;
 * - a mode (src/modes/<mode>/) imports neither src/bench/ nor another mode
 *   (src/modes/shared/ and the files in src/modes/ itself are not modes);
 * - the kernel libraries (src/kernel/) import no mode, no proxier, no
 *   source and no command;
 * - nothing under src/ imports test/.
 */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'An import cycle in src/: each module of it can only be understood, tested and moved with all the others.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'no-cli-below-cli',
      comment: 'src/cli/ is the top of the tree: only the commands import it (options live in src/config/, errors in src/errors.ts).',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/cli/' },
      to: { path: '^src/cli/' },
    },
    {
      name: 'no-bench-in-modes',
      comment: 'A mode does not import the bench: its harness lives in src/bench/modes/.',
      severity: 'error',
      from: { path: '^src/modes/[^/]+/', pathNot: '^src/modes/shared/' },
      to: { path: '^src/bench/' },
    },
    {
      name: 'no-mode-to-mode',
      comment: 'A mode does not import another mode: what two modes share sits in src/modes/shared/ or lower (src/kernel/, src/config/).',
      severity: 'error',
      from: { path: '^src/modes/([^/]+)/', pathNot: '^src/modes/shared/' },
      to: { path: '^src/modes/[^/]+/', pathNot: '^src/modes/($1|shared)/' },
    },
    {
      name: 'no-upward-from-kernel',
      comment: 'A kernel library imports no mode, no proxier, no source and no command.',
      severity: 'error',
      from: { path: '^src/kernel/' },
      to: { path: '^src/(modes|proxier|sources|cli)/' },
    },
    {
      name: 'no-test-from-src',
      comment: 'drover itself never imports its tests or their support code.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^test/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.mjs', '.js', '.json'] },
  },
};
