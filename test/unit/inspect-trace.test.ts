import test from 'ava';
import { readFileSync } from 'node:fs';
import { parseSave } from '../../src/kernel/iptables/parse.ts';
import { parseRule, tokenize } from '../../src/kernel/iptables/rule.ts';
import { iptablesTraceContext } from '../../src/modes/shared/kube-chains/trace.ts';
import { formatTrace } from '../../src/inspect/trace-format.ts';
import { trace, type Packet } from '../../src/inspect/trace.ts';

const dump = parseSave(readFileSync(new URL('../fixtures/trace/kube-proxy-style.save', import.meta.url), 'utf8'));
const NODE = '192.168.100.1';
const ctx = iptablesTraceContext(dump, new Set([NODE]));
const pkt = (src: string, dst: string, dport: number, proto: Packet['proto'] = 'tcp'): Packet => ({ src, dst, dport, proto });
const summary = (r: ReturnType<typeof trace>) =>
  r.outcomes.map((o) => ({ p: Number(o.probability.toFixed(6)), verdict: o.verdict, masq: o.masqueraded }));

test('tokenizer keeps quoted comments whole and unescapes', (t) => {
  t.deepEqual(tokenize('-m comment --comment "a \\"b\\" c" -j X'), ['-m', 'comment', '--comment', 'a "b" c', '-j', 'X']);
});

test('parser: normalised iptables-save forms, negations, modules and targets', (t) => {
  const chains = new Set(['KUBE-MARK-MASQ']);
  const r = parseRule('KUBE-SVC-X', '! -s 10.244.0.0/16 -d 10.96.0.10/32 -p tcp -m comment --comment "x y" -m tcp --dport 80 -j KUBE-MARK-MASQ', chains);
  t.deepEqual(r.matches, [
    { kind: 'src', negate: true, prefix: { family: 4, network: 0x0af40000n, bits: 16, text: '10.244.0.0/16' } },
    { kind: 'dst', negate: false, prefix: { family: 4, network: 0x0a60000an, bits: 32, text: '10.96.0.10/32' } },
    { kind: 'proto', negate: false, proto: 'tcp' },
    { kind: 'comment', text: 'x y' },
    { kind: 'dport', negate: false, from: 80, to: 80 },
  ]);
  t.deepEqual(r.target, { kind: 'jump', chain: 'KUBE-MARK-MASQ' });
  t.deepEqual(parseRule('C', '-m mark ! --mark 0x4000/0x4000 -j RETURN', chains).matches, [{ kind: 'mark', negate: true, value: 0x4000, mask: 0x4000 }]);
  t.deepEqual(parseRule('C', '-j MARK --set-xmark 0x4000/0x0', chains).target, { kind: 'MARK', value: 0x4000, mask: 0 });
  t.deepEqual(parseRule('C', '-j MARK --or-mark 0x4000', chains).target, { kind: 'MARK', value: 0x4000, mask: 0x4000 });
  t.deepEqual(parseRule('C', '-p tcp -m tcp -j DNAT --to-destination 10.1.2.3:8080', chains).target, { kind: 'DNAT', ip: '10.1.2.3', port: 8080 });
  t.deepEqual(parseRule('C', '-m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT', chains).matches, [
    { kind: 'set', negate: false, name: 'KUBE-CLUSTER-IP', dirs: ['dst', 'dst'] },
  ]);
  t.deepEqual(parseRule('C', '-m frobnicate --knob 3 -j FROB', chains), {
    chain: 'C',
    text: '-m frobnicate --knob 3 -j FROB',
    matches: [{ kind: 'unknown', text: '-m frobnicate --knob' }, { kind: 'unknown', text: '-m frobnicate 3' }],
    target: { kind: 'unknown', text: 'FROB' },
  });
});

test('a ClusterIP from outside: both endpoints with their probabilities, masqueraded, affinity assumed empty', (t) => {
  const r = trace(ctx, pkt('192.168.100.2', '10.96.0.10', 80));
  t.is(r.origin, 'outside');
  t.deepEqual(summary(r), [
    { p: 0.25, verdict: { kind: 'dnat', ip: '10.244.1.2', port: 8080 }, masq: true },
    { p: 0.75, verdict: { kind: 'dnat', ip: '10.244.1.3', port: 8080 }, masq: true },
  ]);
  t.deepEqual(
    r.outcomes[0]!.steps.map((s) => `${s.table} ${s.chain} ${s.line}`),
    [
      'nat PREROUTING 15',
      'nat KUBE-SERVICES 28',
      'nat KUBE-SVC-WEBWEBWEBWEBWEBW 30',
      'nat KUBE-MARK-MASQ 20',
      'nat KUBE-SVC-WEBWEBWEBWEBWEBW 32',
      'nat KUBE-SEP-AAAAAAAAAAAAAAAA 25',
      'filter FORWARD 41',
      'filter FORWARD 42',
      'filter KUBE-FORWARD 44',
      'nat POSTROUTING 18',
      'nat KUBE-POSTROUTING 22',
      'nat KUBE-POSTROUTING 23',
    ],
  );
  t.regex(formatTrace(r), /note: assumed no affinity entry in KUBE-SEP-AAAAAAAAAAAAAAAA/);
  t.regex(formatTrace(r), /verdict: DNAT to one of 2 endpoints, masqueraded$/m);
});

test('from inside the cluster CIDR: not masqueraded, except hairpin', (t) => {
  const r = trace(ctx, pkt('10.244.1.3', '10.96.0.10', 80));
  t.deepEqual(summary(r).map((o) => o.masq), [false, true]);
});

test('the FORWARD DROP policy drops forwarded traffic that nothing accepts', (t) => {
  const r = trace(ctx, pkt('10.244.1.3', '10.244.9.9', 80));
  t.deepEqual(summary(r), [{ p: 1, verdict: { kind: 'drop', table: 'filter', chain: 'FORWARD', line: 0 }, masq: false }]);
});

test('a ClusterIP with no endpoints is REJECTed in filter KUBE-SERVICES', (t) => {
  const r = trace(ctx, pkt(NODE, '10.96.0.11', 53, 'udp'));
  t.is(r.origin, 'node');
  t.deepEqual(summary(r), [{ p: 1, verdict: { kind: 'reject', table: 'filter', chain: 'KUBE-SERVICES', line: 46 }, masq: false }]);
});

test('what it cannot evaluate it reports, without guessing', (t) => {
  const r = trace(ctx, pkt('192.168.100.2', NODE, 22));
  t.deepEqual(summary(r), [
    {
      p: 1,
      verdict: { kind: 'unknown', table: 'nat', chain: 'DOCKER', line: 19, reason: 'cannot evaluate -i docker0 (interfaces are not traced)' },
      masq: false,
    },
  ]);
});
