/**
 * The common query, read without decoding the whole message: a QUERY
 * (opcode 0, QR clear) with exactly one question, no answer or authority
 * records, and at most one additional record (a client's EDNS OPT, RFC 6891
 * §6.1.1). The header's fields are fixed-offset 16-bit integers
 * (RFC 1035 §4.1.1); the question and the additional record are decoded by
 * dns-packet's own codecs (`dns.question.decode`, `dns.answer.decode`), at
 * the offsets and in the order `dns.decode` decodes them, so a message this
 * module reads decodes the same way under `dns.decode`, and one that
 * `dns.decode` rejects is not read here either.
 *
 * Anything else (another count, opcode or QR, a message the codecs reject)
 * is `undefined`: the server's full path (`dns.decode`) handles it as it
 * always has.
 */
import * as dns from 'dns-packet';
import type { Answer, Question } from 'dns-packet';

/** dns-packet's question and record codecs, which it exports but its type declarations leave out. */
interface Codecs {
  readonly question: { decode: ((buf: Buffer, offset: number) => Question) & { bytes: number } };
  readonly answer: { decode: ((buf: Buffer, offset: number) => Answer) & { bytes: number } };
}
const codecs = dns as unknown as Codecs;

/** A header's QR bit (RFC 1035 §4.1.1). */
const QR = 0x8000;
/** Where a header's opcode is (4 bits from bit 11). */
const OPCODE_SHIFT = 11;

/** What the server's answer to a simple query depends on, besides the zone. */
export interface SimpleQuery {
  /** The message ID (offset 0). */
  readonly id: number;
  /** The header's flags word (offset 2), QR and opcode clear. */
  readonly flags: number;
  /** The one question, as `dns.decode` gives it. */
  readonly question: Question;
  /** The additional record when there is one (EDNS OPT, or any other type), as `dns.decode` gives it. */
  readonly additional: Answer | undefined;
}

/**
 * Read `msg` when it is a simple query (see the module comment), else
 * undefined. Never throws.
 */
export function readSimpleQuery(msg: Buffer): SimpleQuery | undefined {
  if (msg.length < 12) return undefined;
  const flags = msg.readUInt16BE(2);
  if ((flags & QR) !== 0 || ((flags >> OPCODE_SHIFT) & 0xf) !== 0) return undefined;
  if (msg.readUInt16BE(4) !== 1 || msg.readUInt16BE(6) !== 0 || msg.readUInt16BE(8) !== 0) return undefined;
  const additionals = msg.readUInt16BE(10);
  if (additionals > 1) return undefined;
  try {
    const question = codecs.question.decode(msg, 12);
    const additional = additionals === 1 ? codecs.answer.decode(msg, 12 + codecs.question.decode.bytes) : undefined;
    return { id: msg.readUInt16BE(0), flags, question, additional };
  } catch {
    return undefined;
  }
}
