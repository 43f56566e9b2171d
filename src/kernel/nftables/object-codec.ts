/**
 * Tables and chains over nf_tables netlink: the NFT_MSG_NEWTABLE and
 * NFT_MSG_NEWCHAIN messages of a batch. Pure functions, no I/O. The first
 * part of writing a table's structure without nft; no sync sends these yet
 * (sets and the layout's rules are not encoded yet).
 *
 * Encoding (<linux/netfilter/nf_tables.h>; as nft 1.0.6 writes `add table`
 * and `add chain` through libnftnl's nftnl_table_nlmsg_build_payload and
 * nftnl_chain_nlmsg_build_payload, byte for byte but for NLM_F_ACK, which
 * a client that waits for each answer asks for:
 * test/fixtures/nftables/objects.hex):
 * - NEWTABLE: NLM_F_REQUEST, nfgen_family the table's; NFTA_TABLE_NAME,
 *   NFTA_TABLE_FLAGS (__be32 0);
 * - NEWCHAIN: NLM_F_REQUEST | NLM_F_CREATE; NFTA_CHAIN_TABLE,
 *   NFTA_CHAIN_NAME, and for a base chain NFTA_CHAIN_TYPE, NFTA_CHAIN_POLICY
 *   (__be32 NF_ACCEPT 1 / NF_DROP 0) and the NFTA_CHAIN_HOOK nest
 *   (NLA_F_NESTED) of NFTA_HOOK_HOOKNUM and NFTA_HOOK_PRIORITY (__be32,
 *   signed), in that order.
 * Every input is validated before a byte is written (NftValidationError).
 */
import { AttrWriter } from '../netlink/nlattr.ts';
import { checkName, familyNumber, message, nftType, type NftFamily } from './codec.ts';
import { NFTA_CHAIN, NFTA_HOOK, NFTA_TABLE, NFT_MSG, NF_INET_HOOKS, NLM_F } from './constants.ts';
import { NftValidationError } from './errors.ts';

/** A base chain's hook, as nft(8) writes it in `add chain … { type T hook H priority P; policy X; }`. */
export interface ChainHookSpec {
  /** The chain type: "filter", "nat" or "route" (net/netfilter/nft_chain_{filter,nat,route}.c). */
  readonly type: 'filter' | 'nat' | 'route';
  /** "prerouting", "input", "forward", "output" or "postrouting" (enum nf_inet_hooks). */
  readonly hook: string;
  /** Signed 32-bit priority (dstnat is -100, srcnat 100, filter 0). */
  readonly priority: number;
  /** The verdict for packets no rule decides (default "accept"). */
  readonly policy?: 'accept' | 'drop';
}

/** A chain to add: a regular chain, or a base chain with `base`. */
export interface ChainAdd {
  readonly family: NftFamily;
  readonly table: string;
  readonly name: string;
  readonly base?: ChainHookSpec;
}

/** Options of the encoders: NLM_F_ACK (default true), so that the kernel answers each message. */
export interface ObjectMessageOptions {
  readonly ack?: boolean;
}

const be32 = (v: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(v >>> 0, 0);
  return b;
};

function checkSeq(seq: number): void {
  if (!Number.isInteger(seq) || seq < 0 || seq > 0xffffffff) throw new NftValidationError('seq', `${seq} is not a u32`);
}

/**
 * The NFT_MSG_NEWTABLE message of table `family table` (created when missing; an existing table is left as it is).
 * @throws NftValidationError for a bad family, name or seq.
 */
export function encodeNewTable(family: NftFamily, table: string, seq: number, opts: ObjectMessageOptions = {}): Buffer {
  const f = familyNumber(family);
  checkName(table, 'table');
  checkSeq(seq);
  const attrs = new AttrWriter().string(NFTA_TABLE.NAME, table).put(NFTA_TABLE.FLAGS, be32(0)).toBuffer();
  return message(nftType(NFT_MSG.NEWTABLE), NLM_F.REQUEST | (opts.ack === false ? 0 : NLM_F.ACK), seq, f, 0, attrs);
}

/** Validate a base chain's hook. @throws NftValidationError */
function checkHook(b: ChainHookSpec, path: string): number {
  if (typeof b !== 'object' || b === null) throw new NftValidationError(path, 'is not an object');
  if (b.type !== 'filter' && b.type !== 'nat' && b.type !== 'route') throw new NftValidationError(`${path}.type`, `${JSON.stringify(b.type)} is not filter, nat or route`);
  const hook = NF_INET_HOOKS.indexOf(b.hook);
  if (hook < 0) throw new NftValidationError(`${path}.hook`, `${JSON.stringify(b.hook)} is not one of ${NF_INET_HOOKS.join(', ')}`);
  if (!Number.isInteger(b.priority) || b.priority < -0x80000000 || b.priority > 0x7fffffff) throw new NftValidationError(`${path}.priority`, `${b.priority} is not a signed 32-bit integer`);
  if (b.policy !== undefined && b.policy !== 'accept' && b.policy !== 'drop') throw new NftValidationError(`${path}.policy`, `${JSON.stringify(b.policy)} is not accept or drop`);
  return hook;
}

/**
 * The NFT_MSG_NEWCHAIN message of `c` (NLM_F_CREATE: an existing chain of that name is left as it is, but a base
 * chain's hook cannot be changed: the kernel refuses that with EOPNOTSUPP).
 * @throws NftValidationError for a bad family, name, hook, type, priority, policy or seq.
 */
export function encodeNewChain(c: ChainAdd, seq: number, opts: ObjectMessageOptions = {}): Buffer {
  const f = familyNumber(c.family);
  checkName(c.table, 'table');
  checkName(c.name, 'chain');
  checkSeq(seq);
  const w = new AttrWriter().string(NFTA_CHAIN.TABLE, c.table).string(NFTA_CHAIN.NAME, c.name);
  if (c.base !== undefined) {
    const hook = checkHook(c.base, 'base');
    w.string(NFTA_CHAIN.TYPE, c.base.type).put(NFTA_CHAIN.POLICY, be32(c.base.policy === 'drop' ? 0 : 1));
    w.nest(NFTA_CHAIN.HOOK, (h) => h.put(NFTA_HOOK.HOOKNUM, be32(hook)).put(NFTA_HOOK.PRIORITY, be32(c.base!.priority)));
  }
  return message(nftType(NFT_MSG.NEWCHAIN), NLM_F.REQUEST | NLM_F.CREATE | (opts.ack === false ? 0 : NLM_F.ACK), seq, f, 0, w.toBuffer());
}
