/**
 * nftables mode's read-back over nf_tables netlink, without a kernel: the
 * structure the kernel answered to nft (test/fixtures/nftables/list-structure.hex)
 * as a full sync compares it (live-netlink.ts), and the element text of
 * the ranges of a concatenated interval set (netlink-writer.ts rangeText),
 * as nft -j lists them and firewallText writes them.
 */
import test from 'ava';
import { parseMessages, nftType } from '../../src/kernel/nftables/codec.ts';
import { NFT_MSG } from '../../src/kernel/nftables/constants.ts';
import { decodeChain, decodeRule, decodeSet } from '../../src/kernel/nftables/structure-codec.ts';
import { liveFromStructure } from '../../src/modes/nftables/live-netlink.ts';
import { NO_TABLE } from '../../src/modes/nftables/live.ts';
import { firewallText } from '../../src/modes/nftables/elements.ts';
import { rangeText } from '../../src/modes/nftables/netlink-writer.ts';
import { capture } from '../support/nft-captures.ts';

const answers = capture('list-structure')
  .filter((d) => d.dir === 'recv')
  .flatMap((d) => parseMessages(d.bytes));
const of = (msg: number) => answers.filter((m) => m.type === nftType(msg));

test('the structure read over netlink, as a full sync compares it: set types joined as nft -j joins them, base chains, comments in order', (t) => {
  const live = liveFromStructure({
    exists: true,
    chains: of(NFT_MSG.NEWCHAIN).map(decodeChain),
    sets: of(NFT_MSG.NEWSET).map(decodeSet),
    rules: of(NFT_MSG.NEWRULE).map(decodeRule),
    generation: 1,
  });
  t.true(live.exists);
  t.deepEqual(
    [...live.sets].map(([name, s]) => [name, s.keyType, s.mapType, s.elements.size]),
    [
      ['svc', 'ipv4_addr . inet_proto . inet_service', undefined, 0],
      ['bk', 'ipv4_addr . inet_proto . inet_service . integer', 'ipv4_addr . inet_service', 0],
      ['frontends', 'ipv4_addr . inet_proto . inet_service', undefined, 0],
      ['affinity', 'ipv4_addr . ipv4_addr . inet_proto . inet_service', 'ipv4_addr . inet_service', 0],
    ],
  );
  t.deepEqual(Object.fromEntries(live.chains), {
    'nat-prerouting': { base: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' }, comments: ['services'] },
    'filter-output': { base: { type: 'filter', hook: 'output', priority: -110, policy: 'drop' }, comments: [] },
    services: { comments: ['not a frontend with endpoints', null] },
  });
  t.is(live.rules, undefined, 'no rules by handle: drover trace --kernel reads those from nft -j');
  t.is(liveFromStructure({ exists: false, chains: [], sets: [], rules: [], generation: 1 }), NO_TABLE);
});

const F4 = [{ ipv4: '198.51.100.10' }, { proto: 6 }, { port: 80 }] as const;
const F6 = [{ ipv6: '2001:db8::10' }, { proto: 17 }, { port: 53 }] as const;

test('a range of a concatenated interval set reads as firewallText writes it: a prefix as network/bits, one address bare', (t) => {
  t.is(rangeText([...F4, { ipv4: '192.168.100.0' }], [...F4, { ipv4: '192.168.100.255' }]), firewallText('198.51.100.10 . tcp . 80', '192.168.100.0/24'));
  t.is(rangeText([...F4, { ipv4: '10.9.9.9' }], [...F4, { ipv4: '10.9.9.9' }]), firewallText('198.51.100.10 . tcp . 80', '10.9.9.9/32'));
  t.is(rangeText([...F4, { ipv4: '0.0.0.0' }], [...F4, { ipv4: '255.255.255.255' }]), '198.51.100.10 . tcp . 80 . 0.0.0.0/0');
  t.is(rangeText([...F6, { ipv6: 'fd00:100::' }], [...F6, { ipv6: 'fd00:100::ffff:ffff:ffff:ffff' }]), firewallText('2001:db8::10 . udp . 53', 'fd00:100::/64'));
  t.is(rangeText([...F6, { ipv6: 'fd00::1' }], [...F6, { ipv6: 'fd00::1' }]), '2001:db8::10 . udp . 53 . fd00::1');
});

test('a range that is no prefix reads as first-last, as nft -j lists it; keys of different shapes are refused', (t) => {
  t.is(rangeText([...F4, { ipv4: '10.0.0.1' }], [...F4, { ipv4: '10.0.0.5' }]), '198.51.100.10 . tcp . 80 . 10.0.0.1-10.0.0.5');
  t.is(rangeText([...F4, { ipv4: '10.0.0.0' }], [...F4, { ipv4: '10.0.1.254' }]), '198.51.100.10 . tcp . 80 . 10.0.0.0-10.0.1.254');
  t.is(rangeText([{ port: 80 }], [{ port: 90 }]), '80-90');
  t.throws(() => rangeText([...F4], [...F4, { ipv4: '10.0.0.1' }]), { message: /interval element/ });
});
