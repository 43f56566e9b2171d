/**
 * The packet-flow table (test/support/packet-flow.ts) through the rules
 * drover writes, by the trace evaluator alone: no kernel, no root. Every
 * mode of the registry (src/modes/registry.ts) runs it on its fakes
 * (ModeDriver.fake): a full sync of the table's Services, then each case
 * traced through what the fakes hold. The same table runs with real
 * traffic in test/kernel/frontends.test.ts (iptables),
 * test/kernel/nftables.test.ts and test/vm/ipvs-packet-flow.test.ts (IPVS,
 * in the guest).
 */
import test from 'ava';
import { trace } from '../../src/inspect/trace.ts';
import { allModes } from '../../src/modes/registry.ts';
import { CASES, CLIENTS, CLUSTER_CIDR, NODE_ADDRESSES, STATE, checkTraced } from '../support/packet-flow.ts';

// The node's addresses: on the client links, on the backend links, and the LoadBalancer VIP (which IPVS mode,
// finding it among the host's addresses, does not bind to kube-ipvs0).
const traced = await Promise.all(
  allModes().map(async (mode) => {
    const fake = await mode.fake({ render: { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false }, nodeAddresses: NODE_ADDRESSES });
    await fake.backend.sync(STATE, { full: true, changed: new Set() });
    return { mode, ctx: await fake.trace() };
  }),
);

for (const { mode, ctx } of traced) {
  for (const c of CASES) {
    test(`${mode.title} mode, traced: ${c.what}`, (t) => {
      const src = CLIENTS.find((x) => x.name === c.from)!.ip;
      checkTraced(t, c, trace(ctx, { src, dst: c.host, dport: c.port, proto: 'tcp' }).outcomes, undefined, 'any');
    });
  }
}
