/**
 * nftables mode's NodePort addresses on a real kernel (modes/nftables/
 * node-ports.ts): the node's own addresses, never those bound to a link
 * named kube-ipvs0, which are Services' addresses (IPVS mode binds its
 * ClusterIPs there). A veth stands in for IPVS mode's dummy link, which
 * this host's kernel lacks. The namespace is removed also on failure.
 */
import test from 'ava';
import { nftNodePortIPs } from '../../src/modes/nftables/node-ports.ts';
import { run } from '../../src/testbed/exec.ts';
import { withNetns } from '../../src/testbed/netns.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';

const unavailable = await testbedUnavailableReason();

if (unavailable) {
  test.skip(`nftables NodePort address tests skipped: ${unavailable}`, () => {});
} else {
  test("the addresses on kube-ipvs0 are not the node's: no NodePort on them", async (t) => {
    await withNetns(async (netns) => {
      const ip = (...args: string[]) => run('ip', ['-n', netns, ...args]);
      await ip('link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'kube-ipvs0');
      await ip('addr', 'add', '192.168.100.1/24', 'dev', 'eth0');
      await ip('addr', 'add', '172.30.0.50/32', 'dev', 'kube-ipvs0');
      t.deepEqual(await nftNodePortIPs(undefined, netns), ['192.168.100.1']);
      await ip('link', 'delete', 'eth0');
      t.deepEqual(await nftNodePortIPs(undefined, netns), []);
    });
  });
}
