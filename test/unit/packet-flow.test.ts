/**
 * The packet-flow table (test/support/packet-flow.ts) through the rules
 * drover renders, by the trace evaluator alone: no kernel, no root. The
 * same table runs with real traffic in test/kernel/frontends.test.ts.
 */
import test from 'ava';
import { trace } from '../../src/inspect/trace.ts';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { FakeIptables } from '../../src/modes/iptables/fake.ts';
import { readTables } from '../../src/modes/iptables/live.ts';
import { iptablesTraceContext } from '../../src/modes/iptables/trace.ts';
import { silentLogger } from '../../src/util/log.ts';
import { backendIP, CASES, CLIENTS, CLUSTER_CIDR, NODE_ADDRESSES, STATE, checkTraced } from '../support/packet-flow.ts';

const fake = new FakeIptables();
await new IptablesBackend({ exec: fake, render: { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false }, logger: silentLogger() }).sync(STATE, { full: true, changed: new Set() });
const ctx = iptablesTraceContext(await readTables(fake), new Set(NODE_ADDRESSES));

for (const c of CASES) {
  test(`iptables mode, traced: ${c.what}`, (t) => {
    const src = CLIENTS.find((x) => x.name === c.from)!.ip;
    checkTraced(t, c, trace(ctx, { src, dst: c.host, dport: c.port, proto: 'tcp' }).outcomes);
  });
}
