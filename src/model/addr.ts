/**
 * IP addresses and CIDRs, IPv4 and IPv6: the one place where drover parses,
 * prints, orders and compares them.
 *
 * Shapes. An {@link IPAddress} is a family (4 or 6), the address as an
 * unsigned integer (`bigint`, 32 or 128 bits) and its canonical text. An
 * {@link IPPrefix} is a family, a network address with its host bits zero,
 * a prefix length and its canonical text ("10.96.0.0/12", "fd00::/64").
 *
 * What is accepted.
 *   - IPv4: a canonical dotted quad, four decimal octets 0-255 without
 *     leading zeros ("10.96.0.1"). Leading zeros ("010.96.0.1") are refused
 *     by {@link parseIP}, because inet_aton and iptables read them as octal;
 *     {@link parseIPSloppy} accepts them and reads them as decimal, as
 *     kube-proxy does for endpoint addresses (k8s.io/utils/net ParseIPSloppy).
 *   - IPv6: any text Node's `net.isIPv6` accepts (RFC 4291 section 2.2,
 *     including "::" compression and an IPv4 tail "::ffff:10.0.0.1") except a
 *     zone index ("fe80::1%eth0"), which is no part of an address.
 *   - Nothing else: no surrounding spaces, no hex or octal IPv4, no
 *     brackets, no port.
 *
 * Canonical text. IPv4: the dotted quad. IPv6: RFC 5952 (lower-case hex
 * without leading zeros, the longest run of two or more zero groups
 * compressed to "::", the first such run on a tie), with the IPv4-mapped
 * range ::ffff:0:0/96 printed in mixed notation ("::ffff:10.0.0.1"), as Go's
 * net/netip prints it.
 *
 * Families never mix. An IPv4-mapped IPv6 address ("::ffff:10.0.0.1") is an
 * IPv6 address: it is not equal to, and not contained in a prefix of, the
 * IPv4 address it maps, and an IPv4 address is never inside an IPv6 prefix
 * (even "::/0"). This is Go's net/netip `Prefix.Contains`. Node's
 * `net.BlockList` is not used for containment because it unmaps: there,
 * "::ffff:10.0.0.1" is inside 10.0.0.0/8 and every IPv4 address is inside
 * "::/0".
 *
 * Nothing here throws except where a docstring says so.
 */
import { isIPv4 as nodeIsIPv4, isIPv6 as nodeIsIPv6 } from 'node:net';
import { quote } from './quote.ts';

/** An address family: 4 (IPv4, 32 bits) or 6 (IPv6, 128 bits). */
export type IPFamily = 4 | 6;

/** One IP address. */
export interface IPAddress {
  readonly family: IPFamily;
  /** The address as an unsigned integer: 0 ≤ value < 2^32 (IPv4) or 2^128 (IPv6). */
  readonly value: bigint;
  /** Canonical text (see the module comment), e.g. "10.96.0.1", "fd00::1". */
  readonly text: string;
}

/** A CIDR: the addresses whose first `bits` bits are those of `network`. */
export interface IPPrefix {
  readonly family: IPFamily;
  /** The first address, host bits zero. */
  readonly network: bigint;
  /** Prefix length: 0-32 (IPv4) or 0-128 (IPv6). */
  readonly bits: number;
  /** Canonical text "network/bits", e.g. "10.96.0.0/12", "fd00::/64". */
  readonly text: string;
}

/** Address width in bits of each family. */
const WIDTH: Readonly<Record<IPFamily, number>> = { 4: 32, 6: 128 };

/**
 * Node's `net.isIPv4`: true for a canonical dotted quad ("10.0.0.1"), false
 * for leading zeros, CIDRs, spaces or anything else (Node's net docs).
 */
export function isIPv4(text: string): boolean {
  return nodeIsIPv4(text);
}

/**
 * Node's `net.isIPv6`: true for IPv6 text in any RFC 4291 form. Note that
 * it also accepts a zone index ("fe80::1%eth0"), which {@link parseIP}
 * refuses; use `parseIP(text)?.family === 6` for a usable address.
 */
export function isIPv6(text: string): boolean {
  // Every IPv6 text has a ':'; most texts asked about are IPv4 ones, which the regular expression is slow to refuse.
  return text.includes(':') && nodeIsIPv6(text);
}

// ---------------------------------------------------------------- IPv4 text

/**
 * How a text reads as an IPv4 dotted quad:
 *   - `canonical`: four octets 0-255 without leading zeros ("10.0.0.1");
 *   - `leading-zeros`: four octets 0-255, some written with leading zeros
 *     ("10.0.0.01"), which kube-proxy's ParseIPSloppy reads as decimal;
 *   - `out-of-range`: four groups of digits, one above 255 ("10.0.0.256");
 *   - `invalid`: anything else ("10.0.0", "a.b.c.d", "10.0.0.1 ", "::1").
 */
export type IPv4Form = 'canonical' | 'leading-zeros' | 'out-of-range' | 'invalid';

const TWO_32 = 2 ** 32;
const OUT_OF_RANGE = -1;
const INVALID = -2;

/**
 * Read `text` as four dot-separated groups of ASCII decimal digits, in one
 * pass: the uint32 value when canonical; the value + 2^32 when some octet
 * has leading zeros; OUT_OF_RANGE when a group is above 255; INVALID for
 * anything else.
 */
function scanIPv4(text: string): number {
  let value = 0;
  let octet = 0;
  let digits = 0;
  let dots = 0;
  let zeros = false;
  let over = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 48 && c <= 57) {
      if (digits === 1 && octet === 0) zeros = true;
      octet = octet * 10 + (c - 48);
      digits++;
      if (octet > 255) over = true;
    } else if (c === 46 && digits > 0 && dots < 3) {
      value = value * 256 + octet;
      octet = 0;
      digits = 0;
      dots++;
    } else return INVALID;
  }
  if (dots !== 3 || digits === 0) return INVALID;
  if (over) return OUT_OF_RANGE;
  value = value * 256 + octet;
  return zeros ? value + TWO_32 : value;
}

/** Classify `text` as a dotted quad; see {@link IPv4Form}. */
export function classifyIPv4(text: string): IPv4Form {
  const n = scanIPv4(text);
  return n === INVALID ? 'invalid' : n === OUT_OF_RANGE ? 'out-of-range' : n >= TWO_32 ? 'leading-zeros' : 'canonical';
}

/**
 * True for a canonical dotted-quad IPv4 address ("10.96.0.1"); false for
 * leading zeros ("010.0.0.1"), CIDRs, IPv6, surrounding spaces or anything
 * else. A character-level check ({@link classifyIPv4}) and Node's
 * `net.isIPv4` must both agree, so that a value that passes can be written
 * as it is into an iptables-restore payload or a netlink message.
 */
export function isCanonicalIPv4(text: string): boolean {
  const n = scanIPv4(text);
  return n >= 0 && n < TWO_32 && nodeIsIPv4(text);
}

/**
 * The uint32 value of a canonical dotted-quad IPv4 address (as
 * {@link isCanonicalIPv4} decides), e.g. "10.96.0.1" → 0x0a600001;
 * undefined for any other text. One pass over the text, for hot paths.
 */
export function canonicalIPv4Value(text: string): number | undefined {
  const n = dottedQuadValue(text);
  return n !== undefined && nodeIsIPv4(text) ? n : undefined;
}

/**
 * The uint32 value of four dot-separated decimal octets 0-255 without
 * leading zeros (one pass over the characters, without the second check of
 * {@link canonicalIPv4Value}); undefined for any other text. Two addresses
 * with values are ordered by them, as {@link compareAddresses} orders them.
 */
export function dottedQuadValue(text: string): number | undefined {
  const n = scanIPv4(text);
  return n >= 0 && n < TWO_32 ? n : undefined;
}

/**
 * True for "a.b.c.d/n" with a canonical dotted quad ({@link isCanonicalIPv4})
 * and a prefix length 0-32 without leading zeros. Host bits may be set
 * ("10.0.0.1/8" passes); {@link parseCIDR} tells them apart. The check
 * done before a CIDR is written into a rule.
 */
export function isCanonicalIPv4CIDR(text: string): boolean {
  const slash = text.indexOf('/');
  return slash > 0 && isCanonicalIPv4(text.slice(0, slash)) && prefixLength(text.slice(slash + 1), 32) !== undefined;
}

/** A prefix length written in decimal without leading zeros, 0-`max`; undefined otherwise. */
function prefixLength(text: string, max: number): number | undefined {
  if (!/^(0|[1-9][0-9]{0,2})$/.test(text)) return undefined;
  const n = Number(text);
  return n <= max ? n : undefined;
}

/**
 * IPv4 dotted quad → unsigned 32-bit integer (host order), e.g.
 * "10.96.0.0" → 0x0a600000. Canonical dotted quads only.
 * @throws Error `"<text>" is not a valid IPv4 address (dotted quad, no leading zeros)` otherwise.
 */
export function ipv4ToUint32(text: string): number {
  const n = canonicalIPv4Value(text);
  if (n === undefined) throw new Error(`${quote(text)} is not a valid IPv4 address (dotted quad, no leading zeros)`);
  return n;
}

/**
 * Unsigned 32-bit integer → IPv4 dotted quad, e.g. 0x0a600001 → "10.96.0.1".
 * @throws RangeError for a non-integer or a value outside 0..2^32-1.
 */
export function uint32ToIPv4(n: number): string {
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) throw new RangeError(`${n} is not an unsigned 32-bit integer`);
  return `${n >>> 24}.${(n >>> 16) & 0xff}.${(n >>> 8) & 0xff}.${n & 0xff}`;
}

// ---------------------------------------------------------------- IPv6 text

/** The 128-bit value of text that Node's `net.isIPv6` accepts and that has no zone index. */
function ipv6Value(text: string): bigint | undefined {
  if (!nodeIsIPv6(text) || text.includes('%')) return undefined;
  let body = text;
  let tail: number[] = [];
  const lastColon = body.lastIndexOf(':');
  if (body.includes('.', lastColon)) {
    // An IPv4 tail (isIPv6 has checked it is a canonical dotted quad): the last 32 bits.
    const v4 = scanIPv4(body.slice(lastColon + 1));
    tail = [v4 >>> 16, v4 & 0xffff];
    body = body.slice(0, lastColon);
    if (body.endsWith(':')) body += ':'; // "::10.0.0.1": keep the "::"
  }
  const groups = (part: string): number[] => (part === '' ? [] : part.split(':').map((g) => Number.parseInt(g, 16)));
  const gap = body.indexOf('::');
  let words: number[];
  if (gap < 0) words = [...groups(body), ...tail];
  else {
    const head = groups(body.slice(0, gap));
    const rest = [...groups(body.slice(gap + 2)), ...tail];
    const zeros = 8 - head.length - rest.length;
    if (zeros < 1) return undefined;
    words = [...head, ...new Array<number>(zeros).fill(0), ...rest];
  }
  if (words.length !== 8) return undefined;
  return words.reduce((acc, w) => (acc << 16n) | BigInt(w), 0n);
}

/** RFC 5952 text of a 128-bit value (mixed notation for ::ffff:0:0/96). */
function formatIPv6(value: bigint): string {
  const words = Array.from({ length: 8 }, (_, i) => Number((value >> BigInt(112 - 16 * i)) & 0xffffn));
  if (value >> 32n === 0xffffn) return `::ffff:${uint32ToIPv4(Number(value & 0xffffffffn))}`;
  // Longest run of two or more zero groups, the first on a tie.
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (ws: number[]) => ws.map((w) => w.toString(16)).join(':');
  if (best < 0) return hex(words);
  return `${hex(words.slice(0, best))}::${hex(words.slice(best + bestLen))}`;
}

// ---------------------------------------------------------------- addresses

/**
 * The address of `family` with integer `value`, with its canonical text.
 * @throws RangeError when `value` is outside 0..2^32-1 (IPv4) or 0..2^128-1 (IPv6).
 */
export function ipAddress(family: IPFamily, value: bigint): IPAddress {
  if (value < 0n || value >> BigInt(WIDTH[family]) !== 0n) throw new RangeError(`${value} is not an IPv${family} address value`);
  return { family, value, text: family === 4 ? uint32ToIPv4(Number(value)) : formatIPv6(value) };
}

/**
 * Parse an IPv4 or IPv6 address, strictly: a canonical dotted quad, or IPv6
 * text without a zone index (see the module comment). The result's `text`
 * is canonical ("FD00:0::1" → "fd00::1"). Undefined for anything else.
 */
export function parseIP(text: string): IPAddress | undefined {
  if (isCanonicalIPv4(text)) return { family: 4, value: BigInt(scanIPv4(text)), text };
  const v6 = ipv6Value(text);
  return v6 === undefined ? undefined : ipAddress(6, v6);
}

/**
 * {@link parseIP}, plus IPv4 octets with leading zeros read as decimal
 * ("10.180.0.01" → 10.180.0.1; "010.0.0.1" → 10.0.0.1, not octal 8.0.0.1).
 * This is how kube-proxy reads endpoint addresses: k8s.io/utils/net
 * ParseIPSloppy, Go's net.ParseIP before Go 1.17. IPv6 is read as by
 * {@link parseIP}. Undefined for anything else.
 */
export function parseIPSloppy(text: string): IPAddress | undefined {
  const n = scanIPv4(text);
  if (n >= TWO_32) return ipAddress(4, BigInt(n - TWO_32));
  return parseIP(text);
}

/**
 * An address from its network-order bytes: 4 bytes (IPv4) or 16 (IPv6), as
 * netlink and IPVS carry them.
 * @throws RangeError for any other length.
 */
export function ipFromBytes(bytes: Uint8Array): IPAddress {
  if (bytes.length !== 4 && bytes.length !== 16) throw new RangeError(`${bytes.length} bytes are not an IPv4 or IPv6 address`);
  const value = bytes.reduce((acc, b) => (acc << 8n) | BigInt(b), 0n);
  return ipAddress(bytes.length === 4 ? 4 : 6, value);
}

/** The network-order bytes of `ip`: 4 (IPv4) or 16 (IPv6). */
export function ipToBytes(ip: IPAddress): Buffer {
  const n = WIDTH[ip.family] / 8;
  const out = Buffer.alloc(n);
  for (let i = 0; i < n; i++) out[i] = Number((ip.value >> BigInt(8 * (n - 1 - i))) & 0xffn);
  return out;
}

/** The address `x` denotes: itself, or its text read with {@link parseIP}; undefined when the text is none. */
function asAddress(x: IPAddress | string): IPAddress | undefined {
  return typeof x === 'string' ? parseIP(x) : x;
}

/**
 * Address order: every IPv4 address before every IPv6 address, then by
 * numeric value ("10.0.0.9" before "10.0.0.10"). Negative, zero or positive,
 * for Array.prototype.sort. Strings are read with {@link parseIP}.
 * @throws TypeError when a string is not an address (callers sort validated addresses).
 */
export function compareAddresses(a: IPAddress | string, b: IPAddress | string): number {
  if (typeof a === 'string' && typeof b === 'string') {
    // The common case, two dotted quads, without bigints.
    const x = dottedQuadValue(a);
    const y = dottedQuadValue(b);
    if (x !== undefined && y !== undefined) return x - y;
  }
  const x = asAddress(a);
  const y = asAddress(b);
  if (x === undefined || y === undefined) throw new TypeError(`cannot order ${quote(String(x === undefined ? a : b))}: not an IP address`);
  return x.family - y.family || (x.value < y.value ? -1 : x.value > y.value ? 1 : 0);
}

// ---------------------------------------------------------------- prefixes

/**
 * The prefix of `family` with `bits` bits that contains `address` (host bits
 * of `address` are cleared), with its canonical text.
 * @throws RangeError when `bits` is not an integer 0-32 (IPv4) or 0-128 (IPv6), or `address` is out of range.
 */
export function ipPrefix(family: IPFamily, address: bigint, bits: number): IPPrefix {
  const width = WIDTH[family];
  if (!Number.isInteger(bits) || bits < 0 || bits > width) throw new RangeError(`${bits} is not an IPv${family} prefix length`);
  const host = BigInt(width - bits);
  const network = ipAddress(family, (address >> host) << host);
  return { family, network: network.value, bits, text: `${network.text}/${bits}` };
}

/**
 * Parse "address/length" (like Go's net.ParseCIDR): the address as
 * {@link parseIP} reads it, and a length in decimal without leading zeros,
 * 0-32 (IPv4) or 0-128 (IPv6). Returns the address as written (`ip`) and the
 * prefix with its host bits cleared (`prefix`); they differ when host bits
 * are set ("10.96.0.1/12": ip 10.96.0.1, prefix 10.96.0.0/12). Undefined
 * for anything else.
 */
export function parseCIDR(text: string): { ip: IPAddress; prefix: IPPrefix } | undefined {
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const ip = parseIP(text.slice(0, slash));
  if (ip === undefined) return undefined;
  const bits = prefixLength(text.slice(slash + 1), WIDTH[ip.family]);
  return bits === undefined ? undefined : { ip, prefix: ipPrefix(ip.family, ip.value, bits) };
}

/** Canonical text of a prefix, "network/bits" (the same as `prefix.text`). */
export function formatCIDR(prefix: IPPrefix): string {
  return prefix.text;
}

/**
 * True when `ip` lies inside `prefix`. Families never mix (see the module
 * comment): an IPv4 address is in no IPv6 prefix, an IPv4-mapped IPv6
 * address in no IPv4 prefix. "0.0.0.0/0" holds every IPv4 address, "::/0"
 * every IPv6 address. Strings are read with {@link parseCIDR} (host bits
 * ignored) and {@link parseIP}; an address string that is no address is
 * in no prefix.
 * @throws TypeError when `prefix` is a string that is not a CIDR.
 */
export function cidrContains(prefix: IPPrefix | string, ip: IPAddress | string): boolean {
  const p = typeof prefix === 'string' ? parseCIDR(prefix)?.prefix : prefix;
  if (p === undefined) throw new TypeError(`${quote(String(prefix))} is not a CIDR`);
  const a = asAddress(ip);
  if (a === undefined || a.family !== p.family) return false;
  const host = BigInt(WIDTH[p.family] - p.bits);
  return a.value >> host === p.network >> host;
}

/** An address and port to listen on, as {@link parseBindAddress} reads it. */
export interface BindAddress {
  readonly ip: IPAddress;
  /** 0-65535; 0 lets the kernel choose. */
  readonly port: number;
}

/**
 * Parse a listen address as kube-proxy's `--metrics-bind-address` and
 * `--healthz-bind-address` take it: "IP:PORT" for IPv4 ("127.0.0.1:10249",
 * "0.0.0.0:10256"), "[IP]:PORT" for IPv6 ("[::]:10249"). The address is
 * read strictly ({@link parseIP}). Undefined for anything else.
 */
export function parseBindAddress(text: string): BindAddress | undefined {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([0-9.]+)):(\d{1,5})$/.exec(text);
  if (!m) return undefined;
  const ip = m[1] !== undefined ? parseIP(m[1]) : parseIP(m[2]!);
  const port = Number(m[3]);
  if (ip === undefined || (m[1] !== undefined) !== (ip.family === 6) || port > 65535) return undefined;
  return { ip, port };
}

/**
 * "ip:port" for an IPv4 address, "[ip]:port" for an IPv6 one (RFC 3986
 * §3.2.2, as iptables-save prints a DNAT destination and Go's
 * net.JoinHostPort joins them). `ip` is not checked.
 */
export function joinHostPort(ip: string, port: number): string {
  return ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`;
}
