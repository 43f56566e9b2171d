/**
 * nftables mode's trace (src/modes/nftables/trace.ts) on the table a full
 * sync writes, without a kernel: the packet-flow table
 * (test/support/packet-flow.ts), as packet-flow.test.ts runs it for
 * iptables mode; then the layout check and the text it prints.
 */
import test from 'ava';
import { trace } from '../../src/inspect/trace.ts';
import { formatTrace } from '../../src/inspect/trace-format.ts';
import { nftTraceContext, nftTraceFormat, readLayout } from '../../src/modes/nftables/trace.ts';
import type { LiveTable } from '../../src/modes/nftables/live.ts';
import { NftEvalError, parseRule, partHolds } from '../../src/modes/nftables/rule-eval.ts';
import { backendIP, CASES, CLIENTS, CLUSTER_CIDR, NODE_ADDRESSES, NODE_IP, STATE, checkTraced } from '../support/packet-flow.ts';
import { plannedTable } from '../support/nft-table.ts';

const RENDER = { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false };
const live = plannedTable(STATE, RENDER, [NODE_IP]);
const LOCAL = new Set(NODE_ADDRESSES);
const { ctx, note } = nftTraceContext(live, LOCAL);

test('the table a sync writes reads as drover layout, with the cluster CIDR of its comments', (t) => {
  t.is(note, '');
  t.deepEqual(readLayout(live).render, RENDER);
});

for (const c of CASES) {
  test(`nftables mode, traced: ${c.what}`, (t) => {
    const src = CLIENTS.find((x) => x.name === c.from)!.ip;
    checkTraced(t, c, trace(ctx, { src, dst: c.host, dport: c.port, proto: 'tcp' }).outcomes);
  });
}

/** `live` with set or map `name`'s elements changed by `edit`, or a chain's comments by `chain`. */
function edited(name: string, edit: (e: Map<string, string | undefined>) => void): LiveTable {
  const sets = new Map(live.sets);
  const s = live.sets.get(name)!;
  const elements = new Map(s.elements);
  edit(elements);
  sets.set(name, { ...s, elements });
  return { ...live, sets };
}
function withComments(chain: string, edit: (c: (string | null)[]) => (string | null)[]): LiveTable {
  const chains = new Map(live.chains);
  const c = live.chains.get(chain)!;
  chains.set(chain, { ...c, comments: edit([...c.comments]) });
  return { ...live, chains };
}
const outcomesOf = (table: LiveTable, src: string, dst: string, dport: number) => trace(nftTraceContext(table, LOCAL).ctx, { src, dst, dport, proto: 'tcp' }).outcomes;
const summary = (os: ReturnType<typeof outcomesOf>) =>
  os.map((o) => [o.verdict.kind === 'dnat' ? `${o.verdict.ip}:${o.verdict.port}` : o.verdict.kind, o.probability.toFixed(4), o.masqueraded]);

test('an affinity entry wins over the slots: one endpoint, with probability 1', (t) => {
  const table = edited('affinity', (e) => e.set('192.168.100.2 . 10.96.0.14 . tcp . 80', '10.244.1.3 . 8080'));
  t.deepEqual(summary(outcomesOf(table, '192.168.100.2', '10.96.0.14', 80)), [['10.244.1.3:8080', '1.0000', true]]);
  // Another client has no entry: every endpoint.
  t.is(outcomesOf(table, '192.168.100.3', '10.96.0.14', 80).length, 3);
});

test('an empty slot: that draw falls through pick and leaves the connection untouched', (t) => {
  const table = edited('endpoints', (e) => e.delete('10.96.0.10 . tcp . 80 . 1'));
  const os = outcomesOf(table, '10.244.9.2', '10.96.0.10', 80);
  t.deepEqual(summary(os), [
    ['10.244.1.2:8080', '0.3333', false],
    ['10.244.1.4:8080', '0.3333', false],
    ['untouched', '0.3333', false],
  ]);
  t.true(os[2]!.notes.some((n) => n.includes('slot 1 of 3 of 10.96.0.10 . tcp . 80 is empty in @endpoints')));
});

test('hairpin: an endpoint that reaches itself through its Service is masqueraded, only then', (t) => {
  t.deepEqual(summary(outcomesOf(live, '10.244.1.2', '10.96.0.10', 80)), [
    ['10.244.1.2:8080', '0.3333', true],
    ['10.244.1.3:8080', '0.3333', false],
    ['10.244.1.4:8080', '0.3333', false],
  ]);
});

test('from the node itself: filter-output (priority -110) rejects a frontend without endpoints before nat-output', (t) => {
  const r = trace(ctx, { src: NODE_IP, dst: '10.96.0.13', dport: 80, proto: 'tcp' });
  t.is(r.origin, 'node');
  t.deepEqual(r.outcomes.map((o) => [o.verdict, o.steps.map((s) => s.chain)]), [
    [{ kind: 'reject', table: 'ip drover', chain: 'endpoints-check', line: 1 }, ['filter-output', 'endpoints-check']],
  ]);
});

test('a chain that is not the layout is said in the note; the rules still run by their comments', (t) => {
  const table = withComments('pick', (c) => c.filter((x) => x !== 'one of 3 endpoints, any protocol'));
  const { note } = nftTraceContext(table, LOCAL);
  t.is(note, "drover: table ip drover is not drover's layout for the endpoint counts and affinity timeouts its sets show (chains missing or with other rules: pick): rules are evaluated by their comments and the answer may be wrong\n");
  t.deepEqual(summary(outcomesOf(table, '10.244.9.2', '10.96.0.10', 80)), [['untouched', '1.0000', false]]);
});

test('a rule with a comment the layout does not have cannot be evaluated', (t) => {
  const table = withComments('services', (c) => ['hand-made', ...c]);
  t.deepEqual(
    outcomesOf(table, '10.244.9.2', '10.96.0.10', 80).map((o) => o.verdict),
    [{ kind: 'unknown', table: 'ip drover', chain: 'services', line: 1, reason: 'no rule of the layout has the comment "hand-made" in services' }],
  );
});

test('no table: the note says so, and nothing takes the connection', (t) => {
  const none: LiveTable = { exists: false, sets: new Map(), chains: new Map() };
  const { ctx: c, note: n } = nftTraceContext(none, LOCAL);
  t.is(n, "drover: no table ip drover: nothing of drover's takes the connection\n");
  t.deepEqual(trace(c, { src: '10.244.9.2', dst: '10.96.0.10', dport: 80, proto: 'tcp' }).outcomes.map((o) => o.verdict.kind), ['untouched']);
});

test('--masquerade-all with a cluster CIDR reads back from the comments', (t) => {
  const render = { clusterCIDR: '10.244.0.0/16', masqueradeAll: true };
  const table = plannedTable(STATE, render, [NODE_IP]);
  t.deepEqual(readLayout(table).render, render);
  t.is(nftTraceContext(table, LOCAL).note, '');
  t.deepEqual([...new Set(outcomesOf(table, '10.244.9.2', '10.96.0.10', 80).map((o) => o.masqueraded))], [true]);
});

test('the text of a trace: externalTrafficPolicy Local from outside', (t) => {
  t.is(
    formatTrace(trace(ctx, { src: '172.16.5.2', dst: NODE_IP, dport: 30081, proto: 'tcp' }), nftTraceFormat),
    `trace 172.16.5.2 -> 192.168.100.1:30081/tcp, a new connection from outside the node: nat PREROUTING

ip drover nat-prerouting
  rule 1  jump services comment "services"
ip drover services
  rule 5  ip daddr . meta l4proto . th dport @external-local goto external-local comment "externalTrafficPolicy Local"
ip drover external-local
  rule 5  ip daddr . meta l4proto . th dport @local-endpoint-count-1 dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 1 map @local-endpoints comment "one of 1 local endpoint, any protocol"   [slot 0 of 1]
ip drover filter-forward
  rule 2  ct state new jump endpoints-check comment "frontends without endpoints"
ip drover nat-postrouting
  rule 1  jump masquerading comment "masquerade"
ip drover masquerading
  rule 2  meta mark & 0x00004000 == 0 return comment "not marked for masquerade"

endpoints (probability for a new connection):
  10.244.1.2:8080        100.00%  not masqueraded
verdict: DNAT to 1 endpoint, not masqueraded
`,
  );
});

test('the text of a trace: a LoadBalancer IP from outside its source range', (t) => {
  t.is(
    formatTrace(trace(ctx, { src: '172.16.5.2', dst: '198.51.100.10', dport: 80, proto: 'tcp' }), nftTraceFormat),
    `trace 172.16.5.2 -> 198.51.100.10:80/tcp, a new connection from outside the node: nat PREROUTING

ip drover nat-prerouting
  rule 1  jump services comment "services"
ip drover services
  rule 2  ip daddr . meta l4proto . th dport @firewall ip daddr . meta l4proto . th dport . ip saddr != @firewall-allow drop comment "client not in loadBalancerSourceRanges"

verdict: DROPped (ip drover services rule 2)
`,
  );
});

test('rule-eval: syntax outside the layout is an NftEvalError, not a guess', (t) => {
  for (const text of ['ip daddr 10.0.0.1 counter accept', 'dnat ip to 10.0.0.1:80', 'meta mark set meta mark & 0x1', 'tcp dport 80 accept', 'vmap @x']) {
    t.throws(() => parseRule(text), { instanceOf: NftEvalError }, text);
  }
  t.notThrows(() => parseRule('meta l4proto udp ip saddr != 10.0.0.0/8 ct status dnat masquerade random persistent'));
});

test('rule-eval: interval parts hold by prefix or range, values by equality', (t) => {
  t.deepEqual(
    [partHolds('192.168.100.0/24', '192.168.100.7'), partHolds('192.168.100.0/24', '192.168.101.7'), partHolds('10.0.0.1-10.0.0.9', '10.0.0.5'), partHolds('80-90', '85'), partHolds('80-90', '91'), partHolds('tcp', 'tcp')],
    [true, false, true, true, false, true],
  );
});
