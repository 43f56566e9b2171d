/**
 * The pick rules over netlink (src/modes/nftables/pick-rule.ts,
 * netlink-rules.ts), without a kernel: their expressions are nft 1.0.6's own
 * NEWRULE of the rule (test/fixtures/nftables/rule-pick.hex, IPv4 and IPv6)
 * without the `meta l4proto tcp` dependency nft adds; the encoder's numgen,
 * map lookup, DNAT and replace-by-handle bytes; the handle of the rule each
 * replaces; and the helper's request.
 */
import test from 'ava';
import { parseMessages, NftValidationError } from '../../src/kernel/nftables/codec.ts';
import { NLM_F } from '../../src/kernel/nftables/constants.ts';
import { encodeNewRule, type RuleAdd } from '../../src/kernel/nftables/rule-codec.ts';
import { countRule, LOCAL, MAIN } from '../../src/modes/nftables/layout.ts';
import { pickRuleExprs } from '../../src/modes/nftables/pick-rule.ts';
import { netlinkRuleAdd, ReplacedRuleError, resolveRuleAdds } from '../../src/modes/nftables/netlink-rules.ts';
import { parseRuleRequest } from '../../src/modes/nftables/rule-helper.ts';
import type { TableStructure } from '../../src/kernel/nftables/client.ts';
import { ruleShape, sentNewRules, type ExprShape } from '../support/nft-captures.ts';

/** nft's `meta load l4proto => reg 1` and `cmp eq reg 1 0x06`: the dependency that makes its rule TCP only. */
const TCP_DEPENDENCY: readonly ExprShape[] = [
  ['meta', '2=00000010', '1=00000001'],
  ['cmp', '1=00000001', '2=00000000', '3=0500010006000000'],
];

for (const [i, family, count] of [[0, 'IPv4', 2], [1, 'IPv6', 3]] as const) {
  test(`the ${family} pick rule is nft 1.0.6's NEWRULE of it, byte for byte, without the meta l4proto tcp dependency`, (t) => {
    const nft = sentNewRules('rule-pick')[i]!;
    const want = ruleShape(nft.payload);
    const exprs = want.exprs!;
    // nft's rule: the frontend, its count set, then the dependency pair, then the frontend again, numgen, map lookup, DNAT.
    t.deepEqual(exprs.slice(4, 6), TCP_DEPENDENCY);
    const table = family === 'IPv4' ? 'ip' : 'ip6';
    const ours = parseMessages(encodeNewRule({ family: table, table: 'drover', chain: 'pick', exprs: pickRuleExprs(family, { selection: 'main', count }), comment: `one of ${count} endpoints` }, 7))[0]!;
    t.deepEqual(ruleShape(ours.payload), { ...want, exprs: [...exprs.slice(0, 4), ...exprs.slice(6)] });
    t.is(ours.payload[0], nft.payload[0], 'nfgen_family');
    t.is(ours.flags & ~NLM_F.ACK, nft.flags, 'NLM_F_REQUEST | NLM_F_CREATE | NLM_F_APPEND, and an ACK asked for');
  });
}

test('numgen, a map lookup and the DNAT, attribute by attribute (enum nft_ng_attributes, nft_lookup_attributes, nft_nat_attributes)', (t) => {
  const [numgen, lookup, nat] = ruleShape(parseMessages(encodeNewRule({ family: 'ip6', table: 'drover', chain: 'external-local', exprs: pickRuleExprs('IPv6', { selection: 'local', count: 5 }), comment: 'c' }, 1))[0]!.payload).exprs!.slice(7);
  // NFTA_NG_DREG NFT_REG32_06 (14), MODULUS 5, TYPE NFT_NG_RANDOM, OFFSET 0.
  t.deepEqual(numgen, ['numgen', '1=0000000e', '2=00000005', '3=00000001', '4=00000000']);
  // NFTA_LOOKUP_SREG and _DREG NFT_REG_1, NFTA_LOOKUP_SET "local-endpoints".
  t.deepEqual(lookup, ['lookup', '2=00000001', '3=00000001', `1=${Buffer.from('local-endpoints\0').toString('hex')}`]);
  // NFTA_NAT_TYPE NFT_NAT_DNAT, FAMILY NFPROTO_IPV6, REG_ADDR_MIN NFT_REG_1, REG_PROTO_MIN NFT_REG_2 (NFT_REG32_04: the port after 16 bytes).
  t.deepEqual(nat, ['nat', '1=00000001', '2=0000000a', '3=00000001', '5=00000002']);
});

test('a rule with a handle replaces that rule: NLM_F_REPLACE without CREATE or APPEND, NFTA_RULE_HANDLE as a big-endian u64 after the chain', (t) => {
  const add: RuleAdd = { family: 'ip', table: 'drover', chain: 'pick', handle: 0x1_0000_0002, exprs: pickRuleExprs('IPv4', { selection: 'main', count: 1 }), comment: 'one of 1 endpoint, any protocol' };
  const m = parseMessages(encodeNewRule(add, 9))[0]!;
  t.is(m.flags, NLM_F.REQUEST | NLM_F.REPLACE | NLM_F.ACK);
  const shape = ruleShape(m.payload);
  t.deepEqual(Object.keys(shape), ['attr 1', 'attr 2', 'attr 3', 'exprs', 'attr 7']);
  t.is(shape['attr 3'], '0000000100000002');
  t.throws(() => encodeNewRule({ ...add, handle: 0 }, 1), { instanceOf: NftValidationError, message: /handle/ });
  t.throws(() => encodeNewRule({ ...add, handle: 2 ** 53 }, 1), { instanceOf: NftValidationError, message: /handle/ });
});

test('the encoder refuses a numgen, lookup or DNAT the kernel could not take', (t) => {
  const base = { family: 'ip6' as const, table: 'drover', chain: 'pick', comment: 'c' };
  t.throws(() => encodeNewRule({ ...base, exprs: [{ kind: 'numgen', dreg: 8, modulus: 0 }] }, 1), { instanceOf: NftValidationError, message: /exprs\[0\]\.modulus/ });
  t.throws(() => encodeNewRule({ ...base, exprs: [{ kind: 'numgen', dreg: 24, modulus: 2 }] }, 1), { instanceOf: NftValidationError, message: /exprs\[0\]\.dreg/ });
  t.throws(() => encodeNewRule({ ...base, exprs: [{ kind: 'lookup', set: 'endpoints', sreg: 8, dreg: 6 }] }, 1), { instanceOf: NftValidationError, message: /exprs\[0\]\.dreg/ });
  t.throws(() => encodeNewRule({ ...base, exprs: [{ kind: 'nat', family: 'ip6', regAddr: 21, regProto: 8 }] }, 1), { instanceOf: NftValidationError, message: /regAddr.*past the last register/ });
  t.throws(() => encodeNewRule({ ...base, exprs: [{ kind: 'nat', family: 'inet' as 'ip', regAddr: 8, regProto: 9 }] }, 1), { instanceOf: NftValidationError, message: /exprs\[0\]\.family/ });
  t.throws(() => pickRuleExprs('IPv4', { selection: 'main', count: 0 }), { message: /endpoint count "0"/ });
});

test('the layout writes each count rule over netlink, in place of the TCP-only rule with the comment it had before', (t) => {
  const r = countRule(LOCAL, 2, 'IPv6');
  t.is(r.comment, 'one of 2 local endpoints, any protocol');
  t.deepEqual(r.netlink, { kind: 'pick', selection: 'local', count: 2, replaces: 'one of 2 local endpoints' });
  t.is(countRule(MAIN, 1).netlink?.kind, 'pick');
  const add = netlinkRuleAdd('IPv6', { chain: 'external-local', rule: r }, 12);
  t.deepEqual([add.family, add.table, add.chain, add.handle, add.comment], ['ip6', 'drover', 'external-local', 12, 'one of 2 local endpoints, any protocol']);
  t.deepEqual(add.exprs.at(-3), { kind: 'numgen', dreg: 14, modulus: 2 });
});

/** A structure read holding `rules` (chain, handle, comment) of `ip drover`. */
function structure(rules: readonly [string, number, string][]): TableStructure {
  return { exists: true, chains: [], sets: [], generation: 1, rules: rules.map(([chain, handle, comment]) => ({ table: 'drover', chain, handle, comment, exprs: [] })) };
}

test('each pick rule replaces the one rule of its chain with its TCP-only comment; none, or two, is an error', async (t) => {
  const rules = [
    { chain: 'pick', rule: countRule(MAIN, 2) },
    { chain: 'external-local', rule: countRule(LOCAL, 2) },
  ];
  const client = (s: TableStructure) => ({ readStructure: async () => s });
  const live = structure([
    ['pick', 4, 'the endpoint of a client with affinity'],
    ['pick', 9, 'one of 2 endpoints'],
    ['external-local', 7, 'one of 2 local endpoints'],
    ['external-local', 8, 'no local endpoint'],
  ]);
  t.deepEqual((await resolveRuleAdds(client(live), 'IPv4', rules)).map((a) => [a.chain, a.handle]), [['pick', 9], ['external-local', 7]]);
  const missing = structure([['pick', 9, 'one of 2 endpoints']]);
  await t.throwsAsync(resolveRuleAdds(client(missing), 'IPv4', rules), { instanceOf: ReplacedRuleError, message: /"one of 2 local endpoints" of chain external-local.*0 rules/ });
  const twice = structure([['pick', 9, 'one of 2 endpoints'], ['pick', 10, 'one of 2 endpoints'], ['external-local', 7, 'one of 2 local endpoints']]);
  await t.throwsAsync(resolveRuleAdds(client(twice), 'IPv4', rules), { instanceOf: ReplacedRuleError, message: /2 rules/ });
});

test("the helper's request carries pick rules, checked field by field", (t) => {
  const rule = countRule(MAIN, 3);
  const ok = parseRuleRequest(JSON.stringify({ family: 'IPv4', rules: [{ chain: 'pick', comment: rule.comment, netlink: rule.netlink }] }));
  t.deepEqual(ok.rules[0]!.rule.netlink, { kind: 'pick', selection: 'main', count: 3, replaces: 'one of 3 endpoints' });
  t.throws(() => parseRuleRequest(JSON.stringify({ family: 'IPv4', rules: [{ chain: 'pick', comment: 'c', netlink: { kind: 'pick', selection: 'other', count: 3, replaces: 'x' } }] })), { message: /rules\[0\]: netlink .* not an affinity record rule or a pick rule/ });
  // A bad count passes the parse but not the encoder, which runs before any socket is opened.
  const bad = parseRuleRequest(JSON.stringify({ family: 'IPv4', rules: [{ chain: 'pick', comment: 'c', netlink: { kind: 'pick', selection: 'main', count: -1, replaces: 'x' } }] }));
  t.throws(() => netlinkRuleAdd('IPv4', bad.rules[0]!), { message: /endpoint count "-1"/ });
});
