/**
 * `drover trace` of IPv6 destinations in iptables mode: the IPv6 rules of
 * the dual-stack fixture, written by the dual-stack backend into the
 * in-memory ip6tables and read back as ip6tables-save prints them, walked
 * for connections to the IPv6 ClusterIPs and the NodePort on the node's
 * IPv6 address; and the parser on ip6tables-save's forms.
 */
import test from 'ava';
import { formatTrace } from '../../src/inspect/trace-format.ts';
import { trace, type Packet } from '../../src/inspect/trace.ts';
import { DualStackIptablesBackend } from '../../src/modes/iptables/dual-stack.ts';
import { FakeIptables } from '../../src/kernel/iptables/fake.ts';
import { readTables } from '../../src/kernel/iptables/live.ts';
import { parsePrefix, parseRule, prefixContains } from '../../src/kernel/iptables/rule.ts';
import { loadStatic6Rules, loadStaticRules } from '../../src/modes/shared/kube-chains/static.ts';
import { iptablesTraceContext } from '../../src/modes/shared/kube-chains/trace.ts';
import { buildFrom } from './model-helpers.ts';

const NODE6 = 'fd00:100::1';
const pkt = (src: string, dst: string, dport: number): Packet => ({ src, dst, dport, proto: 'tcp' });
const summary = (r: ReturnType<typeof trace>) => r.outcomes.map((o) => ({ p: Number(o.probability.toFixed(6)), verdict: o.verdict, masq: o.masqueraded }));

/** The trace context of the IPv6 tables after a sync of the dual-stack fixture (cluster CIDR fd00:244::/32). */
async function ipv6Context() {
  const { snapshot } = await buildFrom(['test/fixtures/dualstack/services.yaml']);
  const v6 = new FakeIptables();
  await new DualStackIptablesBackend({
    IPv4: { exec: new FakeIptables(), render: { masqueradeAll: false, clusterCIDR: '10.244.0.0/16' }, statics: loadStaticRules() },
    IPv6: { exec: v6, render: { masqueradeAll: false, clusterCIDR: 'fd00:244::/32', family: 'IPv6' }, statics: loadStatic6Rules() },
    logger: (await import('../../src/util/log.ts')).silentLogger(),
  }).sync(snapshot, { full: true, changed: new Set() });
  return iptablesTraceContext(await readTables(v6), new Set([NODE6]));
}

test('parser: IPv6 prefixes and bracketed DNAT destinations as ip6tables-save prints them', (t) => {
  const r = parseRule('KUBE-SEP-X', '-s fd00:244:1::2/128 -p tcp -m tcp -j DNAT --to-destination [fd00:244:1::2]:8080', new Set());
  t.deepEqual(r.matches[0], { kind: 'src', negate: false, prefix: parsePrefix('fd00:244:1::2/128')! });
  t.deepEqual(r.target, { kind: 'DNAT', ip: 'fd00:244:1::2', port: 8080 });
  t.deepEqual(parseRule('C', '-j DNAT --to-destination fd00:244:1::2', new Set()).target, { kind: 'DNAT', ip: 'fd00:244:1::2' });
  t.deepEqual(parseRule('C', '-j DNAT --to-destination [FD00:244:1:0::2]:80', new Set()).target, { kind: 'DNAT', ip: 'fd00:244:1::2', port: 80 });
  // The wrong form for the family is not guessed at.
  t.is(parseRule('C', '-j DNAT --to-destination [10.1.2.3]:80', new Set()).target.kind, 'unknown');
  t.is(parseRule('C', '-j DNAT --to-destination fd00:::2', new Set()).target.kind, 'unknown');
  // A host address is /128; families never mix.
  t.is(parsePrefix('fd00::1')?.text, 'fd00::1/128');
  t.true(prefixContains(parsePrefix('fd00:244::/32')!, 'fd00:244:1::2'));
  t.false(prefixContains(parsePrefix('fd00:244::/48')!, '10.244.1.2'));
  t.false(prefixContains(parsePrefix('0.0.0.0/0')!, 'fd00:244:1::2'));
});

test('the IPv6 ClusterIP of a dual-stack Service from outside: both IPv6 endpoints, half each, masqueraded', async (t) => {
  const r = trace(await ipv6Context(), pkt('fd00:100::2', 'fd00:96::10', 80));
  t.is(r.origin, 'outside');
  t.deepEqual(summary(r), [
    { p: 0.5, verdict: { kind: 'dnat', ip: 'fd00:244:1::2', port: 8080 }, masq: true },
    { p: 0.5, verdict: { kind: 'dnat', ip: 'fd00:244:1::3', port: 8080 }, masq: true },
  ]);
  const text = formatTrace(r);
  t.regex(text, /^trace fd00:100::2 -> \[fd00:96::10\]:80\/tcp, a new connection from outside the node/);
  t.regex(text, /\[fd00:244:1::2\]:8080 +50\.00%  masqueraded/);
});

test('from a pod of the IPv6 cluster CIDR: not masqueraded; the single-stack IPv6 Service has its one endpoint', async (t) => {
  const ctx = await ipv6Context();
  t.deepEqual(summary(trace(ctx, pkt('fd00:244:2::9', 'fd00:96::20', 80))), [{ p: 1, verdict: { kind: 'dnat', ip: 'fd00:244:1::4', port: 8080 }, masq: false }]);
});

test("the NodePort on the node's IPv6 address: both endpoints, masqueraded; not on ::1; the Service without endpoints is REJECTed", async (t) => {
  const ctx = await ipv6Context();
  t.deepEqual(summary(trace(ctx, pkt('fd00:100::2', NODE6, 30080))), [
    { p: 0.5, verdict: { kind: 'dnat', ip: 'fd00:244:1::2', port: 8080 }, masq: true },
    { p: 0.5, verdict: { kind: 'dnat', ip: 'fd00:244:1::3', port: 8080 }, masq: true },
  ]);
  const fromNode = trace(ctx, pkt('::1', '::1', 30080));
  t.is(fromNode.origin, 'node');
  t.deepEqual(summary(fromNode), [{ p: 1, verdict: { kind: 'untouched' }, masq: false }]);
  t.deepEqual(
    trace(ctx, { src: 'fd00:100::2', dst: 'fd00:96::30', dport: 80, proto: 'udp' }).outcomes.map((o) => o.verdict.kind),
    ['reject'],
  );
});
