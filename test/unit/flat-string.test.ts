import test from 'ava';
import { flatString, flatStrings } from '../../src/util/flat-string.ts';

test('flatString and flatStrings keep the text as it is', (t) => {
  const key = 'ns/svc:http';
  const rule = `-m comment --comment "${key} -> 10.0.0.1:8080" -j KUBE-SEP-${'A'.repeat(16)}`;
  t.is(flatString(rule), rule);
  t.is(flatString(''), '');
  const rules = [rule, '', `${key}${key}`];
  t.is(flatStrings(rules), rules);
  t.deepEqual(rules, [rule, '', 'ns/svc:httpns/svc:http']);
});
