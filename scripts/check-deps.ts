/**
 * `npm run check:deps`: drover's architecture floors (.dependency-cruiser.cjs)
 * checked over src/ by dependency-cruiser, one line per violation:
 *
 *   no-mode-to-mode: src/modes/ipvs/backend.ts → src/modes/iptables/plan.ts
 *   no-circular: src/a.ts → src/b.ts → src/a.ts
 *
 * then a count per rule. Exits 0 when every rule holds, 1 when one does not,
 * 2 when the checker itself failed (its message on stderr).
 *
 *   tsx scripts/check-deps.ts [DEPCRUISE]   # default: node_modules/.bin/depcruise
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/** One violation as `depcruise --output-type json` reports it (summary.violations). */
interface Violation {
  readonly from: string;
  readonly to: string;
  readonly rule: { readonly name: string };
  /** For a cycle: the modules of the cycle after `from`, each with its own path. */
  readonly cycle?: ReadonlyArray<{ readonly name: string } | string>;
}

/** "rule: from → to", or for a cycle "rule: a → b → … → a": one line. */
export function violationLine(v: Violation): string {
  const path = v.cycle !== undefined && v.cycle.length > 0 ? [v.from, ...v.cycle.map((c) => (typeof c === 'string' ? c : c.name))] : [v.from, v.to];
  return `${v.rule.name}: ${path.join(' → ')}`;
}

/** The report's lines: one per violation (sorted, so that two runs compare), then the count per rule. */
export function reportLines(violations: readonly Violation[]): string[] {
  const lines = [...new Set(violations.map(violationLine))].sort();
  const byRule = new Map<string, number>();
  for (const line of lines) {
    const rule = line.slice(0, line.indexOf(':'));
    byRule.set(rule, (byRule.get(rule) ?? 0) + 1);
  }
  const counts = [...byRule].map(([rule, n]) => `${rule} ${n}`).join(', ');
  return [...lines, lines.length === 0 ? 'dependency rules hold' : `${lines.length} dependency violations (${counts})`];
}

async function main(): Promise<number> {
  const root = join(fileURLToPath(import.meta.url), '..', '..');
  const bin = process.argv[2] ?? join(root, 'node_modules', '.bin', 'depcruise');
  let stdout: string;
  try {
    ({ stdout } = await promisify(execFile)(bin, ['--config', '.dependency-cruiser.cjs', '--output-type', 'json', 'src'], { cwd: root, maxBuffer: 256 * 1024 * 1024 }));
  } catch (err) {
    // depcruise exits non-zero when there are violations, with the JSON on stdout all the same.
    const e = err as { stdout?: string; stderr?: string; message: string };
    if (!e.stdout) {
      process.stderr.write(`check-deps: ${e.stderr?.trim() || e.message}\n`);
      return 2;
    }
    stdout = e.stdout;
  }
  const lines = reportLines((JSON.parse(stdout) as { summary: { violations: Violation[] } }).summary.violations);
  process.stdout.write(`${lines.join('\n')}\n`);
  return lines.length > 1 ? 1 : 0;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) process.exitCode = await main();
