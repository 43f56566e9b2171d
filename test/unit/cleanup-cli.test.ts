import test from 'ava';
import { cleanupSummary, keptChainLines } from '../../src/cli/cleanup.ts';

test('a kept chain is one stderr line per rule that jumps to it, naming table, chain and rule', (t) => {
  t.is(
    keptChainLines({
      table: 'nat',
      chain: 'KUBE-SEP-SXIVWICOYRO3J4NJ',
      referencedBy: ['-A KUBE-EXT-XPGD46QRK7WJZT7O -j KUBE-SEP-SXIVWICOYRO3J4NJ', '-A OUTPUT -p tcp -g KUBE-SEP-SXIVWICOYRO3J4NJ'],
    }),
    'drover: nat chain KUBE-SEP-SXIVWICOYRO3J4NJ was emptied but not deleted: a rule drover does not own still jumps to it: -t nat -A KUBE-EXT-XPGD46QRK7WJZT7O -j KUBE-SEP-SXIVWICOYRO3J4NJ\n' +
      'drover: nat chain KUBE-SEP-SXIVWICOYRO3J4NJ was emptied but not deleted: a rule drover does not own still jumps to it: -t nat -A OUTPUT -p tcp -g KUBE-SEP-SXIVWICOYRO3J4NJ\n',
  );
});

test('a rule whose comment holds a newline or a control character stays on one line', (t) => {
  t.is(
    keptChainLines({ table: 'nat', chain: 'KUBE-MARK-MASQ', referencedBy: ['-A DOCKER -m comment --comment "a\nb\u001b[31m" -j KUBE-MARK-MASQ'] }),
    'drover: nat chain KUBE-MARK-MASQ was emptied but not deleted: a rule drover does not own still jumps to it: -t nat -A DOCKER -m comment --comment "a\\u000ab\\u001b[31m" -j KUBE-MARK-MASQ\n',
  );
});

test('the summary names the chains and hook rules removed, in every mode', (t) => {
  t.is(cleanupSummary({ removed: { chain: 7, rule: 4 }, kept: [] }), 'removed 7 chains and 4 hook rules\n');
  t.is(cleanupSummary({ removed: { chain: 5, rule: 4, 'virtual server': 3, link: 1, set: 2 }, kept: [] }), 'removed 5 chains and 4 hook rules\n');
  t.is(cleanupSummary({ removed: {}, kept: [] }), 'removed 0 chains and 0 hook rules\n');
});
