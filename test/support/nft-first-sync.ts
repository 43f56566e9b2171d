/**
 * A first sync from empty of nftables mode with its netlink element writer,
 * inside the network namespace this process was started in (a netlink
 * socket acts on the namespace of its process):
 *
 *     ip netns exec NS node --import tsx test/support/nft-first-sync.ts NODE_IP
 *
 * The state is the packet-flow state plus {@link SYNTHETIC} ClusterIP
 * service ports of 10 endpoints each (addresses nothing answers on), so
 * that the table's elements take several netlink batches. Prints the
 * SyncResult's written, deleted, transactions and detail as JSON. Exits
 * non-zero when the sync throws.
 */
import { NftablesBackend } from '../../src/modes/nftables/backend.ts';
import { SystemNft } from '../../src/modes/nftables/exec.ts';
import { NetlinkElementWriter } from '../../src/modes/nftables/netlink-writer.ts';
import { NftNetlinkClient } from '../../src/kernel/nftables/client.ts';
import type { Snapshot } from '../../src/model/types.ts';
import { silentLogger } from '../../src/util/log.ts';
import { CLUSTER_CIDR, STATE } from './packet-flow.ts';
import { ep, sp } from './snapshots.ts';

/** Synthetic service ports on top of the packet-flow state. */
export const SYNTHETIC = 1500;

/** The packet-flow state and {@link SYNTHETIC} service ports `synthetic/sN:http` (ClusterIP 10.100.x.y port 80, endpoints 10.200.x.1-10 port 8000 + y). */
export function bigState(): Snapshot {
  const services = new Map(STATE.services);
  for (let i = 0; i < SYNTHETIC; i++) {
    const x = i >> 8;
    const y = i & 255;
    const key = `synthetic/s${i}:http`;
    services.set(key, sp(key, `10.100.${x}.${y}`, 80, Array.from({ length: 10 }, (_, e) => ep(`10.200.${x}.${e + 1}:${8000 + y}`))));
  }
  return { ...STATE, services };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const nodeIP = process.argv[2]!;
  const writer = new NetlinkElementWriter(await NftNetlinkClient.open());
  const backend = new NftablesBackend({ nft: new SystemNft(), elements: writer, render: { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false }, frontends: { nodePortIPs: [nodeIP] }, logger: silentLogger() });
  const r = await backend.sync(bigState(), { full: true, changed: new Set() });
  process.stdout.write(`${JSON.stringify({ written: r.written, deleted: r.deleted, transactions: r.transactions, detail: r.detail })}\n`);
  writer.close();
}
