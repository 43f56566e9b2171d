/**
 * The nf_tables netlink codec (NETLINK_NETFILTER, subsystem NFNL_SUBSYS_NFTABLES):
 * pure functions, no I/O. Encoders return whole netlink messages (nlmsghdr +
 * nfgenmsg + attributes); decoders take the messages the kernel answers with.
 *
 * What is encoded, and how (byte for byte as nft 1.0.6, see
 * test/fixtures/nftables and test/unit/nft-netlink-codec.test.ts):
 * - a BATCH of set element changes: NFNL_MSG_BATCH_BEGIN (nfgenmsg res_id =
 *   htons(NFNL_SUBSYS_NFTABLES)), NFT_MSG_NEWSETELEM / NFT_MSG_DELSETELEM
 *   messages, NFNL_MSG_BATCH_END. The kernel applies a batch atomically
 *   (net/netfilter/nfnetlink.c nfnetlink_rcv_batch): one failing message
 *   aborts all of it.
 * - element messages: NFTA_SET_ELEM_LIST_TABLE, _SET (strings), _ELEMENTS
 *   (NLA_F_NESTED) holding NFTA_LIST_ELEM (NLA_F_NESTED) entries (numbered
 *   1, 2, ... in each message as libnftnl does, not all NFTA_LIST_ELEM), each with
 *   NFTA_SET_ELEM_KEY (NLA_F_NESTED) { NFTA_DATA_VALUE } and, for a map,
 *   NFTA_SET_ELEM_DATA (NLA_F_NESTED) { NFTA_DATA_VALUE }. The kernel parses
 *   these with nla_parse_nested_deprecated and so ignores the flag, but nft
 *   sets it (libmnl mnl_attr_nest_start) and so do we. Its own replies carry
 *   no NLA_F_NESTED; the decoder accepts both.
 * - flags: NLM_F_REQUEST | NLM_F_ACK on every element message, plus
 *   NLM_F_CREATE on NEWSETELEM (an add of an element already there with the
 *   same data then succeeds; with other data it fails with EEXIST, Linux
 *   6.18). The kernel accepts the nests without NLA_F_NESTED as well
 *   (checked on 6.18). nft sends no
 *   NLM_F_ACK (it reads the errors the kernel queues while processing
 *   the batch); we ask for an ACK per message so that a client knows when
 *   every message was answered.
 * - unlike nft, no NFTA_SET_ELEM_LIST_SET_ID: it only names a set created
 *   earlier in the same batch, and the kernel uses it only when the name is
 *   not found (nft_set_lookup_global).
 * - the GETSETELEM dump request (NLM_F_REQUEST | NLM_F_DUMP, attributes SET
 *   then TABLE, as nft orders them) and the GETGEN request (NLM_F_REQUEST,
 *   AF_UNSPEC).
 *
 * Header fields are host byte order, except nfgenmsg.res_id (big endian).
 * Every input is validated before a byte is written (NftValidationError).
 */
import { AttrWriter, attrNested, attrString, indexAttrs, parseAttrs, readU16, readU32, writeU16, writeU32, type NlAttr } from '../netlink/nlattr.ts';
import {
  NFGENMSG_LEN,
  NFNETLINK_V0,
  NFNL_MSG_BATCH_BEGIN,
  NFNL_MSG_BATCH_END,
  NFNL_SUBSYS_NFTABLES,
  NFPROTO,
  NFTA_DATA,
  NFTA_GEN,
  NFTA_LIST_ELEM,
  NFTA_SET_ELEM,
  NFTA_SET_ELEM_LIST,
  NFT_DATA_VALUE_MAXLEN,
  NFT_MSG,
  NFT_NAME_MAX,
  NLMSG_DONE,
  NLMSG_ERROR,
  NLMSG_HDRLEN,
  NLM_F,
} from './constants.ts';
import { NftDecodeError, NftValidationError } from './errors.ts';

export { NftDecodeError, NftValidationError };

// ---------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------

/** nf_tables table family: `ip` (NFPROTO_IPV4) or `ip6` (NFPROTO_IPV6). */
export type NftFamily = 'ip' | 'ip6';

/** A named set or map of a table. Names are 1-255 of [A-Za-z0-9_.-]. */
export interface SetRef {
  readonly family: NftFamily;
  readonly table: string;
  readonly set: string;
}

/**
 * One element: its key (and, in a map, its data) as the kernel holds them,
 * e.g. from encodeConcat (concat.ts). Each 1-64 bytes (NFT_DATA_VALUE_MAXLEN).
 */
export interface SetElement {
  readonly key: Uint8Array;
  readonly data?: Uint8Array;
}

/** Add (NFT_MSG_NEWSETELEM) or delete (NFT_MSG_DELSETELEM) elements of one set. */
export interface SetElementChange extends SetRef {
  readonly op: 'add' | 'delete';
  /** Deletes need only the key; `data` of a delete is ignored. An empty list sends nothing. */
  readonly elements: readonly SetElement[];
}

/** One element message of an encoded batch: what a client names when the kernel rejects it. */
export interface BatchMessage extends SetRef {
  readonly seq: number;
  readonly op: 'add' | 'delete';
  /** Index in the batch's changes. */
  readonly change: number;
  /** The elements it carries: indexes [first, first + count) of that change's elements. */
  readonly first: number;
  readonly count: number;
  /** Message length, bytes. */
  readonly bytes: number;
}

/** A batch ready to send as one datagram. */
export interface EncodedBatch {
  /** BATCH_BEGIN, the element messages, BATCH_END. */
  readonly bytes: Buffer;
  readonly beginSeq: number;
  readonly endSeq: number;
  /** The element messages, in order; empty when there was nothing to change. */
  readonly messages: readonly BatchMessage[];
  /** The sequence number after endSeq (to continue with). */
  readonly nextSeq: number;
}

/** Options of {@link encodeSetElemBatch}. */
export interface BatchOptions {
  /** Sequence number of BATCH_BEGIN (u32); the messages and BATCH_END take the following ones. */
  readonly firstSeq: number;
  /** Largest element message, bytes: 64-65536 (default 65536, also nla_len's limit for NFTA_SET_ELEM_LIST_ELEMENTS). */
  readonly maxMessageBytes?: number;
}

/** One element of a GETSETELEM dump. */
export interface DumpedElement {
  readonly key: Buffer;
  /** The last key of the range (NFTA_SET_ELEM_KEY_END), inclusive: elements of a concatenated interval set (pipapo). */
  readonly keyEnd?: Buffer;
  /** Map data (NFTA_DATA_VALUE); absent for a set. */
  readonly data?: Buffer;
  /** NFTA_SET_ELEM_FLAGS (NFT_SET_ELEM_INTERVAL_END = 1, ...), when the kernel sent any. */
  readonly flags?: number;
  /** Timeout the element was added with, ms. */
  readonly timeoutMs?: number;
  /** Time left before it expires, ms. */
  readonly expiresMs?: number;
}

/** One netlink message of a received datagram; `payload` (after the 16-byte header) is a view into it. */
export interface NlMessage {
  readonly type: number;
  readonly flags: number;
  readonly seq: number;
  readonly pid: number;
  readonly payload: Buffer;
}

/** An NLMSG_ERROR: an ACK (`error` 0) or a failure (a positive errno) of the request with `seq`. */
export interface NlAck {
  /** 0 for an ACK, else the positive errno (the kernel sends it negated). */
  readonly error: number;
  /** The request's nlmsg_seq and nlmsg_type, from the header the kernel copies back. */
  readonly seq: number;
  readonly type: number;
}

// ---------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------

const NAME_RE = /^[A-Za-z0-9_.-]+$/;

/** The NFPROTO number of a table family. @throws NftValidationError for anything but "ip" / "ip6". */
export function familyNumber(family: NftFamily, path = 'family'): number {
  if (family === 'ip') return NFPROTO.IPV4;
  if (family === 'ip6') return NFPROTO.IPV6;
  throw new NftValidationError(path, `${JSON.stringify(family)} is not "ip" or "ip6"`);
}

/** Check a table or set name: 1-255 of [A-Za-z0-9_.-]. @throws NftValidationError */
export function checkName(name: string, path: string): string {
  if (typeof name !== 'string' || name.length === 0 || name.length > NFT_NAME_MAX || !NAME_RE.test(name)) {
    throw new NftValidationError(path, `${JSON.stringify(name)} is not 1-${NFT_NAME_MAX} of [A-Za-z0-9_.-]`);
  }
  return name;
}

function checkValue(v: unknown, path: string): Uint8Array {
  if (!(v instanceof Uint8Array)) throw new NftValidationError(path, 'is not a Buffer');
  if (v.length === 0 || v.length > NFT_DATA_VALUE_MAXLEN) throw new NftValidationError(path, `is ${v.length} bytes, not 1-${NFT_DATA_VALUE_MAXLEN}`);
  return v;
}

function checkSeq(seq: number, path: string): number {
  if (!Number.isInteger(seq) || seq < 0 || seq > 0xffffffff) throw new NftValidationError(path, `${seq} is not a u32`);
  return seq;
}

/** The sequence number after `seq`, wrapping at 2^32 and skipping 0. */
export function nextSeq(seq: number): number {
  return (seq + 1) >>> 0 || 1;
}

// ---------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------

/** nlmsg_type of an nf_tables message. */
export function nftType(msg: number): number {
  return (NFNL_SUBSYS_NFTABLES << 8) | msg;
}

/**
 * One netlink message: nlmsghdr (host order, nlmsg_pid 0: the kernel fills
 * in the sender), nfgenmsg, attributes.
 */
export function message(type: number, flags: number, seq: number, family: number, resId: number, attrs: Buffer): Buffer {
  const len = NLMSG_HDRLEN + NFGENMSG_LEN + attrs.length;
  const b = Buffer.alloc(len);
  writeU32(b, 0, len);
  writeU16(b, 4, type);
  writeU16(b, 6, flags);
  writeU32(b, 8, seq);
  writeU32(b, 12, 0);
  b.writeUInt8(family, 16);
  b.writeUInt8(NFNETLINK_V0, 17);
  b.writeUInt16BE(resId, 18);
  attrs.copy(b, NLMSG_HDRLEN + NFGENMSG_LEN);
  return b;
}

/** Size of a NUL-terminated string attribute, padded. */
function stringAttrSize(s: string): number {
  return (4 + s.length + 1 + 3) & ~3;
}

/** Size of one NFTA_LIST_ELEM with its key (and data), padded. */
function elementSize(e: SetElement, withData: boolean): number {
  const value = (n: number): number => 4 + 4 + ((n + 3) & ~3); // nest header + NFTA_DATA_VALUE
  return 4 + value(e.key.length) + (withData && e.data ? value(e.data.length) : 0);
}

function writeElements(w: AttrWriter, elements: readonly SetElement[], withData: boolean): void {
  w.nest(NFTA_SET_ELEM_LIST.ELEMENTS, (list) => {
    // libnftnl numbers the entries 1, 2, ... (nftnl_set_elems_build_payload:
    // mnl_attr_nest_start(nlh, ++i)); the kernel iterates them without
    // looking at the type (nla_for_each_nested). At most 4096 entries fit a
    // 64 KiB message, far below NLA_TYPE_MASK.
    for (const [i, e] of elements.entries()) {
      list.nest(NFTA_LIST_ELEM + i, (el) => {
        el.nest(NFTA_SET_ELEM.KEY, (k) => k.put(NFTA_DATA.VALUE, e.key));
        if (withData && e.data) el.nest(NFTA_SET_ELEM.DATA, (d) => d.put(NFTA_DATA.VALUE, e.data!));
      });
    }
  });
}

/**
 * Encode a batch of element changes. Each change becomes one or more
 * element messages, split so that none exceeds `maxMessageBytes`; sequence
 * numbers increase from `firstSeq` (BATCH_BEGIN) through the messages to
 * BATCH_END. The batch's own header has nfgen_family AF_UNSPEC and res_id
 * htons(NFNL_SUBSYS_NFTABLES).
 * @throws NftValidationError (field e.g. "changes[1].elements[4].key") for
 *   a bad family, name, op or value, or an element too large for one message.
 */
export function encodeSetElemBatch(changes: readonly SetElementChange[], options: BatchOptions): EncodedBatch {
  const maxBytes = options.maxMessageBytes ?? 65536;
  if (!Number.isInteger(maxBytes) || maxBytes < 64 || maxBytes > 65536) {
    throw new NftValidationError('maxMessageBytes', `${maxBytes} is not an integer in 64-65536`);
  }
  let seq = checkSeq(options.firstSeq, 'firstSeq');
  if (!Array.isArray(changes)) throw new NftValidationError('changes', 'is not an array');
  // Validate everything first: nothing unvalidated reaches a message.
  const plans = changes.map((c, i) => planChange(c, i, maxBytes));

  const beginSeq = seq;
  const parts: Buffer[] = [message(NFNL_MSG_BATCH_BEGIN, NLM_F.REQUEST, beginSeq, NFPROTO.UNSPEC, NFNL_SUBSYS_NFTABLES, Buffer.alloc(0))];
  const messages: BatchMessage[] = [];
  for (const [i, p] of plans.entries()) {
    const c = changes[i]!;
    const add = c.op === 'add';
    for (const [first, count] of p.chunks) {
      seq = nextSeq(seq);
      const w = new AttrWriter().string(NFTA_SET_ELEM_LIST.TABLE, c.table).string(NFTA_SET_ELEM_LIST.SET, c.set);
      writeElements(w, c.elements.slice(first, first + count), add);
      const type = nftType(add ? NFT_MSG.NEWSETELEM : NFT_MSG.DELSETELEM);
      const flags = NLM_F.REQUEST | NLM_F.ACK | (add ? NLM_F.CREATE : 0);
      const m = message(type, flags, seq, p.family, 0, w.toBuffer());
      parts.push(m);
      messages.push({ seq, op: c.op, family: c.family, table: c.table, set: c.set, change: i, first, count, bytes: m.length });
    }
  }
  const endSeq = nextSeq(seq);
  parts.push(message(NFNL_MSG_BATCH_END, NLM_F.REQUEST, endSeq, NFPROTO.UNSPEC, NFNL_SUBSYS_NFTABLES, Buffer.alloc(0)));
  return { bytes: Buffer.concat(parts), beginSeq, endSeq, messages, nextSeq: nextSeq(endSeq) };
}

/** Validate one change and cut its elements into [first, count] chunks that fit a message. */
function planChange(c: SetElementChange, i: number, maxBytes: number): { family: number; chunks: [number, number][] } {
  const at = `changes[${i}]`;
  if (typeof c !== 'object' || c === null) throw new NftValidationError(at, 'is not an object');
  if (c.op !== 'add' && c.op !== 'delete') throw new NftValidationError(`${at}.op`, `${JSON.stringify(c.op)} is not "add" or "delete"`);
  const family = familyNumber(c.family, `${at}.family`);
  checkName(c.table, `${at}.table`);
  checkName(c.set, `${at}.set`);
  if (!Array.isArray(c.elements)) throw new NftValidationError(`${at}.elements`, 'is not an array');
  const add = c.op === 'add';
  // nlmsghdr + nfgenmsg + TABLE + SET + ELEMENTS header.
  const overhead = NLMSG_HDRLEN + NFGENMSG_LEN + stringAttrSize(c.table) + stringAttrSize(c.set) + 4;
  const limit = Math.min(maxBytes, overhead - 4 + 0xffff); // ELEMENTS' nla_len is a u16
  const chunks: [number, number][] = [];
  let first = 0;
  let size = overhead;
  for (const [j, e] of c.elements.entries()) {
    const ep = `${at}.elements[${j}]`;
    if (typeof e !== 'object' || e === null) throw new NftValidationError(ep, 'is not an object');
    checkValue(e.key, `${ep}.key`);
    if (add && e.data !== undefined) checkValue(e.data, `${ep}.data`);
    const n = elementSize(e, add);
    if (overhead + n > limit) throw new NftValidationError(ep, `needs ${overhead + n} bytes, more than one message of ${limit}`);
    if (size + n > limit) {
      chunks.push([first, j - first]);
      first = j;
      size = overhead;
    }
    size += n;
  }
  if (c.elements.length > first) chunks.push([first, c.elements.length - first]);
  return { family, chunks };
}

/**
 * The NFT_MSG_GETSETELEM dump request for every element of one set or map
 * (NLM_F_REQUEST | NLM_F_DUMP; NFTA_SET_ELEM_LIST_SET, then _TABLE).
 * @throws NftValidationError for a bad family, name or seq.
 */
export function encodeGetSetElems(ref: SetRef, seq: number): Buffer {
  const family = familyNumber(ref.family);
  checkName(ref.table, 'table');
  checkName(ref.set, 'set');
  checkSeq(seq, 'seq');
  const attrs = new AttrWriter().string(NFTA_SET_ELEM_LIST.SET, ref.set).string(NFTA_SET_ELEM_LIST.TABLE, ref.table).toBuffer();
  return message(nftType(NFT_MSG.GETSETELEM), NLM_F.REQUEST | NLM_F.DUMP, seq, family, 0, attrs);
}

/**
 * The NFT_MSG_GETGEN request (NLM_F_REQUEST, AF_UNSPEC, no attributes);
 * the kernel answers with one NFT_MSG_NEWGEN message.
 * @throws NftValidationError for a bad seq.
 */
export function encodeGetGen(seq: number): Buffer {
  return message(nftType(NFT_MSG.GETGEN), NLM_F.REQUEST, checkSeq(seq, 'seq'), NFPROTO.UNSPEC, 0, Buffer.alloc(0));
}

// ---------------------------------------------------------------------------
// Decoders
// ---------------------------------------------------------------------------

/**
 * Split a received datagram into netlink messages (NLMSG_ALIGN'ed, as the
 * kernel packs a dump's messages into one skb).
 * @throws NftDecodeError for a length that is too short or runs past the end.
 */
export function parseMessages(buf: Uint8Array): NlMessage[] {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const out: NlMessage[] = [];
  let off = 0;
  while (b.length - off >= NLMSG_HDRLEN) {
    const len = readU32(b, off);
    if (len < NLMSG_HDRLEN || off + len > b.length) throw new NftDecodeError(`malformed netlink message at offset ${off}: nlmsg_len ${len}, ${b.length - off} bytes left`);
    out.push({
      type: readU16(b, off + 4),
      flags: readU16(b, off + 6),
      seq: readU32(b, off + 8),
      pid: readU32(b, off + 12),
      payload: b.subarray(off + NLMSG_HDRLEN, off + len),
    });
    off += (len + 3) & ~3;
  }
  return out;
}

/**
 * Read an NLMSG_ERROR payload: int error (host order, 0 or -errno), then
 * the request's nlmsghdr (and, unless NLM_F_CAPPED, its payload).
 * @throws NftDecodeError when the payload is shorter than 20 bytes.
 */
export function decodeAck(msg: NlMessage): NlAck {
  if (msg.type !== NLMSG_ERROR) throw new NftDecodeError(`message type ${msg.type} is not NLMSG_ERROR`);
  if (msg.payload.length < 4 + NLMSG_HDRLEN) throw new NftDecodeError(`NLMSG_ERROR of ${msg.payload.length} bytes`);
  const error = readI32(msg.payload, 0);
  return { error: error === 0 ? 0 : -error, seq: readU32(msg.payload, 4 + 8), type: readU16(msg.payload, 4 + 4) };
}

/** The error code of an NLMSG_DONE (0, or a positive errno the dump ended with). */
export function decodeDone(msg: NlMessage): number {
  if (msg.type !== NLMSG_DONE) throw new NftDecodeError(`message type ${msg.type} is not NLMSG_DONE`);
  const error = msg.payload.length >= 4 ? readI32(msg.payload, 0) : 0;
  return error === 0 ? 0 : -error;
}

function readI32(b: Buffer, off: number): number {
  return readU32(b, off) | 0;
}

function attrsOf(msg: NlMessage, want: number, what: string): NlAttr[] {
  if (msg.type !== nftType(want)) throw new NftDecodeError(`${what}: message type 0x${msg.type.toString(16)} is not 0x${nftType(want).toString(16)}`);
  if (msg.payload.length < NFGENMSG_LEN) throw new NftDecodeError(`${what}: no nfgenmsg`);
  return parseAttrs(msg.payload.subarray(NFGENMSG_LEN));
}

/**
 * The ruleset generation id of an NFT_MSG_NEWGEN reply (NFTA_GEN_ID, __be32).
 * It increases by one with every committed batch (net/netfilter/nf_tables_api.c
 * nf_tables_commit: ++nft_net->base_seq), in this network namespace.
 * @throws NftDecodeError for another message type or a missing/short NFTA_GEN_ID.
 */
export function decodeGen(msg: NlMessage): number {
  const id = indexAttrs(attrsOf(msg, NFT_MSG.NEWGEN, 'NEWGEN')).get(NFTA_GEN.ID);
  if (!id || id.data.length !== 4) throw new NftDecodeError('NEWGEN: no 4-byte NFTA_GEN_ID');
  return id.data.readUInt32BE(0);
}

/** The table and set an NFT_MSG_NEWSETELEM dump message is about. */
export function decodeSetElemRef(msg: NlMessage): { table: string; set: string } {
  const a = indexAttrs(attrsOf(msg, NFT_MSG.NEWSETELEM, 'NEWSETELEM'));
  const table = a.get(NFTA_SET_ELEM_LIST.TABLE);
  const set = a.get(NFTA_SET_ELEM_LIST.SET);
  if (!table || !set) throw new NftDecodeError('NEWSETELEM: no table or set name');
  return { table: attrString(table, 'NFTA_SET_ELEM_LIST_TABLE'), set: attrString(set, 'NFTA_SET_ELEM_LIST_SET') };
}

/**
 * The elements of one NFT_MSG_NEWSETELEM message of a GETSETELEM dump
 * (nf_tables_dump_set: the kernel's nests carry no NLA_F_NESTED; the last
 * message of a dump may have an empty NFTA_SET_ELEM_LIST_ELEMENTS).
 * Timeouts are __be64 ms. An element of a concatenated interval set
 * (pipapo) comes as one element with the range's first key and its last
 * (NFTA_SET_ELEM_KEY_END, inclusive).
 * @throws NftDecodeError for another message type, an element without a
 *   key, or data that is a verdict (verdict maps are not modelled).
 */
export function decodeSetElems(msg: NlMessage): DumpedElement[] {
  const list = indexAttrs(attrsOf(msg, NFT_MSG.NEWSETELEM, 'NEWSETELEM')).get(NFTA_SET_ELEM_LIST.ELEMENTS);
  if (!list) return [];
  const out: DumpedElement[] = [];
  // Every entry is an element, whatever its type: the kernel's dumps number
  // them all NFTA_LIST_ELEM, libnftnl's requests 1, 2, ... (see writeElements).
  for (const item of attrNested(list)) {
    const a = indexAttrs(attrNested(item));
    const key = a.get(NFTA_SET_ELEM.KEY);
    if (!key) throw new NftDecodeError('set element without NFTA_SET_ELEM_KEY');
    const e: { key: Buffer; keyEnd?: Buffer; data?: Buffer; flags?: number; timeoutMs?: number; expiresMs?: number } = { key: dataValue(key, 'key') };
    const keyEnd = a.get(NFTA_SET_ELEM.KEY_END);
    if (keyEnd) e.keyEnd = dataValue(keyEnd, 'key end');
    const data = a.get(NFTA_SET_ELEM.DATA);
    if (data) e.data = dataValue(data, 'data');
    const flags = a.get(NFTA_SET_ELEM.FLAGS);
    if (flags) e.flags = be32(flags, 'NFTA_SET_ELEM_FLAGS');
    const timeout = a.get(NFTA_SET_ELEM.TIMEOUT);
    if (timeout) e.timeoutMs = be64(timeout, 'NFTA_SET_ELEM_TIMEOUT');
    const expires = a.get(NFTA_SET_ELEM.EXPIRATION);
    if (expires) e.expiresMs = be64(expires, 'NFTA_SET_ELEM_EXPIRATION');
    out.push(e);
  }
  return out;
}

/** A copy of the NFTA_DATA_VALUE inside a KEY or DATA nest. */
function dataValue(nest: NlAttr, what: string): Buffer {
  const a = indexAttrs(attrNested(nest));
  const v = a.get(NFTA_DATA.VALUE);
  if (!v) throw new NftDecodeError(a.has(NFTA_DATA.VERDICT) ? `element ${what} is a verdict (not supported)` : `element ${what} without NFTA_DATA_VALUE`);
  return Buffer.from(v.data);
}

function be32(a: NlAttr, what: string): number {
  if (a.data.length !== 4) throw new NftDecodeError(`${what}: expected 4 bytes, got ${a.data.length}`);
  return a.data.readUInt32BE(0);
}

function be64(a: NlAttr, what: string): number {
  if (a.data.length !== 8) throw new NftDecodeError(`${what}: expected 8 bytes, got ${a.data.length}`);
  return Number(a.data.readBigUInt64BE(0));
}
