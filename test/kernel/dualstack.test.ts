/**
 * Dual-stack in iptables mode with real packets: one Service with an IPv6
 * and an IPv4 ClusterIP (test/fixtures/dualstack/services.yaml), backends
 * with an address of each family, in throw-away namespaces. Connections to
 * each ClusterIP reach the backends through that family, the IPv6 rules
 * read back from ip6tables-save equal the rendered ones, and a failure of
 * one family's restore leaves the other family's rules in place.
 */
import test from 'ava';
import { DualStackIptablesBackend, FamilySyncError } from '../../src/modes/iptables/dual-stack.ts';
import { SystemIptables } from '../../src/kernel/iptables/exec.ts';
import { loadStatic6Rules, loadStaticRules } from '../../src/modes/shared/kube-chains/static.ts';
import { iptablesStatics6 } from '../../src/modes/shared/kube-chains/node-ports.ts';
import { nodePortAddressesArg } from '../../src/cli/options.ts';
import { probe } from '../../src/testbed/probe.ts';
import { testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';
import { CLUSTER_CIDRS, dualStackWorld } from '../support/dualstack.ts';
import type { Snapshot } from '../../src/model/types.ts';

const unavailable = await testbedUnavailableReason();
const FULL = { full: true, changed: new Set<string>() };
let topo: Topology;
let snapshot: Snapshot;

/** The dual-stack backend in the node namespace; `ipv6Netns` overrides where the IPv6 half writes, `statics6` the IPv6 static rules. */
function dualStack(ipv6Netns = topo.node, statics6 = loadStatic6Rules()): DualStackIptablesBackend {
  return new DualStackIptablesBackend({
    IPv4: { exec: new SystemIptables({ variant: 'nft', netns: topo.node }), render: { clusterCIDR: CLUSTER_CIDRS.IPv4, masqueradeAll: false }, statics: loadStaticRules() },
    IPv6: {
      exec: new SystemIptables({ variant: 'nft', family: 'IPv6', netns: ipv6Netns }),
      render: { clusterCIDR: CLUSTER_CIDRS.IPv6, masqueradeAll: false, family: 'IPv6' },
      statics: statics6,
    },
    logger: silentLogger(),
  });
}

if (unavailable) {
  test.skip(`dual-stack kernel tests skipped: ${unavailable}`, () => {});
} else {
  test.before(async () => {
    ({ snapshot, topo } = await dualStackWorld());
  });

  test.after.always(async () => {
    await topo?.destroy();
  });

  test.serial('connections to the IPv6 and the IPv4 ClusterIP of one Service reach backends of that family', async (t) => {
    const backend = dualStack();
    const first = await backend.sync(snapshot, FULL);
    t.true(first.written.chain! > 0);
    const v6 = await probe(topo, { from: topo.client('outside').netns, host: 'fd00:96::10', port: 80, count: 30 });
    t.deepEqual(v6.errors, {});
    t.deepEqual(Object.keys(v6.counts).sort(), ['b1', 'b2']);
    t.true(v6.results.every((r) => r.ok && r.reply.ip.includes(':')), 'answered on the backends IPv6 addresses');
    t.deepEqual([...new Set(Object.values(v6.clientsSeen).flat())], [topo.ipv6.gateway], 'from outside fd00:244::/48: masqueraded to the node');
    const v4 = await probe(topo, { from: topo.client('outside').netns, host: '10.96.0.10', port: 80, count: 30 });
    t.deepEqual(v4.errors, {});
    t.deepEqual(Object.keys(v4.counts).sort(), ['b1', 'b2']);
    t.true(v4.results.every((r) => r.ok && !r.reply.ip.includes(':')), 'answered on the backends IPv4 addresses');
    // The single-stack IPv6 Service, and the NodePort on the node's IPv6 address.
    const only6 = await probe(topo, { from: topo.client('outside').netns, host: 'fd00:96::20', port: 80, count: 5 });
    t.deepEqual(only6.counts, { b3: 5 });
    const nodePort = await probe(topo, { from: topo.client('outside').netns, host: topo.ipv6.nodeIp, port: 30080, count: 10 });
    t.deepEqual(nodePort.errors, {});
    t.deepEqual(Object.keys(nodePort.counts).sort(), ['b1', 'b2']);
  });

  test.serial('the IPv6 rules read back from ip6tables-save equal the rendered ones: a second full sync writes nothing', async (t) => {
    const again = await dualStack().sync(snapshot, FULL);
    t.deepEqual({ written: again.written, deleted: again.deleted, transactions: again.transactions }, { written: { chain: 0, rule: 0 }, deleted: { chain: 0, rule: 0 }, transactions: 0 });
    const save = await topo.exec(topo.node, 'ip6tables-nft-save', ['-t', 'nat']);
    t.regex(save.stdout, /-A KUBE-SEP-\S+ -p tcp -m comment --comment "default\/web:http" -m tcp -j DNAT --to-destination \[fd00:244:1::2\]:8080\n/);
  });

  test.serial('a failing IPv6 restore never stops the IPv4 sync (kube-proxy issue 73157)', async (t) => {
    // The IPv6 half writes into a namespace that does not exist: every ip6tables command fails.
    const backend = dualStack(`${topo.node}-missing`);
    const without = new Map(snapshot.services);
    without.delete('default/empty:http');
    const err = await t.throwsAsync(backend.sync({ ...snapshot, services: without }, FULL), { instanceOf: FamilySyncError });
    t.deepEqual(err!.failures.map((f) => f.family), ['IPv6']);
    // The IPv4 change was written: the empty Service's REJECT is gone from the IPv4 filter table.
    const filter = await topo.exec(topo.node, 'iptables-nft-save', ['-t', 'filter']);
    t.false(filter.stdout.includes('default/empty:http'));
    const v4 = await probe(topo, { from: topo.client('outside').netns, host: '10.96.0.10', port: 80, count: 5 });
    t.deepEqual(v4.errors, {});
  });

  test.serial('--nodeport-addresses with an IPv6 CIDR: IPv6 NodePorts answer only on the listed addresses; without one, on every address again', async (t) => {
    const v4only = await iptablesStatics6(nodePortAddressesArg('192.168.100.0/24'), topo.node);
    t.is(v4only, loadStatic6Rules(), 'no IPv6 CIDR: every IPv6 address');
    // fd00:244::1 is the node's address on the backend links, not the one the client reaches.
    await dualStack(topo.node, await iptablesStatics6(nodePortAddressesArg('192.168.100.0/24,fd00:244::/64'), topo.node)).sync(snapshot, FULL);
    const nat = (await topo.exec(topo.node, 'ip6tables-nft-save', ['-t', 'nat'])).stdout;
    t.regex(nat, /^-A PREROUTING -d fd00:244::1\/128 -m comment --comment "kubernetes service nodeports" -j KUBE-NODEPORTS$/m);
    t.notRegex(nat, /--dst-type LOCAL -j KUBE-NODEPORTS/);
    const refused = await probe(topo, { from: topo.client('outside').netns, host: topo.ipv6.nodeIp, port: 30080, count: 3, timeoutMs: 1000 });
    t.deepEqual(refused.errors, { ECONNREFUSED: 3 }, 'nothing listens on the node address itself');
    // The IPv4 NodePort is untouched by the IPv6 CIDR: it still answers on 192.168.100.1.
    const v4 = await probe(topo, { from: topo.client('outside').netns, host: topo.nodeIp, port: 30080, count: 5 });
    t.deepEqual(v4.errors, {});
    await dualStack(topo.node, await iptablesStatics6(nodePortAddressesArg('fd00:100::/64'), topo.node)).sync(snapshot, FULL);
    const listed = await probe(topo, { from: topo.client('outside').netns, host: topo.ipv6.nodeIp, port: 30080, count: 10 });
    t.deepEqual([Object.keys(listed.counts).sort(), listed.errors], [['b1', 'b2'], {}]);
    await dualStack().sync(snapshot, FULL);
    t.deepEqual(
      (await topo.exec(topo.node, 'ip6tables-nft-save', ['-t', 'nat'])).stdout.split('\n').filter((l) => l.startsWith('-A PREROUTING')),
      [
        '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
        '-A PREROUTING ! -d ::1/128 -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS',
      ],
      'the per-address hook is gone, the hooks are in order',
    );
  });
}
