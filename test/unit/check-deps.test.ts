import test from 'ava';
import { reportLines, violationLine } from '../../scripts/check-deps.ts';

test('a violation is one line: the rule, then the import', (t) => {
  t.is(
    violationLine({ from: 'src/modes/ipvs/rules.ts', to: 'src/modes/iptables/plan.ts', rule: { name: 'no-mode-to-mode' } }),
    'no-mode-to-mode: src/modes/ipvs/rules.ts → src/modes/iptables/plan.ts',
  );
});

test('a cycle is one line, from its first module back to it', (t) => {
  t.is(
    violationLine({ from: 'src/a.ts', to: 'src/b.ts', rule: { name: 'no-circular' }, cycle: [{ name: 'src/b.ts' }, { name: 'src/c.ts' }, { name: 'src/a.ts' }] }),
    'no-circular: src/a.ts → src/b.ts → src/c.ts → src/a.ts',
  );
  t.is(violationLine({ from: 'src/a.ts', to: 'src/b.ts', rule: { name: 'no-circular' }, cycle: ['src/b.ts', 'src/a.ts'] }), 'no-circular: src/a.ts → src/b.ts → src/a.ts');
});

test('the report sorts and deduplicates the lines, then counts them per rule', (t) => {
  const v = (rule: string, from: string, to: string) => ({ from, to, rule: { name: rule } });
  t.deepEqual(
    reportLines([v('no-mode-to-mode', 'src/modes/b/x.ts', 'src/modes/a/y.ts'), v('no-cli-below-cli', 'src/sources/s.ts', 'src/cli/options.ts'), v('no-mode-to-mode', 'src/modes/b/x.ts', 'src/modes/a/y.ts')]),
    [
      'no-cli-below-cli: src/sources/s.ts → src/cli/options.ts',
      'no-mode-to-mode: src/modes/b/x.ts → src/modes/a/y.ts',
      '2 dependency violations (no-cli-below-cli 1, no-mode-to-mode 1)',
    ],
  );
  t.deepEqual(reportLines([]), ['dependency rules hold']);
});
