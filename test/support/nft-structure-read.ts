/**
 * nftables mode's table read over nf_tables netlink, inside the network
 * namespace this process was started in (a netlink socket acts on the
 * namespace of its process):
 *
 *     ip netns exec NS node --import tsx test/support/nft-structure-read.ts read IPv4|IPv6
 *     ip netns exec NS node --import tsx test/support/nft-structure-read.ts resync IPv4 NODE_IP
 *     ip netns exec NS node --import tsx test/support/nft-structure-read.ts affinity IPv4 NODE_IP
 *
 * `read` prints {@link StructureRead}: the table's structure as the element
 * writer reads it for a full sync (live-netlink.ts), each rule's chain,
 * handle, comment and expression names as the client decodes them, and the
 * elements of the interval set firewall-allow.
 * `resync` runs a full sync of the packet-flow state (packet-flow.ts) with
 * the netlink element writer, its nft listings made to fail (it reads
 * everything over netlink), and prints what it wrote and deleted and how.
 * `affinity` runs that full sync, adds two entries to the affinity map of
 * the sticky Service (one to b1, one to b2) with nft, then a partial sync
 * that removes b1 from it (with `nft -j list` made to fail, so that the
 * clean-up reads the map over netlink), and prints {@link AffinityRun}.
 */
import { NftablesBackend } from '../../src/modes/nftables/backend.ts';
import { SystemNft } from '../../src/modes/nftables/exec.ts';
import { NetlinkElementWriter } from '../../src/modes/nftables/netlink-writer.ts';
import { nftFamily } from '../../src/modes/nftables/layout.ts';
import type { LiveChain, LiveTable } from '../../src/modes/nftables/live.ts';
import { NftNetlinkClient } from '../../src/kernel/nftables/client.ts';
import type { IPFamily } from '../../src/model/types.ts';
import { silentLogger } from '../../src/util/log.ts';
import { CLUSTER_CIDR, STATE } from './packet-flow.ts';

/** A live table's structure as JSON: sets by name with their types, chains by name. */
export interface StructureJson {
  readonly exists: boolean;
  readonly sets: Record<string, { keyType: string; mapType?: string }>;
  readonly chains: Record<string, LiveChain>;
}

/** What `read` prints. */
export interface StructureRead {
  readonly live: StructureJson;
  readonly rules: { chain: string; handle: number; comment: string | null; exprs: string[] }[];
  readonly generation: number;
  /** The elements of the interval set firewall-allow as the element writer reads them, sorted. */
  readonly firewallAllow: string[];
}

/** What `affinity` prints: the partial sync's stale entries deleted, and the affinity map's entries (element texts) after it. */
export interface AffinityRun {
  readonly deleted: number;
  readonly cleanupFailed: boolean;
  readonly left: string[];
}

/** The sticky Service's frontend and the clients of the entries `affinity` adds. */
export const STICKY = { key: 'default/sticky:http', frontend: '10.96.0.14 . tcp . 80', b1: '10.244.1.2', b2: '10.244.1.3' } as const;

/** The structure of `live` as JSON (elements left out). */
export function structureJson(live: LiveTable): StructureJson {
  const sets: StructureJson['sets'] = {};
  for (const [name, s] of [...live.sets].sort(([a], [b]) => (a < b ? -1 : 1))) sets[name] = { keyType: s.keyType, ...(s.mapType !== undefined ? { mapType: s.mapType } : {}) };
  const chains: StructureJson['chains'] = {};
  for (const [name, c] of [...live.chains].sort(([a], [b]) => (a < b ? -1 : 1))) chains[name] = { ...(c.base ? { base: { ...c.base } } : {}), comments: [...c.comments] };
  return { exists: live.exists, sets, chains };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const [what, family] = process.argv.slice(2) as ['read' | 'resync' | 'affinity', IPFamily];
  const client = await NftNetlinkClient.open({ timeoutMs: 30_000 });
  try {
    const writer = new NetlinkElementWriter(client, family);
    if (what === 'read') {
      const table = nftFamily(family).table;
      const raw = await client.readStructure(table.family, table.name);
      const live = (await writer.structure())!;
      const out: StructureRead = {
        live: structureJson(live),
        rules: raw.rules.map((r) => ({ chain: r.chain, handle: r.handle, comment: r.comment, exprs: r.exprs.map((e) => e.name) })),
        generation: raw.generation,
        firewallAllow: live.exists ? [...((await writer.read('firewall-allow')) ?? new Map()).keys()].sort() : [],
      };
      process.stdout.write(`${JSON.stringify(out)}\n`);
    } else {
      const nodeIP = process.argv[4]!;
      const nft = new SystemNft();
      const backend = new NftablesBackend({ nft, elements: writer, render: { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false }, frontends: { nodePortIPs: [nodeIP] }, logger: silentLogger() });
      // A full sync with the element writer reads nothing with nft: its listings fail during the resync.
      const refuse = (): Promise<never> => Promise.reject(new Error('nft -j list is not to be used'));
      if (what === 'resync') [nft.list, nft.listSet] = [refuse, refuse];
      const r = await backend.sync(STATE, { full: true, changed: new Set() });
      if (what === 'resync') {
        process.stdout.write(`${JSON.stringify({ written: r.written, deleted: r.deleted, transactions: r.transactions, detail: r.detail })}\n`);
      } else {
        const entry = (client: string, target: string) => `192.168.100.${client} . ${STICKY.frontend} timeout 60s : ${target} . 8080`;
        await nft.run(`add element ip drover affinity { ${entry('2', STICKY.b1)}, ${entry('3', STICKY.b2)} }\n`);
        // The clean-up must read the map over netlink: nft's listing fails from here on.
        nft.listSet = refuse;
        const sticky = STATE.services.get(STICKY.key)!;
        const services = new Map(STATE.services).set(STICKY.key, { ...sticky, endpoints: sticky.endpoints.filter((e) => e.ip !== STICKY.b1) });
        const p = await backend.sync({ ...STATE, services }, { full: false, changed: new Set([STICKY.key]) });
        const left = [...((await writer.read('affinity')) ?? new Map())].map(([k, v]) => `${k} : ${v}`).sort();
        const out: AffinityRun = { deleted: p.deleted['set entry'] ?? 0, cleanupFailed: (p.detail as { cleanupFailed?: boolean }).cleanupFailed === true, left };
        process.stdout.write(`${JSON.stringify(out)}\n`);
      }
    }
  } finally {
    client.close();
  }
}
