/**
 * nftables mode's table as a netlink read gives it (kernel/nftables
 * client.ts readStructure: chains, sets and rules dumped over nf_tables
 * netlink), in the shape a full sync compares (live.ts LiveTable): each
 * set's key and value types joined as `nft -j list table` joins them, each
 * base chain's type, hook, priority and policy, and each chain's rules'
 * comments in order. Sets come without elements (the element reader
 * fills them in), and without the rules by handle that `drover trace
 * --kernel` reads from `nft -j`.
 */
import type { TableStructure } from '../../kernel/nftables/client.ts';
import type { LiveChain, LiveSet, LiveTable } from './live.ts';
import { NO_TABLE } from './live.ts';

/** The live table of `s`, its sets empty; {@link NO_TABLE} when it does not exist. */
export function liveFromStructure(s: TableStructure): LiveTable {
  if (!s.exists) return NO_TABLE;
  const sets = new Map<string, LiveSet>();
  for (const set of s.sets) {
    sets.set(set.name, { keyType: set.keyType.join(' . '), ...(set.dataType !== undefined ? { mapType: set.dataType.join(' . ') } : {}), elements: new Map() });
  }
  const comments = new Map<string, (string | null)[]>(s.chains.map((c) => [c.name, []]));
  for (const r of s.rules) comments.get(r.chain)?.push(r.comment);
  const chains = new Map<string, LiveChain>();
  for (const c of s.chains) chains.set(c.name, { ...(c.base ? { base: { ...c.base } } : {}), comments: comments.get(c.name)! });
  return { exists: true, sets, chains };
}
