/**
 * A table's structure over nf_tables netlink: the requests that dump its
 * chains (NFT_MSG_GETCHAIN), sets (NFT_MSG_GETSET) and rules
 * (NFT_MSG_GETRULE) and ask for the table itself (NFT_MSG_GETTABLE), and
 * the decoders of the kernel's answers. Pure functions, no I/O; the client
 * (client.ts readStructure) sends them. What `nft list table` reads, without
 * nft.
 *
 * Requests (as nft 1.0.6 sends them through libnftnl's
 * nftnl_{table,chain,set,rule}_nlmsg_build_payload):
 * - GETTABLE: NLM_F_REQUEST | NLM_F_ACK, NFTA_TABLE_NAME; the kernel answers
 *   with one NFT_MSG_NEWTABLE, or ENOENT when there is no such table;
 * - GETCHAIN, GETSET, GETRULE: NLM_F_REQUEST | NLM_F_DUMP, the table's
 *   family in nfgenmsg and its name (NFTA_CHAIN_TABLE, NFTA_SET_TABLE,
 *   NFTA_RULE_TABLE). The kernel filters rules and sets by that name
 *   (nf_tables_dump_rules_start, nf_tables_dump_sets_start); chains of
 *   other tables of the family may come too, so the client keeps only the
 *   messages naming its table.
 *
 * Answers (net/netfilter/nf_tables_api.c nf_tables_fill_{chain,set,rule}_info):
 * every integer is big endian; a chain's hook nest only on a base chain;
 * a rule's comment is the NFTNL_UDATA_RULE_COMMENT TLV of its
 * NFTA_RULE_USERDATA (a type byte, a length byte, the text and its NUL),
 * a set's the NFTNL_UDATA_SET_COMMENT TLV of NFTA_SET_USERDATA (libnftnl
 * udata.h). A set's key and data types are nft's datatype ids
 * (nftables include/datatype.h enum datatypes), which the kernel stores
 * and hands back untouched: a concatenation packs one id per field in 6
 * bits, the first field highest (nftables src/datatype.c concat_type_alloc).
 */
import { AttrWriter, attrNested, attrString, indexAttrs, parseAttrs, type NlAttr } from '../netlink/nlattr.ts';
import { checkName, familyNumber, message, nftType, type NftFamily, type NlMessage } from './codec.ts';
import {
  NFGENMSG_LEN,
  NFTA_CHAIN,
  NFTA_EXPR,
  NFTA_HOOK,
  NFTA_RULE,
  NFTA_SET,
  NFTA_TABLE,
  NFTNL_UDATA_RULE_COMMENT,
  NFTNL_UDATA_SET_COMMENT,
  NFT_MSG,
  NFT_SET_F,
  NF_INET_HOOKS,
  NF_POLICIES,
  NLM_F,
} from './constants.ts';
import { NftDecodeError, NftValidationError } from './errors.ts';

/** A base chain's hook, as nft(8) names it. */
export interface ChainHook {
  /** "nat", "filter" or "route" (NFTA_CHAIN_TYPE). */
  readonly type: string;
  /** "prerouting", "input", "forward", "output", "postrouting" (enum nf_inet_hooks). */
  readonly hook: string;
  /** Signed priority (NFTA_HOOK_PRIORITY). */
  readonly priority: number;
  /** "accept" or "drop" (NFTA_CHAIN_POLICY). */
  readonly policy: string;
}

/** One chain of a GETCHAIN dump. */
export interface DumpedChain {
  readonly table: string;
  readonly name: string;
  readonly handle: number;
  /** Present on a base chain only. */
  readonly base?: ChainHook;
}

/** One set or map of a GETSET dump. */
export interface DumpedSet {
  readonly table: string;
  readonly name: string;
  readonly handle: number;
  /** NFT_SET_* flags (constants.ts NFT_SET_F). */
  readonly flags: number;
  /** The key's datatypes as nft names them, one per field of a concatenation: ["ipv4_addr", "inet_proto", "inet_service"]. */
  readonly keyType: readonly string[];
  /** Key length, bytes (each field padded to 4). */
  readonly keyLen: number;
  /** A map's data datatypes, as keyType; absent for a set. */
  readonly dataType?: readonly string[];
  /** A map's data length, bytes. */
  readonly dataLen?: number;
  /** The default timeout of its elements, ms, when it has one. */
  readonly timeoutMs?: number;
  /** Its comment, when it has one. */
  readonly comment?: string;
}

/** One expression of a rule: its kernel name and its attributes as the kernel sent them. */
export interface DumpedExpr {
  /** NFTA_EXPR_NAME: "payload", "cmp", "lookup", "immediate", "nat", "meta", … */
  readonly name: string;
  /** NFTA_EXPR_DATA's payload (the expression's own attributes), a copy. */
  readonly data: Buffer;
}

/** One rule of a GETRULE dump. */
export interface DumpedRule {
  readonly table: string;
  readonly chain: string;
  readonly handle: number;
  readonly exprs: readonly DumpedExpr[];
  /** Its comment; null for a rule without one. */
  readonly comment: string | null;
}

/**
 * nft's datatype names by id (nftables include/datatype.h enum datatypes;
 * names as nft(8) prints them): those the key of a set of drover's can be
 * made of, and a few neighbours. An id not listed decodes as "type N".
 */
export const NFT_DATATYPES: ReadonlyMap<number, string> = new Map([
  [1, 'verdict'],
  [2, 'nf_proto'],
  [3, 'bitmask'],
  [4, 'integer'],
  [5, 'string'],
  [6, 'lladdr'],
  [7, 'ipv4_addr'],
  [8, 'ipv6_addr'],
  [9, 'ether_addr'],
  [10, 'ether_type'],
  [12, 'inet_proto'],
  [13, 'inet_service'],
  [19, 'mark'],
]);

/** Bits per field of a concatenated datatype id (nftables include/datatype.h TYPE_BITS). */
const TYPE_BITS = 6;

/**
 * The datatype names of a key or data type id: one per field, first field
 * first (nftables src/datatype.c concat_type_alloc packs them highest
 * first). An id not in {@link NFT_DATATYPES} gives "type N".
 * @throws NftDecodeError for 0 or a value that is not a u32.
 */
export function datatypeNames(id: number): string[] {
  if (!Number.isInteger(id) || id <= 0 || id > 0xffffffff) throw new NftDecodeError(`set datatype ${id} is not a datatype id`);
  const fields: number[] = [];
  for (let v = id; v > 0; v = Math.floor(v / 2 ** TYPE_BITS)) fields.unshift(v % 2 ** TYPE_BITS);
  // A field of id 0 would end nft's walk there (concat_subtype_id); the kernel never stores one from nft.
  if (fields.includes(0)) throw new NftDecodeError(`set datatype 0x${id.toString(16)} has an empty field`);
  return fields.map((f) => NFT_DATATYPES.get(f) ?? `type ${f}`);
}

function checkSeq(seq: number): void {
  if (!Number.isInteger(seq) || seq < 0 || seq > 0xffffffff) throw new NftValidationError('seq', `${seq} is not a u32`);
}

/**
 * The NFT_MSG_GETTABLE request for table `family table` (NLM_F_REQUEST | NLM_F_ACK): answered by one
 * NFT_MSG_NEWTABLE and an ACK, or an ENOENT error when there is no such table.
 * @throws NftValidationError for a bad family, name or seq.
 */
export function encodeGetTable(family: NftFamily, table: string, seq: number): Buffer {
  const f = familyNumber(family);
  checkName(table, 'table');
  checkSeq(seq);
  return message(nftType(NFT_MSG.GETTABLE), NLM_F.REQUEST | NLM_F.ACK, seq, f, 0, new AttrWriter().string(NFTA_TABLE.NAME, table).toBuffer());
}

/** What {@link encodeStructureDump} dumps. */
export type StructureKind = 'chains' | 'sets' | 'rules';

const DUMPS: Readonly<Record<StructureKind, { readonly msg: number; readonly tableAttr: number }>> = {
  chains: { msg: NFT_MSG.GETCHAIN, tableAttr: NFTA_CHAIN.TABLE },
  sets: { msg: NFT_MSG.GETSET, tableAttr: NFTA_SET.TABLE },
  rules: { msg: NFT_MSG.GETRULE, tableAttr: NFTA_RULE.TABLE },
};

/** The message type of the answers to a dump of `kind`: NFT_MSG_NEWCHAIN, _NEWSET, _NEWRULE. */
export function structureAnswerType(kind: StructureKind): number {
  return nftType(DUMPS[kind].msg - 1);
}

/**
 * The dump request of every chain, set or rule of table `family table`
 * (NLM_F_REQUEST | NLM_F_DUMP, the table's name as the filter).
 * @throws NftValidationError for a bad kind, family, name or seq.
 */
export function encodeStructureDump(kind: StructureKind, family: NftFamily, table: string, seq: number): Buffer {
  const d = DUMPS[kind];
  if (d === undefined) throw new NftValidationError('kind', `${JSON.stringify(kind)} is not chains, sets or rules`);
  const f = familyNumber(family);
  checkName(table, 'table');
  checkSeq(seq);
  return message(nftType(d.msg), NLM_F.REQUEST | NLM_F.DUMP, seq, f, 0, new AttrWriter().string(d.tableAttr, table).toBuffer());
}

function attrsOf(msg: NlMessage, want: number, what: string): Map<number, NlAttr> {
  if (msg.type !== nftType(want)) throw new NftDecodeError(`${what}: message type 0x${msg.type.toString(16)} is not 0x${nftType(want).toString(16)}`);
  if (msg.payload.length < NFGENMSG_LEN) throw new NftDecodeError(`${what}: no nfgenmsg`);
  return indexAttrs(parseAttrs(msg.payload.subarray(NFGENMSG_LEN)));
}

function str(a: Map<number, NlAttr>, type: number, what: string): string {
  const v = a.get(type);
  if (!v) throw new NftDecodeError(`${what} missing`);
  return attrString(v, what);
}

function be32(a: NlAttr | undefined, what: string): number | undefined {
  if (!a) return undefined;
  if (a.data.length !== 4) throw new NftDecodeError(`${what}: expected 4 bytes, got ${a.data.length}`);
  return a.data.readUInt32BE(0);
}

function be64(a: NlAttr | undefined, what: string): number | undefined {
  if (!a) return undefined;
  if (a.data.length !== 8) throw new NftDecodeError(`${what}: expected 8 bytes, got ${a.data.length}`);
  return Number(a.data.readBigUInt64BE(0));
}

/** The table name of an NFT_MSG_NEWTABLE answer. @throws NftDecodeError */
export function decodeTableName(msg: NlMessage): string {
  return str(attrsOf(msg, NFT_MSG.NEWTABLE, 'NEWTABLE'), NFTA_TABLE.NAME, 'NFTA_TABLE_NAME');
}

/**
 * One chain of a GETCHAIN dump (NFT_MSG_NEWCHAIN). A hook number the ip and
 * ip6 families do not have decodes as "hook N", a policy other than
 * accept and drop as "policy N".
 * @throws NftDecodeError for another message type or a missing name, table or handle.
 */
export function decodeChain(msg: NlMessage): DumpedChain {
  const a = attrsOf(msg, NFT_MSG.NEWCHAIN, 'NEWCHAIN');
  const chain = {
    table: str(a, NFTA_CHAIN.TABLE, 'NFTA_CHAIN_TABLE'),
    name: str(a, NFTA_CHAIN.NAME, 'NFTA_CHAIN_NAME'),
    handle: be64(a.get(NFTA_CHAIN.HANDLE), 'NFTA_CHAIN_HANDLE') ?? -1,
  };
  if (chain.handle < 0) throw new NftDecodeError('NFTA_CHAIN_HANDLE missing');
  const hook = a.get(NFTA_CHAIN.HOOK);
  if (!hook) return chain;
  const h = indexAttrs(attrNested(hook));
  const num = be32(h.get(NFTA_HOOK.HOOKNUM), 'NFTA_HOOK_HOOKNUM');
  const prio = be32(h.get(NFTA_HOOK.PRIORITY), 'NFTA_HOOK_PRIORITY');
  if (num === undefined || prio === undefined) throw new NftDecodeError(`chain ${chain.name}: hook without number or priority`);
  const policy = be32(a.get(NFTA_CHAIN.POLICY), 'NFTA_CHAIN_POLICY') ?? 1;
  const type = a.get(NFTA_CHAIN.TYPE);
  return {
    ...chain,
    base: {
      type: type ? attrString(type, 'NFTA_CHAIN_TYPE') : 'filter',
      hook: NF_INET_HOOKS[num] ?? `hook ${num}`,
      priority: prio | 0,
      policy: NF_POLICIES.get(policy) ?? `policy ${policy}`,
    },
  };
}

/** The text of TLV `type` of libnftnl userdata (udata.h: a type byte, a length byte, the value), without its NUL; undefined when absent. */
export function udataString(udata: Buffer | undefined, type: number, what: string): string | undefined {
  if (!udata) return undefined;
  for (let off = 0; off + 2 <= udata.length; ) {
    const t = udata[off]!;
    const len = udata[off + 1]!;
    if (off + 2 + len > udata.length) throw new NftDecodeError(`${what}: userdata TLV of ${len} bytes runs past its end`);
    if (t === type) {
      const v = udata.subarray(off + 2, off + 2 + len);
      const end = v.indexOf(0);
      return v.subarray(0, end < 0 ? v.length : end).toString('latin1');
    }
    off += 2 + len;
  }
  return undefined;
}

/**
 * One set or map of a GETSET dump (NFT_MSG_NEWSET).
 * @throws NftDecodeError for another message type or a missing name, table, key type or key length.
 */
export function decodeSet(msg: NlMessage): DumpedSet {
  const a = attrsOf(msg, NFT_MSG.NEWSET, 'NEWSET');
  const name = str(a, NFTA_SET.NAME, 'NFTA_SET_NAME');
  const keyType = be32(a.get(NFTA_SET.KEY_TYPE), 'NFTA_SET_KEY_TYPE');
  const keyLen = be32(a.get(NFTA_SET.KEY_LEN), 'NFTA_SET_KEY_LEN');
  if (keyType === undefined || keyLen === undefined) throw new NftDecodeError(`set ${name}: no key type or length`);
  const flags = be32(a.get(NFTA_SET.FLAGS), 'NFTA_SET_FLAGS') ?? 0;
  const dataType = be32(a.get(NFTA_SET.DATA_TYPE), 'NFTA_SET_DATA_TYPE');
  const dataLen = be32(a.get(NFTA_SET.DATA_LEN), 'NFTA_SET_DATA_LEN');
  const timeoutMs = be64(a.get(NFTA_SET.TIMEOUT), 'NFTA_SET_TIMEOUT');
  const comment = udataString(a.get(NFTA_SET.USERDATA)?.data, NFTNL_UDATA_SET_COMMENT, `set ${name}`);
  const isMap = (flags & NFT_SET_F.MAP) !== 0;
  return {
    table: str(a, NFTA_SET.TABLE, 'NFTA_SET_TABLE'),
    name,
    handle: be64(a.get(NFTA_SET.HANDLE), 'NFTA_SET_HANDLE') ?? 0,
    flags,
    keyType: datatypeNames(keyType),
    keyLen,
    ...(isMap && dataType !== undefined ? { dataType: datatypeNames(dataType), ...(dataLen !== undefined ? { dataLen } : {}) } : {}),
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
    ...(comment !== undefined ? { comment } : {}),
  };
}

/**
 * One rule of a GETRULE dump (NFT_MSG_NEWRULE): its chain, handle,
 * expressions (by name, with their attributes undecoded) and comment.
 * @throws NftDecodeError for another message type, a missing table, chain or handle, or an expression without a name.
 */
export function decodeRule(msg: NlMessage): DumpedRule {
  const a = attrsOf(msg, NFT_MSG.NEWRULE, 'NEWRULE');
  const handle = be64(a.get(NFTA_RULE.HANDLE), 'NFTA_RULE_HANDLE');
  if (handle === undefined) throw new NftDecodeError('NFTA_RULE_HANDLE missing');
  const exprs: DumpedExpr[] = [];
  const list = a.get(NFTA_RULE.EXPRESSIONS);
  for (const item of list ? attrNested(list) : []) {
    const e = indexAttrs(attrNested(item));
    const name = e.get(NFTA_EXPR.NAME);
    if (!name) throw new NftDecodeError(`rule ${handle}: expression without a name`);
    exprs.push({ name: attrString(name, 'NFTA_EXPR_NAME'), data: Buffer.from(e.get(NFTA_EXPR.DATA)?.data ?? Buffer.alloc(0)) });
  }
  return {
    table: str(a, NFTA_RULE.TABLE, 'NFTA_RULE_TABLE'),
    chain: str(a, NFTA_RULE.CHAIN, 'NFTA_RULE_CHAIN'),
    handle,
    exprs,
    comment: udataString(a.get(NFTA_RULE.USERDATA)?.data, NFTNL_UDATA_RULE_COMMENT, `rule ${handle}`) ?? null,
  };
}
