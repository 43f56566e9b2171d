/**
 * Netlink attribute streams (struct nlattr, <linux/netlink.h>): the TLV
 * writer and reader every netlink protocol of drover's uses (IPVS generic
 * netlink, rtnetlink, and nf_tables next). Lengths and alignment as the
 * kernel's nla_put/nla_parse: 4-byte header, payload zero-padded to 4 bytes,
 * the padding not counted in nla_len.
 */
import { endianness } from 'node:os';
import { DroverError } from '../../errors.ts';

/** A netlink reply whose attributes cannot be read (a length that runs past the message, a payload of the wrong size). */
export class NetlinkDecodeError extends DroverError {
  constructor(message: string) {
    super(message);
    this.name = 'NetlinkDecodeError';
  }
}

/** Attribute type flag: payload is a stream of attributes (<linux/netlink.h>). */
export const NLA_F_NESTED = 0x8000;
/** Attribute type flag: payload is in network byte order (<linux/netlink.h>). */
export const NLA_F_NET_BYTEORDER = 0x4000;
/** Mask of the attribute type proper. */
export const NLA_TYPE_MASK = 0x3fff;
/** Length of an attribute header. */
export const NLA_HDRLEN = 4;


// ---------------------------------------------------------------------------
// Generic TLV (struct nlattr) writer and reader
// ---------------------------------------------------------------------------

const HOST_LE = endianness() === 'LE';

/** Round up to the 4-byte netlink attribute alignment (NLA_ALIGN). */
export function nlaAlign(n: number): number {
  return (n + 3) & ~3;
}

/**
 * Builds an attribute stream. Integer helpers write host byte order except the
 * `be` ones; every attribute is zero-padded to 4 bytes (the padding is not
 * counted in nla_len, as in the kernel's and libnl's nla_put).
 */
export class AttrWriter {
  private readonly chunks: Buffer[] = [];
  private length = 0;

  /** Raw attribute: `type` may carry NLA_F_* flags; `data` at most 65531 bytes. */
  put(type: number, data: Uint8Array): this {
    if (!Number.isInteger(type) || type < 0 || type > 0xffff) throw new RangeError(`attribute type ${type} out of range`);
    const len = NLA_HDRLEN + data.length;
    if (len > 0xffff) throw new RangeError(`attribute ${type & NLA_TYPE_MASK} too long (${data.length} bytes)`);
    const padded = nlaAlign(len);
    const buf = Buffer.alloc(padded);
    writeU16(buf, 0, len);
    writeU16(buf, 2, type);
    buf.set(data, NLA_HDRLEN);
    this.chunks.push(buf);
    this.length += padded;
    return this;
  }

  u8(type: number, value: number): this {
    return this.put(type, Buffer.from([checkUint(value, 0xff)]));
  }

  /** Host-endian u16. */
  u16(type: number, value: number): this {
    return this.uint(type, 2, value, HOST_LE);
  }

  /** Network-order u16 (__be16), e.g. a port. */
  be16(type: number, value: number): this {
    return this.uint(type, 2, value, false);
  }

  /** Host-endian u32. */
  u32(type: number, value: number): this {
    return this.uint(type, 4, value, HOST_LE);
  }

  /** Network-order u32 (__be32), e.g. a netmask. */
  be32(type: number, value: number): this {
    return this.uint(type, 4, value, false);
  }

  /** Host-endian u64. */
  u64(type: number, value: bigint): this {
    const b = Buffer.alloc(8);
    if (HOST_LE) b.writeBigUInt64LE(value, 0);
    else b.writeBigUInt64BE(value, 0);
    return this.put(type, b);
  }

  /** An unsigned integer of `bytes` (2 or 4) bytes, little- or big-endian; RangeError when it does not fit. */
  private uint(type: number, bytes: 2 | 4, value: number, littleEndian: boolean): this {
    const b = Buffer.alloc(bytes);
    const v = checkUint(value, bytes === 2 ? 0xffff : 0xffffffff);
    if (littleEndian) b.writeUIntLE(v, 0, bytes);
    else b.writeUIntBE(v, 0, bytes);
    return this.put(type, b);
  }

  /** NUL-terminated string (nla_put_string); ASCII only. */
  string(type: number, value: string): this {
    if (!/^[\x20-\x7e]*$/.test(value)) throw new RangeError(`attribute string ${JSON.stringify(value)} is not printable ASCII`);
    return this.put(type, Buffer.from(`${value}\0`, 'ascii'));
  }

  /**
   * Nested attribute: `fill` writes the inner attributes. nla_len covers the
   * inner attributes with their padding, as nla_nest_end computes it.
   * @param flag set NLA_F_NESTED on the type (default true, as libnl 3.7).
   */
  nest(type: number, fill: (inner: AttrWriter) => void, flag = true): this {
    const inner = new AttrWriter();
    fill(inner);
    return this.put(flag ? type | NLA_F_NESTED : type, inner.toBuffer());
  }

  /** The stream so far (a multiple of 4 bytes). */
  toBuffer(): Buffer {
    return Buffer.concat(this.chunks, this.length);
  }
}

/** One parsed attribute; `data` is a view into the parsed buffer (no padding). */
export interface NlAttr {
  /** nla_type without the flag bits. */
  readonly type: number;
  /** NLA_F_NESTED was set. */
  readonly nested: boolean;
  /** NLA_F_NET_BYTEORDER was set. */
  readonly netByteOrder: boolean;
  readonly data: Buffer;
}

/**
 * Split an attribute stream into attributes. Strict: an attribute whose
 * nla_len is below 4 or runs past the end throws. The padding of the last
 * attribute may be missing; fewer than 4 trailing bytes are ignored (as the
 * kernel's nla_for_each_attr does).
 * @throws NetlinkDecodeError on a malformed stream.
 */
export function parseAttrs(buf: Uint8Array): NlAttr[] {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const out: NlAttr[] = [];
  let off = 0;
  while (b.length - off >= NLA_HDRLEN) {
    const len = readU16(b, off);
    const rawType = readU16(b, off + 2);
    if (len < NLA_HDRLEN || off + len > b.length) {
      throw new NetlinkDecodeError(`malformed attribute at offset ${off}: nla_len ${len}, ${b.length - off} bytes left`);
    }
    out.push({
      type: rawType & NLA_TYPE_MASK,
      nested: (rawType & NLA_F_NESTED) !== 0,
      netByteOrder: (rawType & NLA_F_NET_BYTEORDER) !== 0,
      data: b.subarray(off + NLA_HDRLEN, off + len),
    });
    off += nlaAlign(len);
  }
  return out;
}

/**
 * Index attributes by type. A repeated type keeps the last one, as the
 * kernel's nla_parse does; unknown types are kept too (callers ignore them).
 */
export function indexAttrs(attrs: readonly NlAttr[]): Map<number, NlAttr> {
  const m = new Map<number, NlAttr>();
  for (const a of attrs) m.set(a.type, a);
  return m;
}

/** Host-endian u16 payload (exactly 2 bytes). @throws NetlinkDecodeError */
export function attrU16(a: NlAttr, what: string): number {
  return attrUint(a, what, 2, HOST_LE);
}

/** Network-order u16 payload (exactly 2 bytes). @throws NetlinkDecodeError */
export function attrBe16(a: NlAttr, what: string): number {
  return attrUint(a, what, 2, false);
}

/** Host-endian u32 payload (exactly 4 bytes). @throws NetlinkDecodeError */
export function attrU32(a: NlAttr, what: string): number {
  return attrUint(a, what, 4, HOST_LE);
}

/** Network-order u32 payload (exactly 4 bytes). @throws NetlinkDecodeError */
export function attrBe32(a: NlAttr, what: string): number {
  return attrUint(a, what, 4, false);
}

/** An unsigned payload of exactly `bytes` bytes, little- or big-endian. @throws NetlinkDecodeError */
function attrUint(a: NlAttr, what: string, bytes: 2 | 4, littleEndian: boolean): number {
  expectLen(a, bytes, what);
  return littleEndian ? a.data.readUIntLE(0, bytes) : a.data.readUIntBE(0, bytes);
}

/** Host-endian unsigned counter of 4 or 8 bytes, as a number. @throws NetlinkDecodeError */
export function attrCounter(a: NlAttr, what: string): number {
  if (a.data.length === 4) return readU32(a.data, 0);
  if (a.data.length === 8) return Number(HOST_LE ? a.data.readBigUInt64LE(0) : a.data.readBigUInt64BE(0));
  throw new NetlinkDecodeError(`${what}: expected 4 or 8 bytes, got ${a.data.length}`);
}

/** NUL-terminated string payload (text up to the first NUL). @throws NetlinkDecodeError */
export function attrString(a: NlAttr, what: string): string {
  const nul = a.data.indexOf(0);
  if (nul < 0) throw new NetlinkDecodeError(`${what}: string is not NUL-terminated`);
  return a.data.subarray(0, nul).toString('latin1');
}

/** Nested attributes of a payload. @throws NetlinkDecodeError */
export function attrNested(a: NlAttr): NlAttr[] {
  return parseAttrs(a.data);
}

function expectLen(a: NlAttr, n: number, what: string): void {
  if (a.data.length !== n) throw new NetlinkDecodeError(`${what}: expected ${n} bytes, got ${a.data.length}`);
}

export function readU16(b: Buffer, off: number): number {
  return HOST_LE ? b.readUInt16LE(off) : b.readUInt16BE(off);
}

export function readU32(b: Buffer, off: number): number {
  return HOST_LE ? b.readUInt32LE(off) : b.readUInt32BE(off);
}

export function writeU16(b: Buffer, off: number, v: number): void {
  if (HOST_LE) b.writeUInt16LE(v, off);
  else b.writeUInt16BE(v, off);
}

export function writeU32(b: Buffer, off: number, v: number): void {
  if (HOST_LE) b.writeUInt32LE(v, off);
  else b.writeUInt32BE(v, off);
}

function checkUint(v: number, max: number): number {
  if (!Number.isInteger(v) || v < 0 || v > max) throw new RangeError(`${v} is not an integer in 0-${max}`);
  return v;
}
