/**
 * The packet-flow table (test/support/packet-flow.ts) through the rules
 * drover renders, by the trace evaluator alone: no kernel, no root. In
 * iptables mode on the fake iptables; in IPVS mode on the fakes of
 * test/support/ipvs-world.ts, with IPVS as the trace's dataplane. The same
 * table runs with real traffic in test/kernel/frontends.test.ts (iptables),
 * test/kernel/nftables.test.ts and test/vm/ipvs-packet-flow.test.ts (IPVS,
 * in the guest).
 */
import test from 'ava';
import { trace } from '../../src/inspect/trace.ts';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { FakeIptables } from '../../src/modes/iptables/fake.ts';
import { readTables } from '../../src/modes/iptables/live.ts';
import { iptablesTraceContext } from '../../src/modes/iptables/trace.ts';
import { readIpvsLive } from '../../src/modes/ipvs/live.ts';
import { ipvsTraceContext } from '../../src/modes/ipvs/trace.ts';
import { silentLogger } from '../../src/util/log.ts';
import { World } from '../support/ipvs-world.ts';
import { backendIP, CASES, CLIENTS, CLUSTER_CIDR, NODE_ADDRESSES, NODE_IP, STATE, checkTraced } from '../support/packet-flow.ts';

const fake = new FakeIptables();
await new IptablesBackend({ exec: fake, render: { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false }, logger: silentLogger() }).sync(STATE, { full: true, changed: new Set() });
const ctx = iptablesTraceContext(await readTables(fake), new Set(NODE_ADDRESSES));

for (const c of CASES) {
  test(`iptables mode, traced: ${c.what}`, (t) => {
    const src = CLIENTS.find((x) => x.name === c.from)!.ip;
    checkTraced(t, c, trace(ctx, { src, dst: c.host, dport: c.port, proto: 'tcp' }).outcomes);
  });
}

// IPVS mode: the node's NodePort addresses as the guest's testbed node has them (its client and backend links);
// the LoadBalancer IP is not one of the host's, so IPVS mode binds it to kube-ipvs0.
const ipvs = new World();
await ipvs.backend({ render: { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false }, nodeAddresses: { nodePortIPs: ['10.244.0.1', NODE_IP], hostAddresses: ['10.244.0.1', NODE_IP] } }).sync(STATE, { full: true, changed: new Set() });
const ipvsLive = await readIpvsLive(ipvs, { tables: true });
const ipvsCtx = ipvsTraceContext(ipvsLive, new Set(['10.244.0.1', NODE_IP, ...(ipvsLive.bound ?? []).map((a) => a.address)]));

for (const c of CASES) {
  test(`IPVS mode, traced: ${c.what}`, (t) => {
    const src = CLIENTS.find((x) => x.name === c.from)!.ip;
    checkTraced(t, c, trace(ipvsCtx, { src, dst: c.host, dport: c.port, proto: 'tcp' }).outcomes, backendIP, 'refused');
  });
}
