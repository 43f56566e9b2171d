/**
 * Set keys and map data as the kernel holds them: a concatenation of fields
 * (`ip daddr . meta l4proto . th dport`), each field taking round_up(len, 4)
 * bytes, zero-padded after the value. That is the NFT_REG32 layout: a
 * concatenation is loaded into consecutive 32-bit registers
 * (net/netfilter/nft_set_*.c compare whole registers; nft's
 * netlink_gen_concat_data pads each field with `round_up(len, 4)`, see
 * nft's src/netlink.c and the kernel's NFTA_SET_DESC_CONCAT field_len).
 *
 * Byte order per field kind, as nft 1.0.6 encodes them (checked against
 * `nft --debug=mnl` in test/fixtures/nftables):
 * - `ipv4`: 4 bytes, network order (ipv4_addr is big endian);
 * - `ipv6`: 16 bytes, network order;
 * - `proto`: 1 byte (`meta l4proto`, inet_proto), then 3 zero bytes;
 * - `port`: 2 bytes big endian (`th dport`, inet_service), then 2 zero bytes;
 * - `u32`: 4 bytes in HOST byte order. This is what `numgen` writes to its
 *   register (nft_ng_random_eval stores a u32; nft types it as an integer
 *   of BYTEORDER_HOST_ENDIAN), so `... . numgen random mod N` keys carry
 *   the bucket in host order: nft encodes bucket 16909060 (0x01020304) as
 *   04 03 02 01 on x86 (fixture numgen.hex).
 */
import { isIPv4, isIPv6 } from 'node:net';
import { endianness } from 'node:os';
import { ipFromBytes, ipToBytes, parseIP } from '../../model/addr.ts';
import { NftDecodeError, NftValidationError } from './errors.ts';

/** One field of a concatenation, by kind. */
export type ConcatField =
  /** Dotted-quad IPv4 address, e.g. "10.96.0.10" (node:net isIPv4). */
  | { readonly ipv4: string }
  /** IPv6 address text without a zone index, e.g. "fd00::1". */
  | { readonly ipv6: string }
  /** IP protocol number 0-255 (6 tcp, 17 udp, 132 sctp). */
  | { readonly proto: number }
  /** Transport port 0-65535. */
  | { readonly port: number }
  /** Unsigned 32-bit integer, host byte order (a numgen bucket). */
  | { readonly u32: number };

/** The kind of a {@link ConcatField}: the name of its one property. */
export type FieldKind = 'ipv4' | 'ipv6' | 'proto' | 'port' | 'u32';

/** Value bytes of each kind, before the padding to 4. */
export const FIELD_BYTES: Readonly<Record<FieldKind, number>> = { ipv4: 4, ipv6: 16, proto: 1, port: 2, u32: 4 };

const KINDS = Object.keys(FIELD_BYTES) as FieldKind[];
const HOST_LE = endianness() === 'LE';

/** Bytes a field occupies in a concatenation: round_up(len, 4). */
export function fieldSize(kind: FieldKind): number {
  return (FIELD_BYTES[kind] + 3) & ~3;
}

/** Total bytes of a concatenation of `kinds` (the set's key_len / data_len). */
export function concatSize(kinds: readonly FieldKind[]): number {
  return kinds.reduce((n, k) => n + fieldSize(k), 0);
}

/** The kind of a field, validating that it has exactly one known property. @throws NftValidationError */
export function fieldKind(field: ConcatField, path = 'field'): FieldKind {
  if (typeof field !== 'object' || field === null) throw new NftValidationError(path, 'is not an object');
  const keys = Object.keys(field);
  const kind = keys[0] as FieldKind | undefined;
  if (keys.length !== 1 || kind === undefined || !KINDS.includes(kind)) {
    throw new NftValidationError(path, `must have exactly one of ${KINDS.join(', ')} (has ${keys.join(', ') || 'none'})`);
  }
  return kind;
}

/**
 * Encode a concatenation: each field in order, each padded to a multiple of
 * 4 bytes. A single field is encoded the same way (an `ip daddr` key is 4
 * bytes, a `th dport` one 4 bytes with the port in the first 2).
 * @param path field path used in errors, e.g. "elements[2].key".
 * @throws NftValidationError naming the bad field (`path[i].kind`) for an
 *   invalid address, a port outside 0-65535, a protocol outside 0-255, a
 *   u32 outside 0-4294967295, an unknown kind, or an empty list or one
 *   longer than NFT_DATA_VALUE_MAXLEN (64 bytes).
 */
export function encodeConcat(fields: readonly ConcatField[], path = 'key'): Buffer {
  if (!Array.isArray(fields) || fields.length === 0) throw new NftValidationError(path, 'needs at least one field');
  const parts = fields.map((f, i) => encodeField(f, `${path}[${i}]`));
  const out = Buffer.concat(parts);
  if (out.length > 64) throw new NftValidationError(path, `is ${out.length} bytes, more than the 64 of NFT_DATA_VALUE_MAXLEN`);
  return out;
}

function encodeField(field: ConcatField, path: string): Buffer {
  const kind = fieldKind(field, path);
  const value: unknown = (field as Record<string, unknown>)[kind];
  const at = `${path}.${kind}`;
  const out = Buffer.alloc(fieldSize(kind));
  switch (kind) {
    case 'ipv4': {
      if (typeof value !== 'string' || !isIPv4(value)) throw new NftValidationError(at, `${JSON.stringify(value)} is not an IPv4 address`);
      ipToBytes(parseIP(value)!).copy(out);
      return out;
    }
    case 'ipv6': {
      const ip = typeof value === 'string' && isIPv6(value) ? parseIP(value) : undefined;
      if (ip?.family !== 6) throw new NftValidationError(at, `${JSON.stringify(value)} is not an IPv6 address`);
      ipToBytes(ip).copy(out);
      return out;
    }
    case 'proto':
      out.writeUInt8(checkInt(value, 0xff, at), 0);
      return out;
    case 'port':
      out.writeUInt16BE(checkInt(value, 0xffff, at), 0);
      return out;
    case 'u32': {
      const v = checkInt(value, 0xffffffff, at);
      if (HOST_LE) out.writeUInt32LE(v, 0);
      else out.writeUInt32BE(v, 0);
      return out;
    }
  }
}

function checkInt(value: unknown, max: number, path: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > max) {
    throw new NftValidationError(path, `${JSON.stringify(value)} is not an integer in 0-${max}`);
  }
  return value;
}

/**
 * Decode a concatenation of `kinds` (the inverse of {@link encodeConcat}):
 * IPv6 comes back in canonical text ("fd00::1"). Padding bytes are not checked.
 * @throws NftDecodeError when `bytes` is not exactly {@link concatSize}(kinds) long.
 * @throws NftValidationError for an unknown kind.
 */
export function decodeConcat(bytes: Uint8Array, kinds: readonly FieldKind[]): ConcatField[] {
  for (const [i, k] of kinds.entries()) {
    if (!KINDS.includes(k)) throw new NftValidationError(`kinds[${i}]`, `${JSON.stringify(k)} is not one of ${KINDS.join(', ')}`);
  }
  const want = concatSize(kinds);
  if (bytes.length !== want) throw new NftDecodeError(`value of ${bytes.length} bytes does not fit ${kinds.join(' . ')} (${want} bytes)`);
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: ConcatField[] = [];
  let off = 0;
  for (const kind of kinds) {
    switch (kind) {
      case 'ipv4':
      case 'ipv6':
        out.push({ [kind]: ipFromBytes(b.subarray(off, off + FIELD_BYTES[kind])).text } as ConcatField);
        break;
      case 'proto':
        out.push({ proto: b.readUInt8(off) });
        break;
      case 'port':
        out.push({ port: b.readUInt16BE(off) });
        break;
      case 'u32':
        out.push({ u32: HOST_LE ? b.readUInt32LE(off) : b.readUInt32BE(off) });
        break;
    }
    off += fieldSize(kind);
  }
  return out;
}
