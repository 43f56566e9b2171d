/**
 * The DNS dataplane in a network namespace of its own: written with
 * iptables-nft and with nft, read back, written again (idempotent), then
 * removed by what `drover cleanup` runs.
 */
import test from 'ava';
import { programDnsDataplane, removeDnsDataplane } from '../../src/dns/dataplane.ts';
import { nodeDnsStateIn } from '../../src/dns/node-dns.ts';
import { DROVER } from '../support/drover-bin.ts';
import { withNetns } from '../../src/testbed/netns.ts';
import { run } from '../../src/kernel/exec.ts';
import { NFT } from '../../src/modes/nftables/exec.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';

const unavailable = await testbedUnavailableReason();
const EP = { address: '169.254.20.10', port: 53 };

if (unavailable) {
  test.skip(`DNS dataplane tests skipped: ${unavailable}`, () => {});
} else {
  test('iptables: DROVER-DNS in raw and filter, jumped to once from each hook, then removed', async (t) => {
    await withNetns(async (netns) => {
      await programDnsDataplane(EP, { nftables: false, iptables: 'nft', netns });
      await programDnsDataplane(EP, { nftables: false, iptables: 'nft', netns });
      const raw = (await run('iptables-nft-save', ['-t', 'raw'], { netns })).stdout;
      const filter = (await run('iptables-nft-save', ['-t', 'filter'], { netns })).stdout;
      const lines = (text: string) => text.split('\n').filter((l) => l.startsWith('-A '));
      t.deepEqual(lines(raw), [
        '-A PREROUTING -m comment --comment "drover node DNS" -j DROVER-DNS',
        '-A OUTPUT -m comment --comment "drover node DNS" -j DROVER-DNS',
        '-A DROVER-DNS -d 169.254.20.10/32 -p udp -m udp --dport 53 -j NOTRACK',
        '-A DROVER-DNS -s 169.254.20.10/32 -p udp -m udp --sport 53 -j NOTRACK',
        '-A DROVER-DNS -d 169.254.20.10/32 -p tcp -m tcp --dport 53 -j NOTRACK',
        '-A DROVER-DNS -s 169.254.20.10/32 -p tcp -m tcp --sport 53 -j NOTRACK',
      ]);
      t.deepEqual(lines(filter).filter((l) => l.includes('DROVER-DNS')).length, 6);
      t.deepEqual(await removeDnsDataplane(netns), { chains: 2, rules: 4, tables: 0 });
      t.deepEqual(lines((await run('iptables-nft-save', ['-t', 'raw'], { netns })).stdout), []);
    });
  });

  test('nftables: the table inet drover-dns, written whole again, then removed', async (t) => {
    await withNetns(async (netns) => {
      await programDnsDataplane(EP, { nftables: true, iptables: 'auto', netns });
      await programDnsDataplane(EP, { nftables: true, iptables: 'auto', netns });
      const table = (await run(NFT, ['list', 'table', 'inet', 'drover-dns'], { netns })).stdout;
      t.is(table.match(/notrack/g)?.length, 8);
      t.is(table.match(/accept$/gm)?.length, 8);
      t.regex(table, /type filter hook prerouting priority raw; policy accept;\n\s+ip daddr 169\.254\.20\.10 udp dport 53 notrack/);
      t.deepEqual(await removeDnsDataplane(netns), { chains: 0, rules: 0, tables: 1 });
      t.is((await run(NFT, ['list', 'tables'], { netns })).stdout.trim(), '');
    });
  });

  test("another namespace's node DNS links and labelled address are named, by cleanup --netns too, which cannot remove them", async (t) => {
    await withNetns(async (netns) => {
      t.deepEqual(await nodeDnsStateIn(netns), []);
      // The host kernel has no dummy driver: a veth stands in for the link of that name.
      await run('ip', ['-n', netns, 'link', 'add', 'drover-dns0', 'type', 'veth', 'peer', 'name', 'drv-peer0']);
      await run('ip', ['-n', netns, 'addr', 'add', '192.0.2.10/32', 'dev', 'lo', 'label', 'lo:drover-cdns']);
      t.deepEqual(await nodeDnsStateIn(netns), ['drover-dns0', 'the address labelled lo:drover-cdns']);
      const res = await run(process.execPath, [DROVER, 'cleanup', '--netns', netns], { allowFail: true, timeoutMs: 60_000 });
      t.is(res.code, 0, res.stderr);
      t.regex(res.stderr, new RegExp(`^drover: network namespace ${netns} holds node DNS state \\(drover-dns0, the address labelled lo:drover-cdns\\) that --netns cannot remove: run \`ip netns exec ${netns} drover cleanup\`$`, 'm'));
    });
  });
}
