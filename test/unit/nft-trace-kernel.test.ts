/**
 * `drover trace --kernel` in nftables mode, without root: the trace event
 * decoder against the datagrams Linux sent for real probes
 * (test/fixtures/nftables/trace-*.hex, written by capture-trace.ts there),
 * the kernel's path read from them with the table's rules by handle
 * (trace-table.json, the same table listed by nft), its comparison with
 * the evaluator on that same table, its text, and the scripts of the trace
 * chains.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import { trace, type TraceResult } from '../../src/inspect/trace.ts';
import { addTraceScript, compareWithEvaluator, formatKernelPath, kernelPath, probeEvents, removeTraceScript, type KernelProbe } from '../../src/modes/nftables/kernel-path.ts';
import { parseNftJson, type LiveTable } from '../../src/modes/nftables/live.ts';
import { NFT_MSG } from '../../src/kernel/nftables/constants.ts';
import { message, nftType, parseMessages } from '../../src/kernel/nftables/codec.ts';
import { AttrWriter } from '../../src/kernel/netlink/nlattr.ts';
import { ipToBytes, parseIP } from '../../src/model/addr.ts';
import { NftDecodeError } from '../../src/kernel/nftables/errors.ts';
import { decodeTraceDatagram, decodeTraceEvent, type TraceEvent } from '../../src/kernel/nftables/trace-codec.ts';
import { nftTraceContext } from '../../src/modes/nftables/trace.ts';
import { BACKENDS, NODE_ADDRESSES } from '../support/packet-flow.ts';
import { FIXTURE_PROBES, FIXTURE_TAG } from '../fixtures/nftables/capture-trace.ts';

function datagrams(name: string): Buffer[] {
  return readFileSync(new URL(`../fixtures/nftables/trace-${name}.hex`, import.meta.url), 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('d '))
    .map((l) => Buffer.from(l.slice(2), 'hex'));
}

function events(name: string): TraceEvent[] {
  return datagrams(name).flatMap((d) => decodeTraceDatagram(d));
}

function probe(name: string): KernelProbe {
  return FIXTURE_PROBES.find((f) => f.name === name)!.probe;
}

const TABLE: LiveTable = parseNftJson(readFileSync(new URL('../fixtures/nftables/trace-table.json', import.meta.url), 'utf8'));
/** The table as the evaluator read it: before the trace chains were added. */
const BEFORE: LiveTable = { ...TABLE, chains: new Map([...TABLE.chains].filter(([name]) => !name.startsWith('trace-'))) };
const RULES = TABLE.rules!;
const ENDPOINTS = BACKENDS.map((b) => `${b.ip}:8080`);

function evaluate(name: string) {
  const { ctx, note } = nftTraceContext(BEFORE, new Set(NODE_ADDRESSES));
  const p = probe(name);
  return { note, result: trace(ctx, { src: p.src, dst: p.dst, dport: p.dport, proto: p.proto }) };
}

test('every datagram the kernel sent is one NFT_MSG_TRACE event of table ip drover', (t) => {
  for (const f of FIXTURE_PROBES) {
    for (const d of datagrams(f.name)) {
      const msgs = parseMessages(d);
      t.deepEqual(msgs.map((m) => m.type), [nftType(NFT_MSG.TRACE)]);
      const e = decodeTraceEvent(msgs[0]!);
      t.deepEqual([e.family, e.table], [2, 'drover']);
    }
  }
});

test('the events of a refused NodePort probe decode to the path the kernel took, with its headers', (t) => {
  const all = events('nodeport-reject');
  const id = all[0]!.id;
  t.true(all.every((e) => e.id === id), 'one packet: a SYN answered by REJECT');
  t.true(Number.isInteger(all[0]!.handle) && !RULES.has(all[0]!.handle!) && all[0]!.handle! > 0);
  const packet = { src: '192.168.100.2', dst: '192.168.100.1', protocol: 6, sport: 40002, dport: 30083 };
  t.deepEqual(
    all.map(({ id: _id, family: _f, table: _t, ...rest }) => rest),
    [
      // The marking rule's handle is that of the run's own chain (trace-table.json lists the last capture's).
      { chain: 'trace-fixture-mark', type: 'rule', handle: all[0]!.handle, verdict: { code: 'continue' }, packet },
      { chain: 'trace-fixture-mark', type: 'rule', verdict: { code: 'continue' } },
      { chain: 'trace-fixture-mark', type: 'policy', verdict: { code: 'accept' } },
      { chain: 'nat-prerouting', type: 'rule', handle: RULES_BY_COMMENT('nat-prerouting', 'services'), verdict: { code: 'jump', chain: 'services' }, packet },
      { chain: 'services', type: 'rule', handle: RULES_BY_COMMENT('services', 'not a frontend with endpoints'), verdict: { code: 'return' } },
      { chain: 'nat-prerouting', type: 'rule', verdict: { code: 'continue' } },
      { chain: 'nat-prerouting', type: 'policy', verdict: { code: 'accept' } },
      { chain: 'affinity-prerouting', type: 'rule', verdict: { code: 'continue' }, packet },
      { chain: 'affinity-prerouting', type: 'policy', verdict: { code: 'accept' } },
      { chain: 'filter-input', type: 'rule', handle: RULES_BY_COMMENT('filter-input', 'frontends without endpoints'), verdict: { code: 'jump', chain: 'endpoints-check' }, packet },
      { chain: 'endpoints-check', type: 'rule', handle: RULES_BY_COMMENT('endpoints-check', 'frontend has no endpoints'), verdict: { code: 'drop' } },
    ],
  );
});

/** The handle of the rule with `comment` in `chain` of the listed table. */
function RULES_BY_COMMENT(chain: string, comment: string): number {
  const found = [...RULES].filter(([, r]) => r.chain === chain && r.comment === comment);
  if (found.length !== 1) throw new Error(`${found.length} rules with comment ${comment} in ${chain}`);
  return found[0]![0];
}

test('a decoded event carries the mark, and the headers after DNAT and masquerade', (t) => {
  const first = probeEvents(events('node-masquerade'), FIXTURE_TAG, probe('node-masquerade'));
  const marked = first.find((e) => e.chain === 'services' && e.type === 'rule');
  t.is(marked?.mark, 0x4000, 'the masquerade mark set by the ClusterIP rule for traffic from outside the cluster CIDR');
  const out = first.find((e) => e.chain === 'trace-fixture-out' && e.packet);
  t.is(out?.packet?.src, '10.244.0.1', 'masqueraded to the node address towards the endpoint');
  t.true(ENDPOINTS.includes(`${out?.packet?.dst}:${out?.packet?.dport}`));
});

test('decoding refuses another message type and an event without its table', (t) => {
  const [msg] = parseMessages(datagrams('nodeport-reject')[0]!);
  t.throws(() => decodeTraceEvent({ ...msg!, type: nftType(NFT_MSG.NEWGEN) }), { instanceOf: NftDecodeError, message: /is not NFT_MSG_TRACE/ });
  // Cut the message after the nfgenmsg and its first attributes (the type and id): the table and chain are gone.
  const short = Buffer.from(msg!.payload.subarray(0, 4 + 8 + 8 + 8));
  t.throws(() => decodeTraceEvent({ ...msg!, payload: short }), { instanceOf: NftDecodeError, message: /without NFTA_TRACE_(TABLE|CHAIN)/ });
});

test("only the probe's first packet is its path: a TCP connection's later packets are marked too", (t) => {
  const all = events('clusterip');
  const p = probe('clusterip');
  const marks = all.filter((e) => e.chain === 'trace-fixture-mark' && e.packet);
  t.true(marks.length > 1, `the connection's packets were all marked (${marks.length})`);
  const first = probeEvents(all, FIXTURE_TAG, p);
  t.is(first.filter((e) => e.chain === 'trace-fixture-mark' && e.packet).length, 1);
  t.true(first.every((e) => e.id === first[0]!.id));
  t.deepEqual(first[0]!.packet, { src: p.src, dst: p.dst, protocol: 6, sport: p.sport, dport: p.dport });
  t.deepEqual(probeEvents(all, FIXTURE_TAG, { ...p, sport: p.sport + 1 }), [], 'another probe has no events here');
});

test("the kernel's path of a ClusterIP probe: the rules by place and comment, DNAT to one endpoint, not masqueraded; the evaluator has that branch", (t) => {
  const path = kernelPath(events('clusterip'), FIXTURE_TAG, probe('clusterip'), RULES)!;
  t.deepEqual(
    path.steps.filter((s) => s.kind === 'rule').map((s) => `${s.chain} ${s.line} ${s.verdict} ${s.comment}`),
    ['nat-prerouting 1 jump services services', 'services 6 goto pick every endpoint', 'pick 4 accept one of 3 endpoints, any protocol', 'filter-forward 2 jump endpoints-check frontends without endpoints', 'nat-postrouting 1 jump masquerading masquerade', 'masquerading 2 return not marked for masquerade'],
  );
  t.is(path.verdict.kind, 'dnat');
  const v = path.verdict as { ip: string; port: number };
  t.true(ENDPOINTS.includes(`${v.ip}:${v.port}`), `${v.ip}:${v.port} is an endpoint`);
  t.false(path.masqueraded);
  const { note, result } = evaluate('clusterip');
  t.is(note, '');
  const cmp = compareWithEvaluator(result, path);
  t.true(cmp.match, cmp.reason);
  t.deepEqual(result.outcomes[cmp.branch!]!.verdict, { kind: 'dnat', ip: v.ip, port: v.port });
});

test("the kernel's path of a probe from the node itself: masqueraded, and the evaluator agrees", (t) => {
  const path = kernelPath(events('node-masquerade'), FIXTURE_TAG, probe('node-masquerade'), RULES)!;
  t.true(path.masqueraded);
  t.is(path.verdict.kind, 'dnat');
  t.deepEqual(
    path.steps.filter((s) => s.kind === 'rule').map((s) => `${s.chain} ${s.line}`),
    ['filter-output 1', 'nat-output 1', 'services 3', 'services 6', 'pick 4', 'nat-postrouting 1', 'masquerading 3', 'masquerading 4'],
  );
  const cmp = compareWithEvaluator(evaluate('node-masquerade').result, path);
  t.true(cmp.match, cmp.reason);
});

test('a refused probe: REJECT at the rule that dropped it, the same rule as the evaluator; the text says MATCH', (t) => {
  const path = kernelPath(events('nodeport-reject'), FIXTURE_TAG, probe('nodeport-reject'), RULES)!;
  t.deepEqual(path.verdict, { kind: 'reject', table: 'ip drover', chain: 'endpoints-check', line: 1 });
  const { result } = evaluate('nodeport-reject');
  const cmp = compareWithEvaluator(result, path);
  t.deepEqual(cmp, { match: true, branch: 0 });
  const h = (chain: string, comment: string) => String(RULES_BY_COMMENT(chain, comment)).padEnd(4);
  t.is(
    formatKernelPath(path, { from: 'client', result: 'ECONNREFUSED' }, cmp, result),
    [
      `kernel: one tcp probe 192.168.100.2:40002 -> 192.168.100.1:30083, sent from namespace client (ECONNREFUSED); nft trace id ${path.id.toString(16).padStart(8, '0')}`,
      '',
      'ip drover nat-prerouting',
      `  rule 1   handle ${h('nat-prerouting', 'services')} jump services  comment "services"`,
      'ip drover services',
      `  rule 1   handle ${h('services', 'not a frontend with endpoints')} return  comment "not a frontend with endpoints"`,
      'ip drover nat-prerouting',
      '  policy accept',
      'ip drover affinity-prerouting',
      '  policy accept',
      'ip drover filter-input',
      `  rule 1   handle ${h('filter-input', 'frontends without endpoints')} jump endpoints-check  comment "frontends without endpoints"`,
      'ip drover endpoints-check',
      `  rule 1   handle ${h('endpoints-check', 'frontend has no endpoints')} drop  comment "frontend has no endpoints"`,
      '',
      'last seen: 192.168.100.2:40002 -> 192.168.100.1:30083',
      'kernel verdict: REJECTed (ip drover endpoints-check rule 1)',
      '',
      "MATCH: the kernel took the evaluator's path: REJECTed (ip drover endpoints-check rule 1)",
      '',
    ].join('\n'),
  );
});

test('a kernel path the evaluator does not have is a MISMATCH that names the first rule where they part', (t) => {
  const path = kernelPath(events('nodeport-reject'), FIXTURE_TAG, probe('nodeport-reject'), RULES)!;
  const cmp = compareWithEvaluator(evaluate('clusterip').result, path);
  t.false(cmp.match);
  t.is(cmp.reason, 'after 1 rule(s) in common, the kernel took ip drover services rule 1 where the evaluator\'s closest branch takes ip drover services rule 6');
  // The same rules, another verdict: the kernel's DNAT to an endpoint the evaluator's branches do not name.
  const dnat = kernelPath(events('clusterip'), FIXTURE_TAG, probe('clusterip'), RULES)!;
  const moved = { ...dnat, verdict: { kind: 'dnat' as const, ip: '10.244.1.99', port: 8080 } };
  const other = compareWithEvaluator(evaluate('clusterip').result, moved);
  t.false(other.match);
  t.regex(other.reason!, /^the same rules, but the kernel's verdict is DNAT to 10\.244\.1\.99:8080, not masqueraded and the evaluator's DNAT to 10\.244\.1\.\d:8080, not masqueraded$/);
  t.regex(formatKernelPath(moved, { result: 'connected' }, other, evaluate('clusterip').result), /\nMISMATCH: the same rules, but/);
});

test('a rule the listing no longer has is named by its handle and cannot match', (t) => {
  const path = kernelPath(events('nodeport-reject'), FIXTURE_TAG, probe('nodeport-reject'), new Map())!;
  t.deepEqual(path.steps.filter((s) => s.kind === 'rule').map((s) => s.line), [undefined, undefined, undefined, undefined]);
  t.deepEqual(path.verdict, { kind: 'drop', table: 'ip drover', chain: 'endpoints-check', line: -1 });
  t.false(compareWithEvaluator(evaluate('nodeport-reject').result, path).match);
});

test('the trace chains: one marking rule at the first hook before everything, two empty late chains; removal takes only this run\'s', (t) => {
  t.is(
    addTraceScript('ab12', { src: '10.244.9.2', dst: '10.96.0.10', dport: 80, sport: 40001, proto: 'udp', origin: 'outside' }),
    [
      'add chain ip drover trace-ab12-mark { type filter hook prerouting priority -300; policy accept; }',
      'add rule ip drover trace-ab12-mark ip saddr 10.244.9.2 ip daddr 10.96.0.10 meta l4proto udp th sport 40001 th dport 80 meta nftrace set 1 comment "drover trace --kernel"',
      'add chain ip drover trace-ab12-in { type filter hook input priority 300; policy accept; }',
      'add chain ip drover trace-ab12-out { type filter hook postrouting priority 300; policy accept; }',
      '',
    ].join('\n'),
  );
  t.regex(addTraceScript('ab12', { ...probe('node-masquerade') }), /^add chain ip drover trace-ab12-mark \{ type filter hook output priority -300;/);
  t.is(
    removeTraceScript('ab12', ['services', 'trace-ab12-out', 'trace-ab12-mark', 'trace-cd34-mark']),
    'flush chain ip drover trace-ab12-mark\ndelete chain ip drover trace-ab12-mark\nflush chain ip drover trace-ab12-out\ndelete chain ip drover trace-ab12-out\n',
  );
  t.is(removeTraceScript('ab12', ['services']), '');
});

test('the trace chains refuse a tag or a probe that could add to the script', (t) => {
  const p = probe('clusterip');
  t.throws(() => addTraceScript('x; flush ruleset', p), { message: /trace tag .* is not 1-16 of \[a-z0-9\]/ });
  t.throws(() => addTraceScript('ab', { ...p, src: '10.0.0.1 ip saddr 1.2.3.4' }), { message: /not two canonical addresses of one family/ });
  t.throws(() => addTraceScript('ab', { ...p, src: 'fd00:100::2' }), { message: /not two canonical addresses of one family/ });
  t.throws(() => addTraceScript('ab', { ...p, src: 'fd00:100:0::2', dst: 'fd00:96::10' }), { message: /not two canonical addresses of one family/ });
  t.throws(() => addTraceScript('ab', { ...p, sport: 0 }), { message: /not 1-65535/ });
  t.throws(() => addTraceScript('ab', { ...p, proto: 'sctp' as 'tcp' }), { message: /not tcp or udp/ });
});

test('an IPv6 probe: its trace chains go to table ip6 drover with ip6 matches, and removal takes them from there', (t) => {
  const p6: KernelProbe = { src: 'fd00:100::2', dst: 'fd00:96::10', dport: 80, sport: 40001, proto: 'tcp', origin: 'outside' };
  t.is(
    addTraceScript('ab12', p6),
    [
      'add chain ip6 drover trace-ab12-mark { type filter hook prerouting priority -300; policy accept; }',
      'add rule ip6 drover trace-ab12-mark ip6 saddr fd00:100::2 ip6 daddr fd00:96::10 meta l4proto tcp th sport 40001 th dport 80 meta nftrace set 1 comment "drover trace --kernel"',
      'add chain ip6 drover trace-ab12-in { type filter hook input priority 300; policy accept; }',
      'add chain ip6 drover trace-ab12-out { type filter hook postrouting priority 300; policy accept; }',
      '',
    ].join('\n'),
  );
  t.is(removeTraceScript('ab12', ['trace-ab12-mark'], 'IPv6'), 'flush chain ip6 drover trace-ab12-mark\ndelete chain ip6 drover trace-ab12-mark\n');
});

/** One NFT_MSG_TRACE message of table `table` (NFPROTO `family`) as the kernel sends it, with an IPv6 TCP packet src:sport -> dst:dport when given. */
function traceMessage(family: number, table: string, chain: string, type: number, id: number, extra: { handle?: number; verdict?: number; policy?: number; pkt?: [string, number, string, number] } = {}): Buffer {
  const be32 = (v: number) => {
    const b = Buffer.alloc(4);
    b.writeInt32BE(v | 0);
    return b;
  };
  const w = new AttrWriter().string(1, table).string(2, chain);
  if (extra.handle !== undefined) {
    const h = Buffer.alloc(8);
    h.writeBigUInt64BE(BigInt(extra.handle));
    w.put(3, h);
  }
  w.put(4, be32(type));
  if (extra.verdict !== undefined) w.nest(5, (v) => v.put(1, be32(extra.verdict!)));
  w.put(6, be32(id));
  if (extra.pkt) {
    const [src, sport, dst, dport] = extra.pkt;
    const ip6 = Buffer.alloc(40);
    ip6[0] = 0x60;
    ip6[6] = 6;
    ipToBytes(parseIP(src)!).copy(ip6, 8);
    ipToBytes(parseIP(dst)!).copy(ip6, 24);
    const th = Buffer.alloc(20);
    th.writeUInt16BE(sport, 0);
    th.writeUInt16BE(dport, 2);
    w.put(8, ip6).put(9, th);
  }
  if (extra.policy !== undefined) w.put(16, be32(extra.policy));
  return message(nftType(NFT_MSG.TRACE), 0, 0, family, 0, w.toBuffer());
}

test("an IPv6 probe's events: the IPv6 headers decode, and its path is read in table ip6 drover (DNAT to [endpoint]:port, masqueraded)", (t) => {
  const p6: KernelProbe = { src: 'fd00:100::2', dst: 'fd00:96::10', dport: 80, sport: 40001, proto: 'tcp', origin: 'outside' };
  const ACCEPT = 1;
  const raw = Buffer.concat([
    traceMessage(10, 'drover', 'trace-ab12-mark', 3, 7, { handle: 90, verdict: -1, pkt: ['fd00:100::2', 40001, 'fd00:96::10', 80] }),
    // An event of table ip drover with the same name: another family, not the probe's table.
    traceMessage(2, 'drover', 'nat-prerouting', 3, 7, { handle: 5, verdict: -3 }),
    traceMessage(10, 'drover', 'nat-prerouting', 3, 7, { handle: 4, verdict: -3 }),
    traceMessage(10, 'drover', 'trace-ab12-out', 2, 7, { policy: ACCEPT, pkt: ['fd00:100::1', 61000, 'fd00:244:1::3', 8080] }),
  ]);
  const events = decodeTraceDatagram(raw);
  t.deepEqual(events[0]!.packet, { src: 'fd00:100::2', dst: 'fd00:96::10', protocol: 6, sport: 40001, dport: 80 });
  t.is(events[0]!.family, 10);
  const rules = new Map([[4, { chain: 'nat-prerouting', line: 1, comment: 'services', statements: ['jump'] }]]);
  const path = kernelPath(events, 'ab12', p6, rules)!;
  t.deepEqual(
    path.steps.map((s) => `${s.table} ${s.chain} ${s.line ?? '-'}`),
    ['ip drover nat-prerouting -', 'ip6 drover nat-prerouting 1'],
  );
  t.deepEqual([path.verdict, path.masqueraded], [{ kind: 'dnat', ip: 'fd00:244:1::3', port: 8080 }, true]);
  // The text of the kernel's part (the evaluator's side is not needed for it: a mismatch names no branch).
  const text = formatKernelPath(path, { from: 'client', result: 'connected' }, { match: false, reason: 'x' }, { outcomes: [] } as unknown as TraceResult);
  t.regex(text, /^kernel: one tcp probe \[fd00:100::2\]:40001 -> \[fd00:96::10\]:80, sent from namespace client \(connected\)/);
  t.regex(text, /\nlast seen: \[fd00:100::1\]:61000 -> \[fd00:244:1::3\]:8080\nkernel verdict: DNAT to \[fd00:244:1::3\]:8080, masqueraded\n/);
});
