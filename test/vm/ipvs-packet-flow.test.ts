/**
 * The packet-flow table (test/support/packet-flow.ts), which every mode
 * runs, in IPVS mode on the guest's kernel: real connections from clients
 * in their own network namespaces to ClusterIPs, NodePorts on the node's
 * address, an external IP and a LoadBalancer IP with source ranges, both
 * traffic policies and terminating endpoints. Each case is also traced over
 * the live state (`drover trace --mode ipvs`, through the driver in the
 * node's namespace): the trace must name the real servers real connections
 * reach, the same masquerade, or the same verdict.
 */
import test from 'ava';
import { formatTrace } from '../../src/inspect/trace-format.ts';
import { ipvsTraceFormat } from '../../src/modes/ipvs/trace.ts';
import { probe } from '../../src/testbed/probe.ts';
import { createTopology, type Topology } from '../../src/testbed/topology.ts';
import { BACKENDS, CASES, CLIENTS, CLUSTER_CIDR, checkTraced, flowProbeTimeoutMs, NODE_IP, SERVICES, STATE } from '../support/packet-flow.ts';
import { Driver } from './support/driver-client.ts';
import { registerIpvsTests } from './support/env.ts';

let topo: Topology;
let driver: Driver;

if (await registerIpvsTests('IPVS packet-flow tests')) {
  test.before(async () => {
    topo = await createTopology({ backends: BACKENDS, nodeIp: NODE_IP, clients: CLIENTS, readyTimeoutMs: 120_000 });
    // IPVS refuses a connection to a virtual server without real servers with an ICMP port unreachable, which the kernel rate-limits.
    await topo.exec(topo.node, 'sysctl', ['-q', '-w', 'net.ipv4.icmp_ratelimit=0']);
    driver = await Driver.start(topo.node);
    await driver.open({ readNodeAddresses: true, render: { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false } });
    await driver.sync(SERVICES, { full: true }, STATE.node);
  });

  test.after.always(async () => {
    await driver?.stop();
    await topo?.destroy();
  });

  test.serial('the kernel reads back as programmed: a second full sync writes nothing', async (t) => {
    const again = await driver.sync(SERVICES, { full: true }, STATE.node);
    t.like(again.result, { transactions: 0 });
  });

  for (const c of CASES) {
    test.serial(c.what, async (t) => {
      const from = topo.client(c.from);
      const count = c.error ? 3 : 9;
      const real = await probe(topo, { from: from.netns, host: c.host, port: c.port, count, timeoutMs: flowProbeTimeoutMs(c.error) });
      const traced = await driver.trace({ src: from.ip, dst: c.host, dport: c.port, proto: 'tcp' });
      t.log(JSON.stringify({ counts: real.counts, errors: real.errors, traced: traced.outcomes.map((o) => [o.verdict, o.masqueraded]) }));
      t.log(`\n${formatTrace(traced, ipvsTraceFormat)}`);
      if (c.error) {
        t.deepEqual(real.errors, { [c.error]: count });
      } else {
        t.deepEqual([Object.keys(real.counts).sort(), real.errors], [c.reach, {}]);
        const expected = c.seen === 'client' ? from.ip : topo.gateway;
        for (const name of c.reach!) t.deepEqual(real.clientsSeen[name], [expected], `${name} sees ${expected}`);
      }
      checkTraced(t, c, traced.outcomes, (name) => topo.backend(name).ip, 'refused');
    });
  }
}
