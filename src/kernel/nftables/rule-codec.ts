/**
 * Rules over nf_tables netlink: an NFT_MSG_NEWRULE batch for rules given as
 * the kernel's own expressions (register loads, comparisons, set and map
 * lookups, a dynamic set update, a random number, a DNAT), for the few
 * rules nft itself cannot compile or compiles with a dependency drover does
 * not want (see the modes' affinity-rule.ts and pick-rule.ts). Pure
 * functions, no I/O; the client (client.ts addRules) sends the batch.
 *
 * Encoding (<linux/netfilter/nf_tables.h>, as libnftnl's
 * nftnl_rule_nlmsg_build_payload and the expression builders write it):
 * - NFT_MSG_NEWRULE with NLM_F_REQUEST | NLM_F_CREATE | NLM_F_APPEND |
 *   NLM_F_ACK (the rule goes to the end of its chain), or, for a rule that
 *   replaces another (`handle`), NLM_F_REQUEST | NLM_F_REPLACE | NLM_F_ACK
 *   and NFTA_RULE_HANDLE (__be64): the kernel puts the new rule where the
 *   old one was and deletes it, in the same transaction (nf_tables_api.c
 *   nf_tables_newrule; ENOENT when there is no such rule); nfgen_family the
 *   table's (NFPROTO_IPV4 / NFPROTO_IPV6);
 * - NFTA_RULE_TABLE, NFTA_RULE_CHAIN (strings), [NFTA_RULE_HANDLE], NFTA_RULE_EXPRESSIONS
 *   (nested NFTA_LIST_ELEM entries, each NFTA_EXPR_NAME and nested
 *   NFTA_EXPR_DATA), NFTA_RULE_USERDATA (the comment as libnftnl's TLV:
 *   type NFTNL_UDATA_RULE_COMMENT, a length byte, the text and its NUL;
 *   `nft list` prints it as `comment "…"`); each expression's attributes
 *   in libnftnl's order, so that a rule nft could write too comes out
 *   byte for byte as nft's but for the set ids nft adds
 *   (test/fixtures/nftables/rule-affinity.hex, rule-pick.hex);
 * - every u32 attribute big endian (the kernel reads them with ntohl), a
 *   register as its enum nft_registers number (NFT_REG_1..4 for 16-byte
 *   registers, NFT_REG32_00..15 = 8..23 for 4-byte ones; one that starts a
 *   16-byte register by that one's number, as nft does), a timeout as a
 *   big-endian u64 of milliseconds, comparison and mask data nested in
 *   NFTA_DATA_VALUE;
 * - the batch framed by NFNL_MSG_BATCH_BEGIN / _END as element batches are
 *   (codec.ts): the kernel applies all of it or none.
 *
 * Every input is validated before a byte is written (NftValidationError).
 */
import { AttrWriter } from '../netlink/nlattr.ts';
import { checkName, familyNumber, message, nextSeq, nftType, NftValidationError, type NftFamily } from './codec.ts';
import {
  NFNL_MSG_BATCH_BEGIN,
  NFNL_MSG_BATCH_END,
  NFNL_SUBSYS_NFTABLES,
  NFPROTO,
  NFTA_BITWISE,
  NFTA_CMP,
  NFTA_CT,
  NFTA_DATA,
  NFTA_DYNSET,
  NFTA_EXPR,
  NFTA_LIST_ELEM,
  NFTA_LOOKUP,
  NFTA_META,
  NFTA_NAT,
  NFTA_NG,
  NFTA_PAYLOAD,
  NFTA_RULE,
  NFTNL_UDATA_RULE_COMMENT,
  NFT_CMP,
  NFT_DYNSET_OP_UPDATE,
  NFT_MSG,
  NFT_NAT_DNAT,
  NFT_NG_RANDOM,
  NFT_REG,
  NLM_F,
} from './constants.ts';

/**
 * A register, as enum nft_registers numbers it: 1-4 (16-byte NFT_REG_1..4)
 * or 8-23 (4-byte NFT_REG32_00..15, overlaying the 16-byte ones: 8-11 are
 * NFT_REG_1).
 */
export type NftRegister = number;

/** One expression of a rule: what the kernel's expression of that name takes. */
export type RuleExpr =
  /** nft_ct: load conntrack key `key` (enum nft_ct_keys) into `dreg`, of direction `dir` (0 original, 1 reply) for directional keys. */
  | { readonly kind: 'ct'; readonly key: number; readonly dreg: NftRegister; readonly dir?: 0 | 1 }
  /** nft_meta: load meta key `key` (enum nft_meta_keys) into `dreg`. */
  | { readonly kind: 'meta'; readonly key: number; readonly dreg: NftRegister }
  /** nft_payload: load `len` bytes at `offset` of header `base` (enum nft_payload_bases) into `dreg`. */
  | { readonly kind: 'payload'; readonly base: number; readonly offset: number; readonly len: number; readonly dreg: NftRegister }
  /** nft_bitwise: `reg = reg & mask` (xor zero), over `mask.length` bytes. */
  | { readonly kind: 'bitwise'; readonly reg: NftRegister; readonly mask: Uint8Array }
  /** nft_cmp: the rule stops unless `reg` compares to `data` (its first `data.length` bytes). */
  | { readonly kind: 'cmp'; readonly reg: NftRegister; readonly op: 'eq' | 'neq'; readonly data: Uint8Array }
  /**
   * nft_lookup: the rule stops unless set `set` holds the key that starts at `sreg`; with `dreg`, `set` is a map and
   * the element's data is loaded from `dreg` on (the kernel checks the data's length against the registers left).
   */
  | { readonly kind: 'lookup'; readonly set: string; readonly sreg: NftRegister; readonly dreg?: NftRegister }
  /** nft_numgen: load a random u32 in [0, `modulus`) into `dreg` (NFT_NG_RANDOM, offset 0, as nft's `numgen random mod N`). */
  | { readonly kind: 'numgen'; readonly dreg: NftRegister; readonly modulus: number }
  /**
   * nft_nat: DNAT to the address that starts at `regAddr` (4 bytes for family `ip`, 16 for `ip6`) and the port
   * (2 bytes, network order) at `regProto`, as nft's `dnat ip to … map @m` with an address and port value: no flags
   * (the kernel sets NF_NAT_RANGE_MAP_IPS and NF_NAT_RANGE_PROTO_SPECIFIED from the registers given).
   */
  | { readonly kind: 'nat'; readonly family: NftFamily; readonly regAddr: NftRegister; readonly regProto: NftRegister }
  /** nft_dynset: add the key at `sregKey` to map `set` with the data at `sregData`, or refresh its timeout (`update`). */
  | { readonly kind: 'dynset'; readonly set: string; readonly sregKey: NftRegister; readonly sregData: NftRegister; readonly timeoutMs: number };

/** A rule to append to a chain, or with `handle` to put in place of that rule of the chain. */
export interface RuleAdd {
  readonly family: NftFamily;
  readonly table: string;
  readonly chain: string;
  /** The handle of the rule of `chain` this one replaces (a positive integer below 2^53); absent: append. */
  readonly handle?: number;
  readonly exprs: readonly RuleExpr[];
  /** Its comment: printable ASCII, 1-253 characters ({@link MAX_COMMENT}). */
  readonly comment: string;
}

/** One NEWRULE message of an encoded batch. */
export interface RuleMessage {
  readonly seq: number;
  /** Index in the batch's rules. */
  readonly rule: number;
  readonly bytes: number;
}

/** A batch of rules ready to send as one datagram. */
export interface EncodedRuleBatch {
  /** BATCH_BEGIN, the NEWRULE messages, BATCH_END. */
  readonly bytes: Buffer;
  readonly beginSeq: number;
  readonly endSeq: number;
  readonly messages: readonly RuleMessage[];
  /** The sequence number after endSeq. */
  readonly nextSeq: number;
}

const u32 = (v: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(v >>> 0, 0);
  return b;
};

/**
 * A register as an attribute: a 4-byte register that starts a 16-byte one
 * as that one's number (NFT_REG32_04 as NFT_REG_2), as nft writes them
 * (netlink_linearize.c netlink_put_register, "for compatibility"); the
 * kernel reads both alike (nft_parse_register).
 */
function reg(r: NftRegister): Buffer {
  const n = r - NFT_REG.R32_00;
  return u32(n >= 0 && n % 4 === 0 ? NFT_REG.R1 + n / 4 : r);
}

function checkRegister(reg: number, width: number, path: string): void {
  const first = reg >= NFT_REG.R1 && reg <= NFT_REG.R4 ? (reg - NFT_REG.R1) * 4 : reg >= NFT_REG.R32_00 && reg <= NFT_REG.R32_15 ? reg - NFT_REG.R32_00 : -1;
  if (!Number.isInteger(reg) || first < 0) throw new NftValidationError(path, `${reg} is not a register (1-4 or 8-23)`);
  if (first + Math.ceil(width / 4) > 16) throw new NftValidationError(path, `${width} bytes from register ${reg} run past the last register`);
}

function checkU32(v: number, path: string): void {
  if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw new NftValidationError(path, `${v} is not a u32`);
}

function checkData(d: Uint8Array, path: string): void {
  if (!(d instanceof Uint8Array) || d.length < 1 || d.length > 16) throw new NftValidationError(path, 'is not 1-16 bytes');
}

/** The bytes a load expression writes (for the register check); the kernel checks the rest. */
const CT_WIDTH: Readonly<Record<number, number>> = { 0: 4, 2: 4, 12: 2, 20: 4, 22: 16 };

/** Validate one expression. @throws NftValidationError */
function checkExpr(e: RuleExpr, path: string): void {
  switch (e.kind) {
    case 'ct': {
      const width = CT_WIDTH[e.key];
      if (width === undefined) throw new NftValidationError(`${path}.key`, `ct key ${e.key} is not one of ${Object.keys(CT_WIDTH).join(', ')}`);
      if (e.dir !== undefined && e.dir !== 0 && e.dir !== 1) throw new NftValidationError(`${path}.dir`, `${String(e.dir)} is not 0 or 1`);
      return checkRegister(e.dreg, width, `${path}.dreg`);
    }
    case 'meta':
      checkU32(e.key, `${path}.key`);
      return checkRegister(e.dreg, 4, `${path}.dreg`);
    case 'payload':
      if (e.base !== 1 && e.base !== 2) throw new NftValidationError(`${path}.base`, `${e.base} is not the network (1) or transport (2) header`);
      if (!Number.isInteger(e.offset) || e.offset < 0 || e.offset > 255) throw new NftValidationError(`${path}.offset`, `${e.offset} is not 0-255`);
      if (!Number.isInteger(e.len) || e.len < 1 || e.len > 16) throw new NftValidationError(`${path}.len`, `${e.len} is not 1-16`);
      return checkRegister(e.dreg, e.len, `${path}.dreg`);
    case 'bitwise':
      checkData(e.mask, `${path}.mask`);
      return checkRegister(e.reg, e.mask.length, `${path}.reg`);
    case 'cmp':
      if (e.op !== 'eq' && e.op !== 'neq') throw new NftValidationError(`${path}.op`, `${JSON.stringify(e.op)} is not "eq" or "neq"`);
      checkData(e.data, `${path}.data`);
      return checkRegister(e.reg, e.data.length, `${path}.reg`);
    case 'lookup':
      checkName(e.set, `${path}.set`);
      if (e.dreg !== undefined) checkRegister(e.dreg, 1, `${path}.dreg`);
      return checkRegister(e.sreg, 1, `${path}.sreg`);
    case 'numgen':
      if (!Number.isInteger(e.modulus) || e.modulus < 1 || e.modulus > 0xffffffff) throw new NftValidationError(`${path}.modulus`, `${e.modulus} is not 1-4294967295`);
      return checkRegister(e.dreg, 4, `${path}.dreg`);
    case 'nat':
      familyNumber(e.family, `${path}.family`);
      checkRegister(e.regAddr, e.family === 'ip6' ? 16 : 4, `${path}.regAddr`);
      return checkRegister(e.regProto, 2, `${path}.regProto`);
    case 'dynset':
      checkName(e.set, `${path}.set`);
      checkRegister(e.sregKey, 1, `${path}.sregKey`);
      checkRegister(e.sregData, 1, `${path}.sregData`);
      if (!Number.isInteger(e.timeoutMs) || e.timeoutMs < 1 || e.timeoutMs > 86_400_000) throw new NftValidationError(`${path}.timeoutMs`, `${e.timeoutMs} is not 1-86400000`);
      return;
    default:
      throw new NftValidationError(`${path}.kind`, `${JSON.stringify((e as { kind?: unknown }).kind)} is not an expression drover writes`);
  }
}

/** Write one expression as an NFTA_LIST_ELEM of NFTA_RULE_EXPRESSIONS. */
function writeExpr(list: AttrWriter, e: RuleExpr): void {
  const data = (w: AttrWriter, type: number, value: Uint8Array): void => void w.nest(type, (d) => d.put(NFTA_DATA.VALUE, value));
  list.nest(NFTA_LIST_ELEM, (el) => {
    el.string(NFTA_EXPR.NAME, e.kind);
    el.nest(NFTA_EXPR.DATA, (d) => {
      switch (e.kind) {
        case 'ct':
          d.put(NFTA_CT.KEY, u32(e.key)).put(NFTA_CT.DREG, reg(e.dreg));
          if (e.dir !== undefined) d.u8(NFTA_CT.DIRECTION, e.dir);
          return;
        case 'meta':
          d.put(NFTA_META.KEY, u32(e.key)).put(NFTA_META.DREG, reg(e.dreg));
          return;
        case 'payload':
          d.put(NFTA_PAYLOAD.DREG, reg(e.dreg)).put(NFTA_PAYLOAD.BASE, u32(e.base)).put(NFTA_PAYLOAD.OFFSET, u32(e.offset)).put(NFTA_PAYLOAD.LEN, u32(e.len));
          return;
        case 'bitwise':
          d.put(NFTA_BITWISE.SREG, reg(e.reg)).put(NFTA_BITWISE.DREG, reg(e.reg)).put(NFTA_BITWISE.LEN, u32(e.mask.length));
          data(d, NFTA_BITWISE.MASK, e.mask);
          data(d, NFTA_BITWISE.XOR, new Uint8Array(e.mask.length));
          return;
        case 'cmp':
          d.put(NFTA_CMP.SREG, reg(e.reg)).put(NFTA_CMP.OP, u32(e.op === 'eq' ? NFT_CMP.EQ : NFT_CMP.NEQ));
          data(d, NFTA_CMP.DATA, e.data);
          return;
        case 'lookup':
          d.put(NFTA_LOOKUP.SREG, reg(e.sreg));
          if (e.dreg !== undefined) d.put(NFTA_LOOKUP.DREG, reg(e.dreg));
          d.string(NFTA_LOOKUP.SET, e.set);
          return;
        case 'numgen':
          d.put(NFTA_NG.DREG, reg(e.dreg)).put(NFTA_NG.MODULUS, u32(e.modulus)).put(NFTA_NG.TYPE, u32(NFT_NG_RANDOM)).put(NFTA_NG.OFFSET, u32(0));
          return;
        case 'nat':
          d.put(NFTA_NAT.TYPE, u32(NFT_NAT_DNAT)).put(NFTA_NAT.FAMILY, u32(familyNumber(e.family, 'nat.family'))).put(NFTA_NAT.REG_ADDR_MIN, reg(e.regAddr)).put(NFTA_NAT.REG_PROTO_MIN, reg(e.regProto));
          return;
        case 'dynset': {
          const timeout = Buffer.alloc(8);
          timeout.writeBigUInt64BE(BigInt(e.timeoutMs), 0);
          d.put(NFTA_DYNSET.SREG_KEY, reg(e.sregKey)).put(NFTA_DYNSET.SREG_DATA, reg(e.sregData)).put(NFTA_DYNSET.OP, u32(NFT_DYNSET_OP_UPDATE)).put(NFTA_DYNSET.TIMEOUT, timeout).string(NFTA_DYNSET.SET_NAME, e.set);
          return;
        }
      }
    });
  });
}

/**
 * The longest rule comment, characters: the kernel takes at most NFT_USERDATA_MAXLEN (256) bytes of NFTA_RULE_USERDATA
 * (include/uapi/linux/netfilter/nf_tables.h), and the comment's TLV (libnftnl udata: a type byte, a length byte) holds
 * it with its NUL: 256 - 2 - 1.
 */
export const MAX_COMMENT = 253;

/** A rule's comment as NFTA_RULE_USERDATA. @throws NftValidationError for one that is not 1-{@link MAX_COMMENT} printable ASCII characters without a quote. */
export function commentUserdata(comment: string, path = 'comment'): Buffer {
  if (typeof comment !== 'string' || comment.length < 1 || comment.length > MAX_COMMENT || !/^[\x20-\x7e]+$/.test(comment) || comment.includes('"')) {
    throw new NftValidationError(path, `${JSON.stringify(comment)} is not 1-${MAX_COMMENT} printable ASCII characters without a quote`);
  }
  return Buffer.concat([Buffer.from([NFTNL_UDATA_RULE_COMMENT, comment.length + 1]), Buffer.from(`${comment}\0`, 'ascii')]);
}

/** The NFT_MSG_NEWRULE message of `r` with sequence number `seq`: appending, or replacing rule `r.handle`. @throws NftValidationError */
export function encodeNewRule(r: RuleAdd, seq: number, path = 'rule'): Buffer {
  const family = familyNumber(r.family, `${path}.family`);
  checkName(r.table, `${path}.table`);
  checkName(r.chain, `${path}.chain`);
  if (r.handle !== undefined && (!Number.isSafeInteger(r.handle) || r.handle < 1)) throw new NftValidationError(`${path}.handle`, `${r.handle} is not a rule handle`);
  const userdata = commentUserdata(r.comment, `${path}.comment`);
  if (!Array.isArray(r.exprs) || r.exprs.length === 0) throw new NftValidationError(`${path}.exprs`, 'is not a non-empty array');
  r.exprs.forEach((e, i) => checkExpr(e, `${path}.exprs[${i}]`));
  const w = new AttrWriter().string(NFTA_RULE.TABLE, r.table).string(NFTA_RULE.CHAIN, r.chain);
  if (r.handle !== undefined) {
    const handle = Buffer.alloc(8);
    handle.writeBigUInt64BE(BigInt(r.handle), 0);
    w.put(NFTA_RULE.HANDLE, handle);
  }
  w.nest(NFTA_RULE.EXPRESSIONS, (list) => r.exprs.forEach((e) => writeExpr(list, e)));
  w.put(NFTA_RULE.USERDATA, userdata);
  const flags = r.handle !== undefined ? NLM_F.REQUEST | NLM_F.REPLACE | NLM_F.ACK : NLM_F.REQUEST | NLM_F.CREATE | NLM_F.APPEND | NLM_F.ACK;
  return message(nftType(NFT_MSG.NEWRULE), flags, seq, family, 0, w.toBuffer());
}

/**
 * Encode `rules` as one batch, in order (each appended to its chain), with
 * sequence numbers from `firstSeq` (BATCH_BEGIN) on.
 * @throws NftValidationError (field e.g. "rules[0].exprs[3].dreg") for bad input; nothing is encoded then.
 */
export function encodeRuleBatch(rules: readonly RuleAdd[], firstSeq: number): EncodedRuleBatch {
  if (!Number.isInteger(firstSeq) || firstSeq < 0 || firstSeq > 0xffffffff) throw new NftValidationError('firstSeq', `${firstSeq} is not a u32`);
  if (!Array.isArray(rules)) throw new NftValidationError('rules', 'is not an array');
  const beginSeq = firstSeq;
  let seq = beginSeq;
  const parts = [message(NFNL_MSG_BATCH_BEGIN, NLM_F.REQUEST, beginSeq, NFPROTO.UNSPEC, NFNL_SUBSYS_NFTABLES, Buffer.alloc(0))];
  const messages: RuleMessage[] = [];
  for (const [i, r] of rules.entries()) {
    seq = nextSeq(seq);
    const m = encodeNewRule(r, seq, `rules[${i}]`);
    parts.push(m);
    messages.push({ seq, rule: i, bytes: m.length });
  }
  const endSeq = nextSeq(seq);
  parts.push(message(NFNL_MSG_BATCH_END, NLM_F.REQUEST, endSeq, NFPROTO.UNSPEC, NFNL_SUBSYS_NFTABLES, Buffer.alloc(0)));
  return { bytes: Buffer.concat(parts), beginSeq, endSeq, messages, nextSeq: nextSeq(endSeq) };
}
