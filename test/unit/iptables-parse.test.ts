import test from 'ava';
import { parseSave } from '../../src/kernel/iptables/parse.ts';

test('iptables-save parsing: rules, policies, counters, line numbers', (t) => {
  const dump = parseSave('# c\n*nat\n:PREROUTING ACCEPT [3:180]\n:KUBE-X - [0:0]\n[5:300] -A PREROUTING -j KUBE-X\n-A KUBE-X -j RETURN\nCOMMIT\n');
  t.deepEqual(dump.get('nat')!.get('PREROUTING'), { policy: 'ACCEPT', rules: ['-j KUBE-X'], lines: [5] });
  t.deepEqual(dump.get('nat')!.get('KUBE-X'), { policy: '-', rules: ['-j RETURN'], lines: [6] });
});

test('a quoted comment holding a newline stays inside its rule', (t) => {
  const dump = parseSave('*nat\n:DOCKER - [0:0]\n:KUBE-SERVICES - [0:0]\n-A DOCKER -m comment --comment "hello\n-A KUBE-SERVICES -j ACCEPT" -j RETURN\nCOMMIT\n');
  t.deepEqual(dump.get('nat')!.get('KUBE-SERVICES')!.rules, []);
  t.deepEqual(dump.get('nat')!.get('DOCKER')!.rules, ['-m comment --comment "hello\n-A KUBE-SERVICES -j ACCEPT" -j RETURN']);
  t.deepEqual(parseSave('*nat\n:C - [0:0]\n-A C -m comment --comment "say \\"hi\\"" -j RETURN\nCOMMIT\n').get('nat')!.get('C')!.rules, [
    '-m comment --comment "say \\"hi\\"" -j RETURN',
  ]);
});
