/**
 * The structure codec (kernel/nftables/structure-codec.ts) against what nft
 * 1.0.6 sends and the kernel answers for `nft list table ip drover`
 * (test/fixtures/nftables/list-structure.hex, the table of setup.nft and
 * structure.nft): the GETTABLE, GETSET and GETRULE requests byte for byte,
 * the chains, sets and rules decoded from the kernel's own answers, and
 * bad input refused.
 */
import test from 'ava';
import { endianness } from 'node:os';
import { parseMessages, nftType, type NlMessage } from '../../src/kernel/nftables/codec.ts';
import { NFT_MSG, NFT_SET_F } from '../../src/kernel/nftables/constants.ts';
import { NftDecodeError, NftValidationError } from '../../src/kernel/nftables/errors.ts';
import {
  datatypeNames,
  decodeChain,
  decodeRule,
  decodeSet,
  decodeTableName,
  encodeGetTable,
  encodeStructureDump,
  structureAnswerType,
  udataString,
} from '../../src/kernel/nftables/structure-codec.ts';
import { capture, messageBytes } from '../support/nft-captures.ts';

const LE = endianness() === 'LE';
const CAPTURE = 'list-structure';

/** Every message of `dir` in the capture. */
function messages(dir: 'send' | 'recv'): NlMessage[] {
  return capture(CAPTURE)
    .filter((d) => d.dir === dir)
    .flatMap((d) => parseMessages(d.bytes));
}

const sent = (msg: number): NlMessage => messages('send').find((m) => m.type === nftType(msg))!;
const received = (msg: number): NlMessage[] => messages('recv').filter((m) => m.type === nftType(msg));

const hostOrder = LE ? test : test.skip;

hostOrder('GETTABLE, and the GETSET and GETRULE dumps of one table, are the requests nft sends', (t) => {
  t.deepEqual(encodeGetTable('ip', 'drover', 0), messageBytes(sent(NFT_MSG.GETTABLE)));
  t.deepEqual(encodeStructureDump('sets', 'ip', 'drover', 0), messageBytes(sent(NFT_MSG.GETSET)));
  t.deepEqual(encodeStructureDump('rules', 'ip', 'drover', 0), messageBytes(sent(NFT_MSG.GETRULE)));
});

hostOrder("the GETCHAIN dump names the table's family and name, where nft dumps every family's chains", (t) => {
  const nft = sent(NFT_MSG.GETCHAIN);
  t.is(nft.payload.length, 4, 'nft: nfgenmsg alone, AF_UNSPEC');
  const ours = parseMessages(encodeStructureDump('chains', 'ip', 'drover', 0))[0]!;
  t.is(ours.type, nft.type);
  t.is(ours.flags, nft.flags);
  t.is(ours.payload[0], 2, 'NFPROTO_IPV4');
  t.deepEqual(ours.payload.subarray(4), Buffer.from('0b00010064726f7665720000', 'hex'), 'NFTA_CHAIN_TABLE "drover"');
});

test('the chains of the kernel answer: base chains with type, hook, priority and policy; a regular chain without', (t) => {
  t.is(decodeTableName(received(NFT_MSG.NEWTABLE)[0]!), 'drover');
  const chains = received(NFT_MSG.NEWCHAIN).map(decodeChain);
  t.deepEqual(
    chains.map(({ handle: _, ...c }) => c),
    [
      { table: 'drover', name: 'nat-prerouting', base: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' } },
      { table: 'drover', name: 'filter-output', base: { type: 'filter', hook: 'output', priority: -110, policy: 'drop' } },
      { table: 'drover', name: 'services' },
    ],
  );
  t.true(chains.every((c) => c.handle > 0));
  t.is(structureAnswerType('chains'), nftType(NFT_MSG.NEWCHAIN));
});

test('the sets of the kernel answer: types as nft names them, typeof sets included, flags, timeout and comment', (t) => {
  const sets = received(NFT_MSG.NEWSET).map(decodeSet);
  const byName = new Map(sets.map((s) => [s.name, s]));
  t.deepEqual([...byName.keys()], ['svc', 'bk', 'frontends', 'affinity']);
  t.deepEqual(byName.get('svc')!.keyType, ['ipv4_addr', 'inet_proto', 'inet_service']);
  t.is(byName.get('svc')!.dataType, undefined);
  t.deepEqual(byName.get('bk')!.keyType, ['ipv4_addr', 'inet_proto', 'inet_service', 'integer'], 'typeof … numgen: integer, as nft -j lists it');
  t.deepEqual(byName.get('bk')!.dataType, ['ipv4_addr', 'inet_service']);
  t.is(byName.get('bk')!.keyLen, 16);
  t.is(byName.get('frontends')!.comment, 'frontends');
  const affinity = byName.get('affinity')!;
  t.deepEqual([affinity.keyType, affinity.dataType, affinity.timeoutMs], [['ipv4_addr', 'ipv4_addr', 'inet_proto', 'inet_service'], ['ipv4_addr', 'inet_service'], 30_000]);
  t.is(affinity.flags & (NFT_SET_F.MAP | NFT_SET_F.TIMEOUT), NFT_SET_F.MAP | NFT_SET_F.TIMEOUT);
});

test('the rules of the kernel answer: chain, handle, comment from the userdata, expressions by name in order', (t) => {
  const rules = received(NFT_MSG.NEWRULE).map(decodeRule);
  t.deepEqual(
    rules.map((r) => [r.chain, r.comment, r.exprs.map((e) => e.name)]),
    [
      ['nat-prerouting', 'services', ['immediate']],
      ['services', 'not a frontend with endpoints', ['payload', 'meta', 'payload', 'lookup', 'immediate']],
      ['services', null, ['counter']],
    ],
  );
  t.true(rules[1]!.handle > rules[0]!.handle);
  t.true(rules[1]!.exprs[3]!.data.includes(Buffer.from('frontends\0')), "the lookup's attributes name its set");
});

test('datatype ids: one field, a concatenation highest field first, unknown ids named by number', (t) => {
  t.deepEqual(datatypeNames(7), ['ipv4_addr']);
  t.deepEqual(datatypeNames((((7 << 6) | 12) << 6) | 13), ['ipv4_addr', 'inet_proto', 'inet_service']);
  t.deepEqual(datatypeNames((8 << 6) | 13), ['ipv6_addr', 'inet_service']);
  t.deepEqual(datatypeNames((63 << 6) | 4), ['type 63', 'integer']);
  t.throws(() => datatypeNames(0), { instanceOf: NftDecodeError });
  t.throws(() => datatypeNames((7 << 12) | 13), { instanceOf: NftDecodeError, message: /empty field/ });
});

test('userdata TLVs: the wanted type, absent, and one that runs past the end', (t) => {
  const udata = Buffer.from([1, 2, 0x61, 0x62, 0, 3, 0x78, 0x79, 0]);
  t.is(udataString(udata, 0, 'x'), 'xy');
  t.is(udataString(udata, 1, 'x'), 'ab');
  t.is(udataString(udata, 7, 'x'), undefined);
  t.is(udataString(undefined, 0, 'x'), undefined);
  t.throws(() => udataString(Buffer.from([0, 9, 0x61]), 0, 'rule 5'), { instanceOf: NftDecodeError, message: /rule 5/ });
});

test('bad input reaches no request; another message type is refused', (t) => {
  t.throws(() => encodeGetTable('inet' as 'ip', 'drover', 1), { instanceOf: NftValidationError });
  t.throws(() => encodeGetTable('ip', 'dro ver', 1), { instanceOf: NftValidationError });
  t.throws(() => encodeStructureDump('elements' as 'sets', 'ip', 'drover', 1), { instanceOf: NftValidationError });
  t.throws(() => encodeStructureDump('rules', 'ip', 'drover', -1), { instanceOf: NftValidationError });
  t.throws(() => decodeChain(received(NFT_MSG.NEWSET)[0]!), { instanceOf: NftDecodeError });
  t.throws(() => decodeRule(received(NFT_MSG.NEWCHAIN)[0]!), { instanceOf: NftDecodeError });
});
