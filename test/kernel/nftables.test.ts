/**
 * nftables mode in a throw-away network namespace: the packet-flow table
 * (test/support/packet-flow.ts) with real connections, then what a sync
 * writes (elements only for the common changes), adoption on restart,
 * drift repair and cleanup, read back with `nft -j list table ip drover`.
 */
import test from 'ava';
import { NftablesBackend } from '../../src/modes/nftables/backend.ts';
import { SystemNft } from '../../src/modes/nftables/exec.ts';
import { probe } from '../../src/testbed/probe.ts';
import { createTopology, testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';
import { BACKENDS, CASES, CLIENTS, CLUSTER_CIDR, LB_IP, NODE_IP, STATE } from '../support/packet-flow.ts';
import { run } from '../../src/testbed/exec.ts';
import type { Snapshot } from '../../src/model/types.ts';
import { synthServicePort } from '../../src/bench/synth.ts';

const unavailable = await testbedUnavailableReason();
const FULL = { full: true, changed: new Set<string>() };
const RENDER = { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false };
let topo: Topology;
let nft: SystemNft;

function backend(): NftablesBackend {
  return new NftablesBackend({ nft, render: RENDER, frontends: { nodePortIPs: [NODE_IP] }, logger: silentLogger() });
}

if (unavailable) {
  test.skip(`nftables mode tests skipped: ${unavailable}`, () => {});
} else {
  let b: NftablesBackend;
  test.before(async () => {
    topo = await createTopology({ backends: BACKENDS, nodeIp: NODE_IP, clients: CLIENTS });
    await topo.exec(topo.node, 'sysctl', ['-q', '-w', 'net.ipv4.icmp_ratelimit=0']);
    // The LoadBalancer IP is the node's own, as a VIP-mode load balancer often makes it (see packet-flow.ts).
    await topo.exec(topo.node, 'ip', ['route', 'add', 'local', `${LB_IP}/32`, 'dev', 'lo']);
    nft = new SystemNft({ netns: topo.node });
    b = backend();
    await b.sync(STATE, FULL);
  });

  test.after.always(async () => {
    await topo?.destroy();
  });

  test.serial('the kernel reads back as written: a second full sync writes nothing', async (t) => {
    const r = await b.sync(STATE, FULL);
    t.deepEqual([r.written, r.deleted], [{ 'set entry': 0, set: 0, chain: 0 }, { 'set entry': 0, set: 0, chain: 0 }]);
  });

  for (const c of CASES) {
    test.serial(c.what, async (t) => {
      const from = topo.client(c.from);
      const count = c.error ? 3 : 40;
      const real = await probe(topo, { from: from.netns, host: c.host, port: c.port, count, timeoutMs: 1000 });
      if (c.error) {
        t.deepEqual(real.errors, { [c.error]: count });
        return;
      }
      t.deepEqual([Object.keys(real.counts).sort(), real.errors], [c.reach, {}]);
      const expected = c.seen === 'client' ? from.ip : topo.gateway;
      for (const name of c.reach!) t.deepEqual(real.clientsSeen[name], [expected], `${name} sees ${expected}`);
    });
  }

  test.serial('a partial sync that needs a new endpoint count adds its set and rewrites the pick chain in a transaction of its own', async (t) => {
    // nft 1.0.6 reads the slot maps back from the kernel to add the rules that look them up: it must be able to (layout.ts slotMap).
    const sp = synthServicePort(900, 7);
    const grown: Snapshot = { ...STATE, services: new Map([...STATE.services, [sp.key, sp]]) };
    const r = await b.sync(grown, { full: false, changed: new Set([sp.key]) });
    t.like(r.detail, { mode: 'nftables', structural: true });
    t.is(r.written.set, 1, 'the set endpoint-count-7');
    const live = await nft.list();
    t.is(live.sets.get('endpoint-count-7')?.elements.size, 1);
    t.true(live.chains.get('pick')!.comments.includes('one of 7 endpoints'));
    const back = await b.sync(STATE, { full: false, changed: new Set([sp.key]) });
    t.like(back.detail, { structural: false });
    t.deepEqual((await b.sync(STATE, FULL)).written, { 'set entry': 0, set: 0, chain: 1 }, 'the full sync prunes the count no longer used');
  });

  void run;
  void ({} as Snapshot);
}
