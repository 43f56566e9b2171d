/**
 * What nftables mode's full resync that finds nothing to write costs, with
 * the table's structure read over nf_tables netlink against `nft -j -t
 * list table`, at one size, in a throw-away network namespace (root):
 *
 *   tsx scripts/nft-read-back-cost.ts [SERVICES [ENDPOINTS [ROUNDS]]]   # default 10000 10 3
 *
 * It programs SERVICES synthetic service ports of ENDPOINTS endpoints each
 * with a full sync (netlink element writer), then times ROUNDS of each, in
 * turn: `nft -j -t list table ip drover`, the netlink structure read
 * (NftNetlinkClient.readStructure), a full sync reading the structure over
 * netlink, and a full sync reading it with `nft -j -t` (firewall-allow with
 * `nft -j` too, as before the netlink read). Prints every time, ms, and
 * each full sync's read-back time (SyncResult.readMs).
 */
import { synthSnapshot } from '../src/bench/synth.ts';
import { inOwnNetns } from './own-netns.ts';
import { NftablesBackend, type ElementWriter } from '../src/modes/nftables/backend.ts';
import { SystemNft } from '../src/modes/nftables/exec.ts';
import { FIREWALL_ALLOW, TABLE } from '../src/modes/nftables/layout.ts';
import { NetlinkElementWriter } from '../src/modes/nftables/netlink-writer.ts';
import { NftNetlinkClient } from '../src/kernel/nftables/client.ts';
import { silentLogger } from '../src/util/log.ts';

const [services = 10_000, endpoints = 10, rounds = 3] = process.argv.slice(2).map(Number);

// Run inside a namespace of our own (netlink answers for the process's namespace), removed at the end, also on failure.
inOwnNetns(import.meta.url, 'DROVER_READ_BACK_NETNS', 'r');

const client = await NftNetlinkClient.open({ timeoutMs: 120_000 });
try {
  const writer = new NetlinkElementWriter(client);
  const snapshot = synthSnapshot(services, endpoints);
  const full = { full: true, changed: new Set<string>() };
  const backend = (elements: ElementWriter) =>
    new NftablesBackend({ nft: new SystemNft(), elements, render: { clusterCIDR: '10.244.0.0/16', masqueradeAll: false }, frontends: { nodePortIPs: ['192.168.0.1'] }, logger: silentLogger() });
  // The element writer without the structure read, firewall-allow left to nft: the read-back as it was with nft -j -t.
  const withNft: ElementWriter = {
    commit: (ops) => writer.commit(ops),
    accepts: (ops) => writer.accepts(ops),
    read: (set) => (set === FIREWALL_ALLOW ? Promise.resolve(undefined) : writer.read(set)),
    generation: () => writer.generation(),
  };
  await backend(writer).sync(snapshot, full);
  const nft = new SystemNft();
  const time = async (f: () => Promise<unknown>): Promise<number> => {
    const t0 = performance.now();
    await f();
    return Math.round(performance.now() - t0);
  };
  const out: Record<string, number[]> = { 'nft -j -t': [], 'netlink structure': [], 'resync (netlink)': [], 'read-back (netlink)': [], 'resync (nft -j -t)': [], 'read-back (nft -j -t)': [] };
  for (let i = 0; i < rounds; i++) {
    out['nft -j -t']!.push(await time(() => nft.list({ terse: true })));
    out['netlink structure']!.push(await time(() => client.readStructure(TABLE.family, TABLE.name)));
    for (const [label, elements] of [['netlink', writer], ['nft -j -t', withNft]] as const) {
      const r = await backend(elements).sync(snapshot, full);
      if (r.written['set entry'] !== 0 || r.written.chain !== 0 || r.deleted['set entry'] !== 0) throw new Error(`the full resync (${label}) wrote something: ${JSON.stringify(r.written)}`);
      out[`resync (${label})`]!.push(Math.round(r.totalMs));
      out[`read-back (${label})`]!.push(Math.round(r.readMs));
    }
  }
  process.stdout.write(`${services} services × ${endpoints} endpoints, ms per round:\n`);
  for (const [k, v] of Object.entries(out)) process.stdout.write(`  ${k.padEnd(22)} ${v.join(', ')}\n`);
} finally {
  client.close();
}
