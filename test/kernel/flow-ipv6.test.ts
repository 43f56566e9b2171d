/**
 * The IPv6 cases of the packet-flow table (test/support/packet-flow6.ts)
 * through drover's IPv6 iptables rules (the dual-stack backend, through
 * ip6tables), with real connections between network namespaces. Each case
 * is also traced against the live IPv6 rules (`drover trace`'s evaluator
 * on ip6tables-save, checked with packet-flow.ts checkTraced): the trace
 * must name the endpoints real connections reach, or the same verdict.
 */
import test from 'ava';
import { trace } from '../../src/inspect/trace.ts';
import { DualStackIptablesBackend } from '../../src/modes/iptables/dual-stack.ts';
import { SystemIptables } from '../../src/kernel/iptables/exec.ts';
import { localAddresses, readTables } from '../../src/kernel/iptables/live.ts';
import { loadStatic6Rules, loadStaticRules } from '../../src/modes/shared/kube-chains/static.ts';
import { iptablesTraceContext } from '../../src/modes/shared/kube-chains/trace.ts';
import { run } from '../../src/kernel/exec.ts';
import { probe } from '../../src/testbed/probe.ts';
import { createTopology, testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';
import { checkTraced, CLUSTER_CIDR, flowProbeTimeoutMs, NODE_IP } from '../support/packet-flow.ts';
import { BACKENDS6, CASES6, CLIENTS6, CLUSTER_CIDR6, ip6Of, LB_IP6, NODE_IP6, STATE6 } from '../support/packet-flow6.ts';
import { DROVER } from '../support/drover-bin.ts';

const unavailable = await testbedUnavailableReason();
const FULL = { full: true, changed: new Set<string>() };
let topo: Topology;

if (unavailable) {
  test.skip(`IPv6 packet-flow tests skipped: ${unavailable}`, () => {});
} else {
  test.before(async () => {
    topo = await createTopology({ backends: BACKENDS6, nodeIp: NODE_IP, nodeIp6: NODE_IP6, clients: CLIENTS6 });
    await topo.exec(topo.node, 'sysctl', ['-q', '-w', 'net.ipv6.icmp.ratelimit=0']);
    // The LoadBalancer IP is the node's own, as in the IPv4 table.
    await topo.exec(topo.node, 'ip', ['-6', 'route', 'add', 'local', `${LB_IP6}/128`, 'dev', 'lo']);
    const backend = new DualStackIptablesBackend({
      IPv4: { exec: new SystemIptables({ variant: 'nft', netns: topo.node }), render: { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false }, statics: loadStaticRules() },
      IPv6: {
        exec: new SystemIptables({ variant: 'nft', family: 'IPv6', netns: topo.node }),
        render: { clusterCIDR: CLUSTER_CIDR6, masqueradeAll: false, family: 'IPv6' },
        statics: loadStatic6Rules(),
      },
      logger: silentLogger(),
    });
    await backend.sync(STATE6, FULL);
  });

  test.after.always(async () => {
    await topo?.destroy();
  });

  for (const c of CASES6) {
    test.serial(c.what, async (t) => {
      const from = topo.client(c.from);
      const count = c.error ? 3 : 40;
      const real = await probe(topo, { from: from.netns, host: c.host, port: c.port, count, timeoutMs: flowProbeTimeoutMs(c.error) });
      const exec = new SystemIptables({ variant: 'nft', family: 'IPv6', netns: topo.node });
      const traced = trace(iptablesTraceContext(await readTables(exec), await localAddresses(topo.node, 'IPv6')), { src: ip6Of(c.from), dst: c.host, dport: c.port, proto: 'tcp' });
      checkTraced(t, c, traced.outcomes, ip6Of);
      if (c.error) {
        t.deepEqual(real.errors, { [c.error]: count });
        return;
      }
      t.deepEqual([Object.keys(real.counts).sort(), real.errors], [c.reach, {}]);
      t.true(real.results.every((r) => r.ok && r.reply.ip.includes(':')), 'answered on the backends IPv6 addresses');
      const expected = c.seen === 'client' ? ip6Of(c.from) : topo.ipv6.gateway;
      for (const name of c.reach!) t.deepEqual(real.clientsSeen[name], [expected], `${name} sees ${expected}`);
    });
  }

  test.serial('drover trace --mode iptables walks the IPv6 tables for an [ipv6]:port destination', async (t) => {
    const drover = (args: string[]) => run(process.execPath, [DROVER, 'trace', '--mode', 'iptables', '--netns', topo.node, ...args], { allowFail: true, timeoutMs: 60_000 });
    const traced = await drover(['--src', ip6Of('outside'), '--dst', '[fd00:96::10]:80']);
    t.is(traced.code, 0, traced.stderr);
    t.true(traced.stdout.startsWith(`trace ${ip6Of('outside')} -> [fd00:96::10]:80/tcp, a new connection from outside the node: nat PREROUTING\n`), traced.stdout);
    t.regex(traced.stdout, /\(line numbers are those of ip6tables-save -t TABLE, iptables-nft\)/);
    t.regex(traced.stdout, /DNAT to \[fd00:244:1::2\]:8080/);
    const mixed = await drover(['--src', ip6Of('outside'), '--dst', '10.96.0.10:80']);
    t.is(mixed.code, 1, mixed.stdout);
    t.regex(mixed.stderr, /are of different IP families/);
  });
}
