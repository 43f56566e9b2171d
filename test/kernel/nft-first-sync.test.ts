/**
 * nftables mode's first sync from empty, in a network namespace: the
 * structure by one `nft -f`, the elements over nf_tables netlink in as many
 * batches as the socket takes (backend.ts write, batches.ts). The table read
 * back is what a full sync wants (a second full sync writes nothing), and
 * real connections reach the backends.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import type { SyncResult } from '../../src/proxier/backend.ts';
import { NftablesBackend } from '../../src/modes/nftables/backend.ts';
import { SystemNft } from '../../src/modes/nftables/exec.ts';
import { probe } from '../../src/testbed/probe.ts';
import { createTopology, testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';
import { BACKENDS, CLIENTS, CLUSTER_CIDR, LB_IP, NODE_IP } from '../support/packet-flow.ts';
import { bigState, SYNTHETIC } from '../support/nft-first-sync.ts';
import { run } from '../../src/kernel/exec.ts';
import { moduleArgv } from '../../src/util/node-module.ts';

const unavailable = await testbedUnavailableReason();

if (unavailable) {
  test.skip(`nftables first-sync tests skipped: ${unavailable}`, () => {});
} else {
  let topo: Topology;
  test.before(async () => {
    topo = await createTopology({ backends: BACKENDS, nodeIp: NODE_IP, clients: CLIENTS });
    await topo.exec(topo.node, 'ip', ['route', 'add', 'local', `${LB_IP}/32`, 'dev', 'lo']);
  });
  test.after.always(async () => {
    await topo?.destroy();
  });

  test.serial(`a first sync from empty of ${SYNTHETIC} extra service ports: nft -f for the structure, netlink batches for the elements; the kernel holds what a full sync wants, and traffic flows`, async (t) => {
    const r = await run('ip', ['netns', 'exec', topo.node, ...moduleArgv(import.meta.url, '../support/nft-first-sync'), NODE_IP], { allowFail: true, timeoutMs: 120_000 });
    t.is(r.code, 0, r.stderr);
    const result = JSON.parse(r.stdout) as Pick<SyncResult, 'written' | 'deleted' | 'transactions' | 'detail'>;
    t.deepEqual(result.detail, { mode: 'nftables', via: 'nft+netlink', structural: true });
    t.log(`${result.transactions} transactions`);
    t.true(result.transactions >= 3, `one nft -f and at least two netlink batches: ${result.transactions} transactions`);
    const nft = new SystemNft({ netns: topo.node });
    const live = await nft.list();
    t.is(live.sets.get('endpoints')!.elements.size >= SYNTHETIC * 10, true);
    t.true(live.sets.get('service-ips')!.elements.has('10.100.5.219 . tcp . 80'), 'the last synthetic ClusterIP (1499) is programmed');
    const again = await new NftablesBackend({ nft, render: { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false }, frontends: { nodePortIPs: [NODE_IP] }, logger: silentLogger() }).sync(bigState(), { full: true, changed: new Set() });
    t.deepEqual([again.written, again.deleted], [{ 'set entry': 0, set: 0, chain: 0 }, { 'set entry': 0, set: 0, chain: 0 }], 'read back, the table is what a full sync wants');
    const s = await probe(topo, { from: topo.client('pod').netns, host: '10.96.0.10', port: 80, count: 30 });
    t.deepEqual(Object.keys(s.counts).sort(), ['b1', 'b2', 'b3']);
    const tables = (await run('ip', ['netns', 'exec', topo.node, '/usr/sbin/nft', 'list tables'], {})).stdout;
    t.is(tables.trim(), 'table ip drover');
  });
}
