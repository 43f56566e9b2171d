/**
 * ClientIP affinity in the IPv6 table `ip6 drover`, without a kernel: the
 * record rule that nft 1.0.6 cannot compile is written over netlink
 * (src/modes/nftables/affinity-rule.ts, netlink/rule-codec.ts). Its
 * encoder is checked byte for byte against nft's own NEWRULE of the IPv4
 * rule (test/fixtures/nftables/rule-affinity.hex, captured from nft 1.0.6),
 * the IPv6 rule's registers exactly; then scripts leave those rules out
 * and the backend appends them after each script that writes their chains
 * (full sync, a new timeout in a partial sync), on the in-memory nft of
 * fake.ts, which refuses the rule as nft text as nft 1.0.6 does; and
 * `drover trace` of an IPv6 connection with affinity.
 */
import test from 'ava';
import { endianness } from 'node:os';
import { familyView } from '../../src/model/family.ts';
import type { Snapshot } from '../../src/model/types.ts';
import { affinityRecordExprs } from '../../src/modes/nftables/affinity-rule.ts';
import { netlinkRuleAdd, netlinkRulesOf } from '../../src/modes/nftables/netlink-rules.ts';
import { modelAfterWrite, NftablesBackend, planFullSync } from '../../src/modes/nftables/backend.ts';
import { FakeNft } from '../../src/modes/nftables/fake.ts';
import { affinityRecordRules, chains } from '../../src/modes/nftables/layout.ts';
import { TableModel } from '../../src/modes/nftables/model.ts';
import { parseMessages, NftValidationError } from '../../src/kernel/nftables/codec.ts';
import { commentUserdata, encodeNewRule, encodeRuleBatch, MAX_COMMENT } from '../../src/kernel/nftables/rule-codec.ts';
import { orderOps } from '../../src/modes/nftables/plan.ts';
import { NETLINK_RULE_NOTE, transactionScript } from '../../src/modes/nftables/script.ts';
import { nftTraceContext, nftTraceFormatOf } from '../../src/modes/nftables/trace.ts';
import { parseRuleRequest } from '../../src/modes/nftables/rule-helper.ts';
import { ruleShape, sentNewRules } from '../support/nft-captures.ts';
import { trace } from '../../src/inspect/trace.ts';
import { formatTrace } from '../../src/inspect/trace-format.ts';
import { silentLogger } from '../../src/util/log.ts';
import { buildFrom } from './model-helpers.ts';
import { isNftablesDetail } from '../../src/modes/nftables/sync-detail.ts';

const V6 = { render: { clusterCIDR: 'fd00:244::/48', masqueradeAll: false, family: 'IPv6' as const }, nodePortIPs: ['fd00:1::1'] };
const FULL = { full: true, changed: new Set<string>() };

/** nft's NEWRULE of the IPv4 rule "tcp affinity of 3 s", from the capture. */
function nftNewRule() {
  const rules = sentNewRules('rule-affinity');
  if (rules.length !== 1) throw new Error(`${rules.length} NEWRULE messages in the capture`);
  return rules[0]!;
}

test('the netlink rule encoder writes the IPv4 affinity record rule exactly as nft 1.0.6 does (but the set ids)', (t) => {
  const nft = nftNewRule();
  const ours = parseMessages(encodeNewRule({ family: 'ip', table: 'drover', chain: 'affinity-prerouting', exprs: affinityRecordExprs('IPv4', 'tcp', 3), comment: 'tcp affinity of 3 s' }, 7))[0]!;
  t.is(ours.type, nft.type);
  t.deepEqual(ruleShape(ours.payload), ruleShape(nft.payload));
  t.is(ours.payload[0], nft.payload[0], 'nfgen_family NFPROTO_IPV4');
  // nft sends no NLM_F_ACK; otherwise the same flags (NLM_F_REQUEST | NLM_F_CREATE | NLM_F_APPEND).
  t.is(ours.flags & ~0x4, nft.flags);
});

test('the IPv6 affinity record rule: key client . frontend in registers 0-9, value endpoint in 10-14, as nft lists it', (t) => {
  const host = (v: number) => {
    const b = Buffer.alloc(4);
    if (endianness() === 'LE') b.writeUInt32LE(v);
    else b.writeUInt32BE(v);
    return b;
  };
  t.deepEqual(affinityRecordExprs('IPv6', 'udp', 2), [
    { kind: 'ct', key: 0, dreg: 1 },
    { kind: 'bitwise', reg: 1, mask: host(8) },
    { kind: 'cmp', reg: 1, op: 'neq', data: host(0) },
    { kind: 'ct', key: 2, dreg: 1 },
    { kind: 'bitwise', reg: 1, mask: host(0x20) },
    { kind: 'cmp', reg: 1, op: 'neq', data: host(0) },
    { kind: 'meta', key: 16, dreg: 1 },
    { kind: 'cmp', reg: 1, op: 'eq', data: Uint8Array.of(17) },
    { kind: 'ct', key: 22, dreg: 8, dir: 0 },
    { kind: 'meta', key: 16, dreg: 12 },
    { kind: 'ct', key: 12, dreg: 13, dir: 0 },
    { kind: 'lookup', set: 'affinity-2', sreg: 8 },
    { kind: 'payload', base: 1, offset: 8, len: 16, dreg: 8 },
    { kind: 'ct', key: 22, dreg: 12, dir: 0 },
    { kind: 'meta', key: 16, dreg: 16 },
    { kind: 'ct', key: 12, dreg: 17, dir: 0 },
    { kind: 'payload', base: 1, offset: 24, len: 16, dreg: 18 },
    { kind: 'payload', base: 2, offset: 2, len: 2, dreg: 22 },
    { kind: 'dynset', set: 'affinity', sregKey: 8, sregData: 18, timeoutMs: 2000 },
  ]);
  const [rule] = affinityRecordRules(2, 'IPv6').filter((r) => r.comment === 'udp affinity of 2 s');
  t.deepEqual(rule!.netlink, { kind: 'affinity-record', proto: 'udp', seconds: 2 });
  const add = netlinkRuleAdd('IPv6', { chain: 'affinity-output', rule: rule! });
  t.deepEqual([add.family, add.table, add.chain, add.comment], ['ip6', 'drover', 'affinity-output', 'udp affinity of 2 s']);
  const batch = encodeRuleBatch([add, add], 100);
  t.deepEqual(batch.messages.map((m) => m.seq), [101, 102]);
  t.deepEqual(parseMessages(batch.bytes).map((m) => m.payload[0]), [0, 10, 10, 0], 'NFPROTO_IPV6 rules inside the batch');
  // The IPv4 table's rules stay nft's: no netlink part.
  t.true(affinityRecordRules(2, 'IPv4').every((r) => r.netlink === undefined));
});

test('the rule encoder refuses what the kernel could not take, before a byte is written', (t) => {
  const exprs = affinityRecordExprs('IPv6', 'tcp', 3);
  const base = { family: 'ip6' as const, table: 'drover', chain: 'affinity-output', exprs, comment: 'tcp affinity of 3 s' };
  t.throws(() => encodeNewRule({ ...base, exprs: [{ kind: 'payload', base: 1, offset: 8, len: 16, dreg: 21 }] }, 1), { instanceOf: NftValidationError, message: /exprs\[0\]\.dreg.*past the last register/ });
  t.throws(() => encodeNewRule({ ...base, exprs: [{ kind: 'meta', key: 16, dreg: 5 }] }, 1), { instanceOf: NftValidationError, message: /5 is not a register/ });
  t.throws(() => encodeNewRule({ ...base, comment: 'a "quoted" comment' }, 1), { instanceOf: NftValidationError, message: /comment/ });
  t.throws(() => encodeNewRule({ ...base, chain: 'bad chain' }, 1), { instanceOf: NftValidationError, message: /chain/ });
  t.throws(() => affinityRecordExprs('IPv6', 'tcp', 0), { message: /affinity timeout "0"/ });
  t.throws(() => parseRuleRequest(JSON.stringify({ family: 'IPv6', rules: [{ chain: 'x; rm', comment: 'c', netlink: { kind: 'affinity-record', proto: 'tcp', seconds: 3 } }] })), { message: /rules\[0\]: chain/ });
  t.throws(() => parseRuleRequest(JSON.stringify({ family: 'IPv6', rules: [{ chain: 'affinity-output', comment: 'c', netlink: { kind: 'other' } }] })), { message: /not an affinity record rule/ });
});

/** The dual-stack fixtures' IPv6 view on node-a: Service lb has ClientIP affinity of 600 s. */
async function view6(): Promise<Snapshot> {
  const r = await buildFrom(['test/fixtures/dualstack/services.yaml', 'test/fixtures/dualstack/nft-lb.yaml']);
  return familyView({ ...r.snapshot, node: { name: 'node-a', addresses: [{ type: 'InternalIP', address: 'fd00:100::1' }] } }, 'IPv6');
}

/** `snapshot` with the affinity timeout of every service port that has one set to `seconds`. */
function withTimeout(snapshot: Snapshot, seconds: number): Snapshot {
  const services = new Map([...snapshot.services].map(([k, sp]) => [k, sp.sessionAffinity ? { ...sp, sessionAffinity: { ...sp.sessionAffinity, timeoutSeconds: seconds } } : sp]));
  return { ...snapshot, services };
}

test('the IPv6 scripts leave the record rules out, and the backend appends them over netlink after each script that writes their chains', async (t) => {
  const nft = new FakeNft('IPv6');
  const backend = new NftablesBackend({ nft, elements: nft.writer(), render: V6.render, frontends: { nodePortIPs: V6.nodePortIPs, family: 'IPv6' }, logger: silentLogger() });
  const snapshot = await view6();
  await backend.sync(snapshot, FULL);
  t.false(nft.scripts[0]!.split('\n').some((l) => /^\s*[^#\s].*update @affinity \{ ip6 saddr/.test(l)), 'no record rule as nft text');
  t.is(nft.scripts[0]!.split('\n').filter((l) => l.trim().startsWith(NETLINK_RULE_NOTE)).length, 6);
  // The pick rules go over netlink too (pick-rule.ts); here only the record rules are looked at.
  const recordRules = () => nft.netlinkRules.filter((r) => r.includes(' affinity of '));
  t.deepEqual(recordRules(), ['affinity-prerouting', 'affinity-output'].flatMap((c) => ['tcp', 'udp', 'sctp'].map((p) => `${c}: ${p} affinity of 600 s`)));
  const live = await nft.list();
  t.deepEqual(live.chains.get('affinity-output')!.comments, ['tcp affinity of 600 s', 'udp affinity of 600 s', 'sctp affinity of 600 s']);
  t.deepEqual([...live.sets.get('affinity-600')!.elements.keys()].sort(), ['2001:db8:40::1 . tcp . 443', '2001:db8:51::40 . tcp . 443', 'fd00:1::1 . tcp . 30443', 'fd00:96::40 . tcp . 443']);

  // A restart adopts the table: a second full sync writes nothing, over nft or netlink.
  const again = await new NftablesBackend({ nft, elements: nft.writer(), render: V6.render, frontends: { nodePortIPs: V6.nodePortIPs, family: 'IPv6' }, logger: silentLogger() }).sync(snapshot, FULL);
  t.deepEqual([again.transactions, recordRules().length], [0, 6]);

  // A timeout change in a partial sync: set affinity-2, both chains written again with the rules of both timeouts (600 s kept until a full sync).
  const changed = withTimeout(snapshot, 2);
  const lbKeys = new Set([...changed.services.values()].filter((sp) => sp.sessionAffinity).map((sp) => sp.key));
  const partial = await backend.sync(changed, { full: false, changed: lbKeys });
  t.true(isNftablesDetail(partial.detail) && partial.detail.structural);
  t.deepEqual(
    recordRules().slice(6),
    ['affinity-prerouting', 'affinity-output'].flatMap((c) => [2, 600].flatMap((s) => ['tcp', 'udp', 'sctp'].map((p) => `${c}: ${p} affinity of ${s} s`))),
  );
  const after = await nft.list();
  t.true(after.sets.get('affinity-2')!.elements.has('fd00:96::40 . tcp . 443'));
  t.is(after.sets.get('affinity-600')!.elements.size, 0);
  // The next full sync drops the 600 s set and its rules.
  await backend.sync(changed, FULL);
  const pruned = await nft.list();
  t.false(pruned.sets.has('affinity-600'));
  t.deepEqual(pruned.chains.get('affinity-prerouting')!.comments, ['tcp affinity of 2 s', 'udp affinity of 2 s', 'sctp affinity of 2 s']);
});

test('a failed netlink rule transaction fails the sync, and the next full sync writes the chains again', async (t) => {
  const nft = new FakeNft('IPv6');
  const backend = new NftablesBackend({ nft, render: V6.render, frontends: { nodePortIPs: V6.nodePortIPs, family: 'IPv6' }, logger: silentLogger() });
  const snapshot = await view6();
  // The script goes through; the rules after it fail once.
  const addRules = nft.addRules.bind(nft);
  let calls = 0;
  nft.addRules = async (rules) => {
    if (calls++ === 0) throw new Error('nf_tables adding rule ip6 drover affinity-prerouting "tcp affinity of 600 s" failed: ENOENT');
    return addRules(rules);
  };
  await t.throwsAsync(backend.sync(snapshot, FULL), { message: /ENOENT/ });
  t.deepEqual((await nft.list()).chains.get('affinity-prerouting')!.comments, [], 'the script wrote the chain without them');
  const r = await backend.sync(snapshot, FULL);
  // The two affinity chains, and pick and external-local, whose rules still have the script's TCP-only comments.
  t.is(r.written.chain, 4);
  t.deepEqual((await nft.list()).chains.get('affinity-prerouting')!.comments, ['tcp affinity of 600 s', 'udp affinity of 600 s', 'sctp affinity of 600 s']);
});

test('the fake nft refuses the IPv6 record rule as nft text, as nft 1.0.6 aborts on it', async (t) => {
  const nft = new FakeNft('IPv6');
  const inputs = { counts: { main: [1], local: [] }, timeouts: [5] };
  const want = chains(V6.render, inputs);
  const asText = want.map((c) => ({ ...c, rules: c.rules.map(({ text, comment }) => ({ text, comment })) }));
  const empty = new TableModel();
  const plan = planFullSync(empty, { services: new Map() }, V6.render, { nodePortIPs: [], family: 'IPv6' }, false);
  await t.throwsAsync(nft.run(transactionScript(plan.structure, { sets: plan.want.sets, chains: asText }, empty, [], 'IPv6')), { message: /Assertion `dreg < ctx->reg_low' failed/ });
  t.deepEqual(netlinkRulesOf(want).filter((r) => r.rule.netlink?.kind === 'affinity-record').map((r) => r.rule.comment), ['tcp affinity of 5 s', 'udp affinity of 5 s', 'sctp affinity of 5 s', 'tcp affinity of 5 s', 'udp affinity of 5 s', 'sctp affinity of 5 s']);
});

test('trace of an IPv6 connection with affinity: the record rule notes the entry; an entry sends the client to its endpoint', async (t) => {
  const empty = new TableModel();
  const plan = planFullSync(empty, await view6(), V6.render, { nodePortIPs: V6.nodePortIPs, family: 'IPv6' }, false);
  const model = modelAfterWrite(empty, plan.structure, plan.want, orderOps(plan.ops));
  const probe = { src: 'fd00:244::9', dst: 'fd00:96::40', dport: 443, proto: 'tcp' as const };
  const ctx = () => nftTraceContext(model.toLive(), new Set(['fd00:1::1']), { family: 'IPv6' });
  t.is(ctx().note, '');
  const before = formatTrace(trace(ctx().ctx, probe), nftTraceFormatOf('IPv6'));
  t.regex(before, /ip6 drover affinity-prerouting\n {6}rule 1 .* comment "tcp affinity of 600 s" {3}\[records fd00:244::9 \. fd00:96::40 \. tcp \. 443 : fd00:244:1::5 \. 8443 in @affinity for 600s\]/);
  t.regex(before, /verdict: DNAT to one of 2 endpoints, not masqueraded\n/);
  model.affinity.set('fd00:244::9 . fd00:96::40 . tcp . 443', 'fd00:244:2::5 . 8443');
  const after = trace(ctx().ctx, probe);
  t.deepEqual(after.outcomes.map((o) => [o.verdict.kind === 'dnat' ? `${o.verdict.ip}:${o.verdict.port}` : o.verdict.kind, o.probability]), [['fd00:244:2::5:8443', 1]]);
});

test('a rule comment fills NFTA_RULE_USERDATA up to the kernel\'s 256 bytes and no further: 253 characters pass, 254 do not', (t) => {
  t.is(MAX_COMMENT, 253);
  t.is(commentUserdata('c'.repeat(253)).length, 256);
  t.throws(() => commentUserdata('c'.repeat(254)), { message: /is not 1-253 printable ASCII characters/ });
  t.throws(() => commentUserdata(''), { message: /is not 1-253/ });
});
