/**
 * Tables and chains over netlink (kernel/nftables/object-codec.ts) against
 * the batch nft 1.0.6 sent for test/fixtures/nftables/objects.nft
 * (objects.hex): NEWTABLE and NEWCHAIN byte for byte (with nft's sequence
 * numbers, without NLM_F_ACK as nft sends them), and bad input refused.
 */
import test from 'ava';
import { endianness } from 'node:os';
import { nftType, parseMessages, type NlMessage } from '../../src/kernel/nftables/codec.ts';
import { NFNL_MSG_BATCH_BEGIN, NFT_MSG, NLM_F } from '../../src/kernel/nftables/constants.ts';
import { NftValidationError } from '../../src/kernel/nftables/errors.ts';
import { encodeNewChain, encodeNewTable } from '../../src/kernel/nftables/object-codec.ts';
import { capture, messageBytes } from '../support/nft-captures.ts';

/** The messages of nft's one batch. */
const batch: NlMessage[] = capture('objects')
  .filter((d) => d.dir === 'send')
  .map((d) => parseMessages(d.bytes))
  .find((m) => m[0]?.type === NFNL_MSG_BATCH_BEGIN)!;
const of = (msg: number): NlMessage[] => batch.filter((m) => m.type === nftType(msg));

const hostOrder = endianness() === 'LE' ? test : test.skip;

hostOrder('add table is byte for byte what nft sends', (t) => {
  const nft = of(NFT_MSG.NEWTABLE)[0]!;
  t.deepEqual(encodeNewTable('ip', 'drover', nft.seq, { ack: false }), messageBytes(nft));
});

hostOrder('add chain, base chains (nat prerouting -100, filter output -110) and a regular chain, is byte for byte what nft sends', (t) => {
  const [pre, out, services] = of(NFT_MSG.NEWCHAIN);
  t.deepEqual(encodeNewChain({ family: 'ip', table: 'drover', name: 'nat-prerouting', base: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' } }, pre!.seq, { ack: false }), messageBytes(pre!));
  t.deepEqual(encodeNewChain({ family: 'ip', table: 'drover', name: 'filter-output', base: { type: 'filter', hook: 'output', priority: -110 } }, out!.seq, { ack: false }), messageBytes(out!));
  t.deepEqual(encodeNewChain({ family: 'ip', table: 'drover', name: 'services' }, services!.seq, { ack: false }), messageBytes(services!));
});

test('by default each message asks for an ACK; IPv6 tables carry NFPROTO_IPV6; a drop policy is NF_DROP', (t) => {
  const table = parseMessages(encodeNewTable('ip6', 'drover', 7))[0]!;
  t.is(table.flags, NLM_F.REQUEST | NLM_F.ACK);
  t.is(table.payload[0], 10);
  const chain = parseMessages(encodeNewChain({ family: 'ip', table: 'drover', name: 'x', base: { type: 'filter', hook: 'input', priority: 0, policy: 'drop' } }, 8))[0]!;
  t.is(chain.flags, NLM_F.REQUEST | NLM_F.CREATE | NLM_F.ACK);
  t.true(chain.payload.includes(Buffer.from('0800050000000000', 'hex')), 'NFTA_CHAIN_POLICY 0');
});

test('bad input is refused before a byte is written, each named', (t) => {
  const base = { type: 'nat' as const, hook: 'prerouting', priority: -100 };
  t.throws(() => encodeNewTable('inet' as 'ip', 'drover', 1), { instanceOf: NftValidationError, message: /family/ });
  t.throws(() => encodeNewTable('ip', 'a b', 1), { instanceOf: NftValidationError, message: /table/ });
  t.throws(() => encodeNewChain({ family: 'ip', table: 'drover', name: '' }, 1), { instanceOf: NftValidationError, message: /chain/ });
  t.throws(() => encodeNewChain({ family: 'ip', table: 'drover', name: 'c', base: { ...base, hook: 'ingress' } }, 1), { instanceOf: NftValidationError, message: /base\.hook/ });
  t.throws(() => encodeNewChain({ family: 'ip', table: 'drover', name: 'c', base: { ...base, type: 'mangle' as 'nat' } }, 1), { instanceOf: NftValidationError, message: /base\.type/ });
  t.throws(() => encodeNewChain({ family: 'ip', table: 'drover', name: 'c', base: { ...base, priority: 2 ** 31 } }, 1), { instanceOf: NftValidationError, message: /base\.priority/ });
  t.throws(() => encodeNewChain({ family: 'ip', table: 'drover', name: 'c', base: { ...base, policy: 'reject' as 'drop' } }, 1), { instanceOf: NftValidationError, message: /base\.policy/ });
  t.throws(() => encodeNewChain({ family: 'ip', table: 'drover', name: 'c' }, -1), { instanceOf: NftValidationError, message: /seq/ });
});
