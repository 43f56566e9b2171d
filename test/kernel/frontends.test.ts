/**
 * The packet-flow table (test/support/packet-flow.ts) through drover's
 * iptables rules, with real connections between network namespaces:
 * ClusterIPs, NodePorts on the node's address, external IPs and
 * LoadBalancer IPs routed to the node, loadBalancerSourceRanges, both
 * traffic policies and terminating endpoints. Each case is also traced
 * against the live rules: the trace must name the endpoints real
 * connections reach, or the same verdict.
 */
import test from 'ava';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { SystemIptables } from '../../src/kernel/iptables/exec.ts';
import { localAddresses, readTables } from '../../src/kernel/iptables/live.ts';
import { iptablesTraceContext } from '../../src/modes/shared/kube-chains/trace.ts';
import { trace } from '../../src/inspect/trace.ts';
import { probe } from '../../src/testbed/probe.ts';
import { createTopology, testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';
import { affinityRun } from '../support/affinity.ts';
import { BACKENDS, CASES, CLIENTS, CLUSTER_CIDR, flowProbeTimeoutMs, LB_IP, NODE_IP, STATE } from '../support/packet-flow.ts';
import { iptablesStatics } from '../../src/modes/shared/kube-chains/node-ports.ts';
import { nodePortAddressesArg } from '../../src/cli/options.ts';

const unavailable = await testbedUnavailableReason();
const FULL = { full: true, changed: new Set<string>() };
let topo: Topology;
let backend: IptablesBackend;

if (unavailable) {
  test.skip(`external frontend tests skipped: ${unavailable}`, () => {});
} else {
  test.before(async () => {
    topo = await createTopology({
      backends: BACKENDS,
      nodeIp: NODE_IP,
      clients: CLIENTS,
    });
    await topo.exec(topo.node, 'sysctl', ['-q', '-w', 'net.ipv4.icmp_ratelimit=0']);
    // The LoadBalancer IP is the node's own, as a VIP-mode load balancer often makes it: without the
    // firewall rule a connection from outside the source range would be refused, not dropped.
    await topo.exec(topo.node, 'ip', ['route', 'add', 'local', `${LB_IP}/32`, 'dev', 'lo']);
    backend = new IptablesBackend({ exec: new SystemIptables({ variant: 'nft', netns: topo.node }), render: { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false }, logger: silentLogger() });
    await backend.sync(STATE, FULL);
  });

  test.after.always(async () => {
    await topo?.destroy();
  });

  test.serial('the kernel reads back as rendered: a second full sync writes nothing', async (t) => {
    t.deepEqual((await backend.sync(STATE, FULL)).written, { chain: 0, rule: 0 });
  });

  for (const c of CASES) {
    test.serial(c.what, async (t) => {
      const from = topo.client(c.from);
      const count = c.error ? 3 : 40;
      const real = await probe(topo, { from: from.netns, host: c.host, port: c.port, count, timeoutMs: flowProbeTimeoutMs(c.error) });
      const traced = trace(iptablesTraceContext(await readTables(new SystemIptables({ variant: 'nft', netns: topo.node })), await localAddresses(topo.node)), {
        src: from.ip,
        dst: c.host,
        dport: c.port,
        proto: 'tcp',
      });
      if (c.error) {
        t.deepEqual(real.errors, { [c.error]: count });
        t.deepEqual(
          traced.outcomes.map((o) => o.verdict.kind),
          [c.error === 'ECONNREFUSED' ? 'reject' : 'drop'],
        );
        return;
      }
      t.deepEqual([Object.keys(real.counts).sort(), real.errors], [c.reach, {}]);
      const expected = c.seen === 'client' ? from.ip : topo.gateway;
      for (const name of c.reach!) t.deepEqual(real.clientsSeen[name], [expected], `${name} sees ${expected}`);
      const ips = traced.outcomes.flatMap((o) => (o.verdict.kind === 'dnat' ? [o.verdict.ip] : [])).sort();
      t.deepEqual(ips, c.reach!.map((n) => topo.backend(n).ip).sort(), 'trace names the endpoints reached');
      t.true(traced.outcomes.every((o) => o.masqueraded === (c.seen === 'node')), 'trace agrees on masquerade');
    });
  }

  test.serial('ClientIP affinity: a client keeps its endpoint, through the ClusterIP and the NodePort alike; after the timeout it may move', async (t) => {
    const from = topo.client('outside').netns;
    const { each: [viaNodePort, viaClusterIP], after: seen } = await affinityRun(topo, from, [{ host: NODE_IP, port: 30084 }, { host: '10.96.0.14', port: 80 }]);
    t.deepEqual([viaNodePort!.errors, viaClusterIP!.errors], [{}, {}]);
    t.is(Object.keys(viaNodePort!.counts).length, 1, `one endpoint through the NodePort: ${JSON.stringify(viaNodePort!.counts)}`);
    t.deepEqual(Object.keys(viaClusterIP!.counts), Object.keys(viaNodePort!.counts), 'the same endpoint through the ClusterIP');
    t.true(seen.size >= 2, `after the timeout the client moved: ${[...seen].join(', ')}`);
  });

  test.serial('--nodeport-addresses: NodePorts answer only on the listed address; a later full sync without it swaps the hooks back', async (t) => {
    const exec = new SystemIptables({ variant: 'nft', netns: topo.node });
    const make = async (cidrs?: string) =>
      new IptablesBackend({
        exec,
        render: { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false },
        logger: silentLogger(),
        statics: await iptablesStatics(cidrs === undefined ? undefined : nodePortAddressesArg(cidrs), topo.node),
      });
    // 10.244.0.1 is the node's address on the backend links, not the one the client reaches.
    await (await make('10.244.0.0/24')).sync(STATE, FULL);
    const nat = await exec.save('nat');
    t.regex(nat, /^-A PREROUTING -d 10\.244\.0\.1\/32 -m comment --comment "kubernetes service nodeports" -j KUBE-NODEPORTS$/m);
    t.notRegex(nat, /--dst-type LOCAL -j KUBE-NODEPORTS/);
    const refused = await probe(topo, { from: topo.client('outside').netns, host: NODE_IP, port: 30080, count: 3, timeoutMs: 1000 });
    t.deepEqual(refused.errors, { ECONNREFUSED: 3 }, 'nothing listens on the node address itself');
    const back = await make();
    await back.sync(STATE, FULL);
    t.deepEqual(
      (await exec.save('nat')).split('\n').filter((l) => l.startsWith('-A PREROUTING')),
      [
        '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
        '-A PREROUTING ! -d 127.0.0.0/8 -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS',
      ],
      'the per-address hook is gone, the hooks are in order',
    );
    const s = await probe(topo, { from: topo.client('outside').netns, host: NODE_IP, port: 30080, count: 30 });
    t.deepEqual([Object.keys(s.counts).sort(), s.errors], [['b1', 'b2', 'b3'], {}]);
    t.deepEqual((await back.sync(STATE, FULL)).written, { chain: 0, rule: 0 });
  });
}
