/**
 * The IPVS generic-netlink message codec: pure functions, no I/O.
 *
 * Encoders return the ATTRIBUTE PAYLOAD of one request, i.e. the bytes that
 * follow the 4-byte genl header (the netlink and genl headers are the
 * transport's job, see netlink.ts). Decoders take the same part of one reply
 * message. Everything follows the kernel's UAPI header `<linux/ip_vs.h>`
 * (Debian package linux-libc-dev, /usr/include/linux/ip_vs.h) and the
 * kernel's own parser and filler, net/netfilter/ipvs/ip_vs_ctl.c
 * (ip_vs_genl_parse_service, ip_vs_genl_parse_dest, ip_vs_genl_fill_*).
 *
 * Byte layout (checked against libnl-built golden vectors,
 * test/fixtures/ipvs/golden.c):
 * - attribute = nla_len u16 (header + payload, without padding), nla_type u16
 *   (bit 15 NLA_F_NESTED, bit 14 NLA_F_NET_BYTEORDER), payload, zero padding
 *   to a multiple of 4. Header fields are host byte order.
 * - addresses are `union nf_inet_addr`: 16 bytes, an IPv4 address in the first
 *   4 (network order), the other 12 zero; an IPv6 address in all 16;
 * - ports are __be16; the persistence netmask is __be32 (network order) for
 *   an IPv4 service, and for an IPv6 one the prefix length 1-128 as a
 *   host-endian u32 (ip_vs_add_service reads `(__force __u32)
 *   u->netmask` as the prefix length; libipvs and kube-proxy's netlink
 *   library put it with nla_put_u32);
 * - everything else (AF, protocol, flags, timeout, weight, thresholds,
 *   counters) is host-endian u16/u32/u64.
 *
 * NLA_F_NESTED: the encoders SET it on IPVS_CMD_ATTR_SERVICE / _DEST, as
 * ipvsadm does when built with libnl 3.7 (Debian 12; observed in the golden
 * vectors: nla_nest_start() sets the bit). The kernel parses IPVS attributes
 * with nla_parse_nested_deprecated() and masks the flag, so it accepts
 * either form. The kernel's own replies use nla_nest_start_noflag() (no bit);
 * the decoders accept both.
 *
 * Scope: non-fwmark services of either family (IPVS_SVC_ATTR_AF and
 * IPVS_DEST_ATTR_ADDR_FAMILY AF_INET or AF_INET6, taken from the address);
 * a real server has its virtual server's family (masquerade cannot cross
 * families). Firewall-mark services cannot be encoded; decoding one throws
 * {@link IpvsUnsupportedError}, so a dump reader can skip (and report)
 * entries it does not manage.
 *
 * Commands without a payload (IPVS_CMD_GET_INFO, IPVS_CMD_FLUSH, the
 * IPVS_CMD_GET_SERVICE dump) are sent with an empty payload.
 */
import { NetlinkDecodeError, NLA_F_NESTED, NLA_F_NET_BYTEORDER, NLA_TYPE_MASK, NLA_HDRLEN, nlaAlign, AttrWriter, type NlAttr, parseAttrs, indexAttrs, attrU16, attrBe16, attrU32, attrBe32, attrCounter, attrString, attrNested, readU16, readU32, writeU16, writeU32 } from '../netlink/nlattr.ts';
import { DroverError } from '../../errors.ts';
import { classifyIPv4, ipFromBytes, ipToBytes, parseIP } from '../../model/addr.ts';

/** The netlink attribute encoding lives in modes/shared/nlattr.ts; re-exported for the IPVS codec's users. */
export { NLA_F_NESTED, NLA_F_NET_BYTEORDER, NLA_TYPE_MASK, NLA_HDRLEN, nlaAlign, AttrWriter, type NlAttr, parseAttrs, indexAttrs, attrU16, attrBe16, attrU32, attrBe32, attrCounter, attrString, attrNested, readU16, readU32, writeU16, writeU32 };

// ---------------------------------------------------------------------------
// Constants, copied from <linux/ip_vs.h> (values are UAPI, never renumbered).
// test/unit/ipvs-codec.test.ts compares each with the header via golden.json.
// ---------------------------------------------------------------------------

/** Generic netlink family name (IPVS_GENL_NAME). */
export const IPVS_GENL_NAME = 'IPVS';
/** Generic netlink family version, sent in every genl header (IPVS_GENL_VERSION). */
export const IPVS_GENL_VERSION = 1;
/** IP_VS_VERSION_CODE of the header: 0x010201 = "1.2.1". */
export const IP_VS_VERSION_CODE = 0x010201;
/** Scheduler name buffer size, NUL included: names are at most 15 characters. */
export const IP_VS_SCHEDNAME_MAXLEN = 16;

/** Generic netlink commands (enum IPVS_CMD_*). */
export const IPVS_CMD = {
  UNSPEC: 0,
  NEW_SERVICE: 1,
  SET_SERVICE: 2,
  DEL_SERVICE: 3,
  GET_SERVICE: 4,
  NEW_DEST: 5,
  SET_DEST: 6,
  DEL_DEST: 7,
  GET_DEST: 8,
  NEW_DAEMON: 9,
  DEL_DAEMON: 10,
  GET_DAEMON: 11,
  SET_CONFIG: 12,
  GET_CONFIG: 13,
  /** Only used as the command of the GET_INFO reply. */
  SET_INFO: 14,
  GET_INFO: 15,
  ZERO: 16,
  FLUSH: 17,
} as const;

/** First-level attributes of every command (enum IPVS_CMD_ATTR_*). */
export const IPVS_CMD_ATTR = {
  SERVICE: 1,
  DEST: 2,
  DAEMON: 3,
  TIMEOUT_TCP: 4,
  TIMEOUT_TCP_FIN: 5,
  TIMEOUT_UDP: 6,
} as const;

/** Attributes inside IPVS_CMD_ATTR_SERVICE (enum IPVS_SVC_ATTR_*). */
export const IPVS_SVC_ATTR = {
  AF: 1,
  PROTOCOL: 2,
  ADDR: 3,
  PORT: 4,
  FWMARK: 5,
  SCHED_NAME: 6,
  FLAGS: 7,
  TIMEOUT: 8,
  NETMASK: 9,
  STATS: 10,
  PE_NAME: 11,
  STATS64: 12,
} as const;

/** Attributes inside IPVS_CMD_ATTR_DEST (enum IPVS_DEST_ATTR_*). */
export const IPVS_DEST_ATTR = {
  ADDR: 1,
  PORT: 2,
  FWD_METHOD: 3,
  WEIGHT: 4,
  U_THRESH: 5,
  L_THRESH: 6,
  ACTIVE_CONNS: 7,
  INACT_CONNS: 8,
  PERSIST_CONNS: 9,
  STATS: 10,
  ADDR_FAMILY: 11,
  STATS64: 12,
  TUN_TYPE: 13,
  TUN_PORT: 14,
  TUN_FLAGS: 15,
} as const;

/** Attributes inside IPVS_SVC_ATTR_STATS(64) / IPVS_DEST_ATTR_STATS(64) (enum IPVS_STATS_ATTR_*). */
export const IPVS_STATS_ATTR = {
  CONNS: 1,
  INPKTS: 2,
  OUTPKTS: 3,
  INBYTES: 4,
  OUTBYTES: 5,
  CPS: 6,
  INPPS: 7,
  OUTPPS: 8,
  INBPS: 9,
  OUTBPS: 10,
  /** Zero-length alignment filler (nla_put_u64_64bit on 32-bit kernels); skipped. */
  PAD: 11,
} as const;

/** Attributes of the GET_INFO reply (enum IPVS_INFO_ATTR_*). */
export const IPVS_INFO_ATTR = {
  VERSION: 1,
  CONN_TAB_SIZE: 2,
} as const;

/** Virtual service flags (IP_VS_SVC_F_*), in IPVS_SVC_ATTR_FLAGS. */
export const IP_VS_SVC_F = {
  PERSISTENT: 0x0001,
  /** Set by the kernel on every service it holds; seen in dumps only. */
  HASHED: 0x0002,
  ONEPACKET: 0x0004,
  SCHED1: 0x0008,
  SCHED2: 0x0010,
  SCHED3: 0x0020,
} as const;

/** Forwarding methods (IP_VS_CONN_F_*, the IP_VS_CONN_F_FWD_MASK bits), in IPVS_DEST_ATTR_FWD_METHOD. */
export const IP_VS_CONN_F = {
  FWD_MASK: 0x0007,
  MASQ: 0x0000,
  LOCALNODE: 0x0001,
  TUNNEL: 0x0002,
  DROUTE: 0x0003,
  BYPASS: 0x0004,
} as const;

/** Address families (<sys/socket.h>). */
export const AF_INET = 2;
export const AF_INET6 = 10;

/** IP protocol numbers (<netinet/in.h>) of the protocols drover serves. */
export const IPPROTO = { TCP: 6, UDP: 17, SCTP: 132 } as const;

// ---------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------

/** Transport protocol of a virtual server. */
export type IpvsProtocol = keyof typeof IPPROTO;

/**
 * Forwarding method of a real server: `masq` = NAT (what kube-proxy uses),
 * `local` = local node, `tunnel` = IP-in-IP (tunnel type IPIP; GUE/GRE are
 * not supported), `route` = direct routing.
 */
export type ForwardingMethod = 'masq' | 'local' | 'tunnel' | 'route';

/**
 * A non-fwmark IPVS virtual server (`ipvsadm -A -t|-u|--sctp-service`), IPv4 or IPv6.
 */
export interface VirtualServer {
  readonly protocol: IpvsProtocol;
  /** A dotted-quad IPv4 address, e.g. "10.96.0.10", or canonical IPv6 text, e.g. "fd00:10:96::a"; 0.0.0.0 and :: are rejected. */
  readonly address: string;
  /** 1-65535. */
  readonly port: number;
  /** Scheduler module name without the ip_vs_ prefix: 1-15 of [a-z], e.g. "rr". */
  readonly scheduler: string;
  /** Persistence (ClientIP session affinity): sets IP_VS_SVC_F_PERSISTENT. */
  readonly persistent?: {
    /** Seconds, 1-2678400 (31 days, ipvsadm's limit). */
    readonly timeoutSeconds: number;
  };
  /**
   * Persistence granularity. IPv4: a u32 mask, e.g. 0xffffff00 for /24,
   * contiguous masks only, default 0xffffffff as ipvsadm sends. IPv6: a
   * prefix length 1-128, default 128 (kube-proxy's value).
   */
  readonly netmask?: number;
}

/** What identifies a virtual server to the kernel (protocol, address, port). */
export type VirtualServerKey = Pick<VirtualServer, 'protocol' | 'address' | 'port'>;

/** A real server (destination) of a virtual server, of the virtual server's family. */
export interface RealServer {
  /** Dotted-quad IPv4 address or canonical IPv6 text; 0.0.0.0 and :: are rejected. */
  readonly address: string;
  /** 1-65535. */
  readonly port: number;
  /** 0-65535 (ipvsadm's range); 0 = quiesced: no new connections. */
  readonly weight: number;
  readonly forwarding: ForwardingMethod;
  /** Upper connection threshold, 0-2147483647, 0 = none (default 0). */
  readonly upperThreshold?: number;
  /** Lower connection threshold, 0-2147483647, at most upperThreshold (default 0). */
  readonly lowerThreshold?: number;
  /** Decoded only (ignored by the encoders): active connections. */
  readonly activeConns?: number;
  /** Decoded only: inactive connections. */
  readonly inactiveConns?: number;
  /** Decoded only: persistence templates pointing at this server. */
  readonly persistConns?: number;
}

/** What identifies a real server within its virtual server (address, port). */
export type RealServerKey = Pick<RealServer, 'address' | 'port'>;

/**
 * Traffic counters of a service or destination. Taken from the STATS64 nest
 * when present (Linux 4.14+), else from STATS. Values are converted with
 * Number(): exact up to 2^53.
 */
export interface IpvsStats {
  readonly conns: number;
  readonly inPkts: number;
  readonly outPkts: number;
  readonly inBytes: number;
  readonly outBytes: number;
  /** Rates, per second (estimator averages). */
  readonly cps: number;
  readonly inPps: number;
  readonly outPps: number;
  readonly inBps: number;
  readonly outBps: number;
}

/** A virtual server as read back from the kernel. */
export interface ServiceEntry extends VirtualServer {
  readonly netmask: number;
  /** Raw IP_VS_SVC_F_* flags (flags & mask), e.g. HASHED | PERSISTENT. */
  readonly flags: number;
  readonly stats?: IpvsStats;
}

/** A real server as read back from the kernel. */
export interface DestEntry extends RealServer {
  readonly upperThreshold: number;
  readonly lowerThreshold: number;
  readonly activeConns: number;
  readonly inactiveConns: number;
  readonly persistConns: number;
  readonly stats?: IpvsStats;
}

/** The GET_INFO reply. */
export interface IpvsInfo {
  /** IP_VS_VERSION_CODE of the running kernel, e.g. 0x010201. */
  readonly versionCode: number;
  /** The same as "major.minor.patch", e.g. "1.2.1". */
  readonly version: string;
  /** Size of the connection hash table (ip_vs_conn_tab_size; module parameter conn_tab_bits). */
  readonly connTabSize: number;
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/** An input to an encoder is not valid; nothing was encoded. */
export class IpvsValidationError extends DroverError {
  constructor(
    /** Field path, e.g. "realServer.weight". */
    override readonly field: string,
    /** What is wrong, e.g. "70000 is out of range 0-65535". */
    readonly detail: string,
  ) {
    super(`invalid IPVS ${field}: ${detail}`, { field });
    this.name = 'IpvsValidationError';
  }
}

/** A reply payload is malformed or lacks a mandatory attribute. */
export class IpvsDecodeError extends NetlinkDecodeError {
  constructor(message: string) {
    super(`IPVS reply: ${message}`);
    this.name = 'IpvsDecodeError';
  }
}

/** A well-formed reply entry that this codec does not model (fwmark service, an address family other than IPv4 and IPv6, unknown protocol). */
export class IpvsUnsupportedError extends IpvsDecodeError {
  constructor(message: string) {
    super(message);
    this.name = 'IpvsUnsupportedError';
  }
}

// ---------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------

/** ipvsadm's limit for -p (persistent timeout): 31 days. */
export const MAX_PERSISTENT_TIMEOUT_SECONDS = 86400 * 31;
/** ipvsadm's limit for -w. */
export const MAX_WEIGHT = 65535;
/** ipvsadm's limit for -x / -y (INT_MAX). */
export const MAX_THRESHOLD = 0x7fffffff;

const PROTOCOLS: ReadonlySet<string> = new Set(Object.keys(IPPROTO));
const FORWARDING: Readonly<Record<ForwardingMethod, number>> = {
  masq: IP_VS_CONN_F.MASQ,
  local: IP_VS_CONN_F.LOCALNODE,
  tunnel: IP_VS_CONN_F.TUNNEL,
  route: IP_VS_CONN_F.DROUTE,
};

/**
 * Parse a dotted-quad IPv4 address into its 4 network-order bytes. Strict
 * (addr.ts `parseIP`): four decimal octets 0-255 without leading zeros (so
 * "010.0.0.1", which inet_aton would read as octal, is refused).
 * @throws IpvsValidationError naming `field`.
 */
export function parseIPv4(text: unknown, field: string): Buffer {
  if (typeof text === 'string' && classifyIPv4(text) === 'out-of-range') throw new IpvsValidationError(field, `${text} has an octet above 255`);
  const ip = typeof text === 'string' ? parseIP(text) : undefined;
  if (ip?.family !== 4) throw new IpvsValidationError(field, `${JSON.stringify(text)} is not a dotted-quad IPv4 address`);
  if (ip.value === 0n) throw new IpvsValidationError(field, '0.0.0.0 is not a usable address');
  return ipToBytes(ip);
}

/** An address as the codec sends it: its family and its 4 or 16 network-order bytes. */
export interface AddressBytes {
  /** AF_INET or AF_INET6. */
  readonly af: number;
  readonly bytes: Buffer;
}

/**
 * Parse an IPv4 address ({@link parseIPv4}) or a canonical IPv6 one
 * (RFC 5952, as addr.ts `parseIP` prints it: "fd00::a", not "FD00:0::A";
 * so that the text is the kernel's read-back, the identity drover compares).
 * @throws IpvsValidationError naming `field`, also for :: and 0.0.0.0.
 */
export function parseIPAddress(text: unknown, field: string): AddressBytes {
  if (typeof text === 'string' && text.includes(':')) {
    const ip = parseIP(text);
    if (ip?.family !== 6) throw new IpvsValidationError(field, `${JSON.stringify(text)} is not an IPv6 address`);
    if (ip.text !== text) throw new IpvsValidationError(field, `${JSON.stringify(text)} is not in canonical form (${ip.text})`);
    if (ip.value === 0n) throw new IpvsValidationError(field, ':: is not a usable address');
    return { af: AF_INET6, bytes: ipToBytes(ip) };
  }
  return { af: AF_INET, bytes: parseIPv4(text, field) };
}

function checkInt(value: unknown, min: number, max: number, field: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new IpvsValidationError(field, `${String(value)} is not an integer`);
  }
  if (value < min || value > max) throw new IpvsValidationError(field, `${value} is out of range ${min}-${max}`);
  return value;
}

function checkProtocol(p: unknown, field: string): IpvsProtocol {
  if (typeof p !== 'string' || !PROTOCOLS.has(p)) {
    throw new IpvsValidationError(field, `${JSON.stringify(p)} is not one of TCP, UDP, SCTP`);
  }
  return p as IpvsProtocol;
}

function checkScheduler(s: unknown, field: string): string {
  if (typeof s !== 'string' || !/^[a-z]+$/.test(s) || s.length >= IP_VS_SCHEDNAME_MAXLEN) {
    throw new IpvsValidationError(field, `${JSON.stringify(s)} is not a scheduler name (1-${IP_VS_SCHEDNAME_MAXLEN - 1} of a-z)`);
  }
  return s;
}

function checkNetmask(m: unknown, field: string): number {
  const v = checkInt(m, 0, 0xffffffff, field);
  // Contiguous: the complement plus one is a power of two (or the mask is all ones).
  const inv = ~v >>> 0;
  if ((inv & (inv + 1)) !== 0) {
    throw new IpvsValidationError(field, `0x${v.toString(16)} is not a contiguous netmask`);
  }
  return v;
}

function need(obj: unknown, field: string): Record<string, unknown> {
  if (typeof obj !== 'object' || obj === null) throw new IpvsValidationError(field, 'is missing');
  return obj as Record<string, unknown>;
}

interface DestKeyBytes {
  /** AF_INET or AF_INET6. */
  readonly af: number;
  readonly addr: Buffer;
  readonly port: number;
}

/** The checked address and port of a virtual or real server (`field.address`, `field.port`). */
function destKey(o: unknown, field: string): DestKeyBytes {
  const r = need(o, field);
  const { af, bytes } = parseIPAddress(r.address, `${field}.address`);
  return { af, addr: bytes, port: checkInt(r.port, 1, 65535, `${field}.port`) };
}

/**
 * A real server's key, of its virtual server's family.
 * @throws IpvsValidationError for another family.
 */
function destKeyOf(service: DestKeyBytes, rs: unknown, field: string): DestKeyBytes {
  const d = destKey(rs, field);
  if (d.af !== service.af) throw new IpvsValidationError(`${field}.address`, `${JSON.stringify((rs as Record<string, unknown>).address)} is not of the virtual server's address family`);
  return d;
}

interface ServiceKeyBytes extends DestKeyBytes {
  readonly protocol: number;
}

function serviceKey(vs: unknown, field: string): ServiceKeyBytes {
  const o = need(vs, field);
  return { protocol: IPPROTO[checkProtocol(o.protocol, `${field}.protocol`)], ...destKey(o, field) };
}

interface ServiceFull extends ServiceKeyBytes {
  readonly scheduler: string;
  readonly flags: number;
  readonly timeout: number;
  readonly netmask: number;
}

function serviceFull(vs: unknown, field: string): ServiceFull {
  const key = serviceKey(vs, field);
  const o = vs as Record<string, unknown>;
  const scheduler = checkScheduler(o.scheduler, `${field}.scheduler`);
  let flags = 0;
  let timeout = 0;
  if (o.persistent !== undefined) {
    const p = need(o.persistent, `${field}.persistent`);
    timeout = checkInt(p.timeoutSeconds, 1, MAX_PERSISTENT_TIMEOUT_SECONDS, `${field}.persistent.timeoutSeconds`);
    flags |= IP_VS_SVC_F.PERSISTENT;
  }
  let netmask: number;
  if (key.af === AF_INET6) netmask = o.netmask === undefined ? 128 : checkInt(o.netmask, 1, 128, `${field}.netmask`);
  else netmask = o.netmask === undefined ? 0xffffffff : checkNetmask(o.netmask, `${field}.netmask`);
  return { ...key, scheduler, flags, timeout, netmask };
}

interface DestFull extends DestKeyBytes {
  readonly fwd: number;
  readonly weight: number;
  readonly upper: number;
  readonly lower: number;
}

function destFull(rs: unknown, field: string): DestFull {
  const key = destKey(rs, field);
  const o = rs as Record<string, unknown>;
  const fwdName = o.forwarding;
  if (typeof fwdName !== 'string' || !Object.hasOwn(FORWARDING, fwdName)) {
    throw new IpvsValidationError(`${field}.forwarding`, `${JSON.stringify(fwdName)} is not one of ${Object.keys(FORWARDING).join(', ')}`);
  }
  const weight = checkInt(o.weight, 0, MAX_WEIGHT, `${field}.weight`);
  const upper = o.upperThreshold === undefined ? 0 : checkInt(o.upperThreshold, 0, MAX_THRESHOLD, `${field}.upperThreshold`);
  const lower = o.lowerThreshold === undefined ? 0 : checkInt(o.lowerThreshold, 0, MAX_THRESHOLD, `${field}.lowerThreshold`);
  // ip_vs_add_dest / ip_vs_edit_dest refuse l_threshold > u_threshold with ERANGE (even when u is 0).
  if (lower > upper) {
    throw new IpvsValidationError(`${field}.lowerThreshold`, `${lower} is above upperThreshold ${upper}`);
  }
  return { ...key, fwd: FORWARDING[fwdName as ForwardingMethod], weight, upper, lower };
}

/**
 * Validate a virtual server (all fields, as for NEW_SERVICE).
 * @throws IpvsValidationError naming the first bad field.
 */
export function validateVirtualServer(vs: VirtualServer): void {
  serviceFull(vs, 'virtualServer');
}

/**
 * Validate a real server (all fields, as for NEW_DEST).
 * @throws IpvsValidationError naming the first bad field.
 */
export function validateRealServer(rs: RealServer): void {
  destFull(rs, 'realServer');
}

// ---------------------------------------------------------------------------
// Encoders (attribute payloads)
// ---------------------------------------------------------------------------

/** The 16-byte union nf_inet_addr holding an address: IPv4 in its first 4 bytes, IPv6 in all 16. */
function nfInetAddr(addr: Buffer): Buffer {
  const b = Buffer.alloc(16);
  addr.copy(b, 0);
  return b;
}

/** Service identity, in ipvsadm's order (libipvs ipvs_nl_fill_service_attr / ipvs_get_dests). */
function putServiceKey(w: AttrWriter, k: ServiceKeyBytes): void {
  w.u16(IPVS_SVC_ATTR.AF, k.af)
    .u16(IPVS_SVC_ATTR.PROTOCOL, k.protocol)
    .put(IPVS_SVC_ATTR.ADDR, nfInetAddr(k.addr))
    .be16(IPVS_SVC_ATTR.PORT, k.port);
}

function encodeServiceFull(vs: VirtualServer): Buffer {
  const s = serviceFull(vs, 'virtualServer');
  const flags = Buffer.alloc(8); // struct ip_vs_flags { __u32 flags; __u32 mask; }
  writeU32(flags, 0, s.flags);
  writeU32(flags, 4, 0xffffffff); // mask ~0, as ipvsadm: the kernel takes every flag bit from us
  return new AttrWriter()
    .nest(IPVS_CMD_ATTR.SERVICE, (w) => {
      putServiceKey(w, s);
      w.string(IPVS_SVC_ATTR.SCHED_NAME, s.scheduler)
        .put(IPVS_SVC_ATTR.FLAGS, flags)
        .u32(IPVS_SVC_ATTR.TIMEOUT, s.timeout);
      // IPv6: the prefix length, host-endian (see the module comment).
      if (s.af === AF_INET6) w.u32(IPVS_SVC_ATTR.NETMASK, s.netmask);
      else w.be32(IPVS_SVC_ATTR.NETMASK, s.netmask);
    })
    .toBuffer();
}

function encodeServiceKeyOnly(key: VirtualServerKey): Buffer {
  const k = serviceKey(key, 'virtualServer');
  return new AttrWriter().nest(IPVS_CMD_ATTR.SERVICE, (w) => putServiceKey(w, k)).toBuffer();
}

/**
 * IPVS_CMD_NEW_SERVICE payload: the full service nest (AF, PROTOCOL, ADDR,
 * PORT, SCHED_NAME, FLAGS {flags, mask ~0}, TIMEOUT, NETMASK), byte-identical
 * to ipvsadm's. The kernel answers EEXIST if the service exists and ENOENT if
 * the scheduler module cannot be loaded.
 * @throws IpvsValidationError
 */
export function encodeNewService(vs: VirtualServer): Buffer {
  return encodeServiceFull(vs);
}

/**
 * IPVS_CMD_SET_SERVICE payload: same as NEW_SERVICE. The kernel replaces
 * scheduler, flags, timeout and netmask; ESRCH if there is no such service.
 * @throws IpvsValidationError
 */
export function encodeSetService(vs: VirtualServer): Buffer {
  return encodeServiceFull(vs);
}

/**
 * IPVS_CMD_DEL_SERVICE payload: the identifying attributes only (AF,
 * PROTOCOL, ADDR, PORT), which is all ip_vs_genl_parse_service reads for a
 * delete (ipvsadm sends the full entry; the extra attributes are ignored).
 * @throws IpvsValidationError
 */
export function encodeDelService(key: VirtualServerKey): Buffer {
  return encodeServiceKeyOnly(key);
}

/**
 * IPVS_CMD_GET_SERVICE (non-dump) payload: the service key. The reply is one
 * message decoded by {@link decodeService}; ESRCH if absent.
 * @throws IpvsValidationError
 */
export function encodeGetService(key: VirtualServerKey): Buffer {
  return encodeServiceKeyOnly(key);
}

/**
 * IPVS_CMD_GET_DEST dump request payload: the service key as the filter
 * (byte-identical to ipvsadm's ipvs_get_dests). The kernel answers an unknown
 * service with an empty dump, not an error.
 * @throws IpvsValidationError
 */
export function encodeGetDests(key: VirtualServerKey): Buffer {
  return encodeServiceKeyOnly(key);
}

function encodeDestFull(vs: VirtualServerKey, rs: RealServer): Buffer {
  const k = serviceKey(vs, 'virtualServer');
  destKeyOf(k, rs, 'realServer');
  const d = destFull(rs, 'realServer');
  return new AttrWriter()
    .nest(IPVS_CMD_ATTR.SERVICE, (w) => putServiceKey(w, k))
    .nest(IPVS_CMD_ATTR.DEST, (w) => {
      // ipvsadm 1.28+ libipvs ipvs_nl_fill_dest_attr order.
      w.u16(IPVS_DEST_ATTR.ADDR_FAMILY, d.af)
        .put(IPVS_DEST_ATTR.ADDR, nfInetAddr(d.addr))
        .be16(IPVS_DEST_ATTR.PORT, d.port)
        .u32(IPVS_DEST_ATTR.FWD_METHOD, d.fwd)
        .u32(IPVS_DEST_ATTR.WEIGHT, d.weight)
        .u32(IPVS_DEST_ATTR.U_THRESH, d.upper)
        .u32(IPVS_DEST_ATTR.L_THRESH, d.lower);
    })
    .toBuffer();
}

/**
 * IPVS_CMD_NEW_DEST payload: service key nest, then the full destination
 * nest (ADDR_FAMILY, ADDR, PORT, FWD_METHOD, WEIGHT, U_THRESH, L_THRESH).
 * Only the key of `vs` is used (the kernel reads nothing else of the service
 * for destination commands; ipvsadm sends the full entry). `activeConns` and
 * the other decoded-only fields of `rs` are ignored.
 * Kernel errors: ESRCH no such service, EEXIST destination exists.
 * @throws IpvsValidationError
 */
export function encodeNewDest(vs: VirtualServerKey, rs: RealServer): Buffer {
  return encodeDestFull(vs, rs);
}

/**
 * IPVS_CMD_SET_DEST payload: same as NEW_DEST (weight 0 quiesces a server).
 * Kernel errors: ESRCH no such service, ENOENT no such destination.
 * @throws IpvsValidationError
 */
export function encodeSetDest(vs: VirtualServerKey, rs: RealServer): Buffer {
  return encodeDestFull(vs, rs);
}

/**
 * IPVS_CMD_DEL_DEST payload: service key nest and destination key nest
 * (ADDR_FAMILY, ADDR, PORT), all ip_vs_genl_parse_dest reads for a delete.
 * Kernel errors: ESRCH no such service, ENOENT no such destination.
 * @throws IpvsValidationError
 */
export function encodeDelDest(vs: VirtualServerKey, rs: RealServerKey): Buffer {
  const k = serviceKey(vs, 'virtualServer');
  const d = destKeyOf(k, rs, 'realServer');
  return new AttrWriter()
    .nest(IPVS_CMD_ATTR.SERVICE, (w) => putServiceKey(w, k))
    .nest(IPVS_CMD_ATTR.DEST, (w) => {
      w.u16(IPVS_DEST_ATTR.ADDR_FAMILY, d.af)
        .put(IPVS_DEST_ATTR.ADDR, nfInetAddr(d.addr))
        .be16(IPVS_DEST_ATTR.PORT, d.port);
    })
    .toBuffer();
}

// ---------------------------------------------------------------------------
// Decoders (reply payloads)
// ---------------------------------------------------------------------------

const PROTOCOL_BY_NUMBER = new Map<number, IpvsProtocol>(
  (Object.entries(IPPROTO) as [IpvsProtocol, number][]).map(([name, n]) => [n, name]),
);
const FORWARDING_BY_NUMBER = new Map<number, ForwardingMethod>(
  (Object.entries(FORWARDING) as [ForwardingMethod, number][]).map(([name, n]) => [n, name]),
);

function topLevel(payload: Uint8Array, type: number, what: string): Map<number, NlAttr> {
  const a = indexAttrs(parseAttrs(payload)).get(type);
  if (!a) throw new IpvsDecodeError(`no ${what} attribute`);
  return indexAttrs(attrNested(a));
}

function required(m: Map<number, NlAttr>, type: number, what: string): NlAttr {
  const a = m.get(type);
  if (!a) throw new IpvsDecodeError(`missing ${what}`);
  return a;
}

/** The address of family `af` (AF_INET or AF_INET6) in an nf_inet_addr attribute, as text. */
function addressFromNfInetAddr(a: NlAttr, af: number, what: string): string {
  const need = af === AF_INET6 ? 16 : 4;
  if (a.data.length < need || a.data.length > 16) {
    throw new IpvsDecodeError(`${what}: expected a 16-byte nf_inet_addr, got ${a.data.length} bytes`);
  }
  return ipFromBytes(a.data.subarray(0, need)).text;
}

/**
 * Run an IPVS decoder: an attribute-level NetlinkDecodeError (nlattr.ts)
 * becomes an IpvsDecodeError, so that every malformed IPVS reply is one.
 */
function ipvsReply<T>(decode: () => T): T {
  try {
    return decode();
  } catch (err) {
    if (err instanceof NetlinkDecodeError && !(err instanceof IpvsDecodeError)) throw new IpvsDecodeError(err.message);
    throw err;
  }
}

/**
 * Decode a stats nest (IPVS_*_ATTR_STATS or STATS64). Counters may be u32 or
 * u64; PAD and unknown attributes are skipped; a missing counter reads 0.
 * @throws IpvsDecodeError
 */
export function decodeStats(a: NlAttr): IpvsStats {
  return ipvsReply(() => decodeStatsAttrs(a));
}

function decodeStatsAttrs(a: NlAttr): IpvsStats {
  const m = indexAttrs(attrNested(a));
  const c = (type: number, name: string): number => {
    const x = m.get(type);
    return x ? attrCounter(x, `stats ${name}`) : 0;
  };
  return {
    conns: c(IPVS_STATS_ATTR.CONNS, 'conns'),
    inPkts: c(IPVS_STATS_ATTR.INPKTS, 'inpkts'),
    outPkts: c(IPVS_STATS_ATTR.OUTPKTS, 'outpkts'),
    inBytes: c(IPVS_STATS_ATTR.INBYTES, 'inbytes'),
    outBytes: c(IPVS_STATS_ATTR.OUTBYTES, 'outbytes'),
    cps: c(IPVS_STATS_ATTR.CPS, 'cps'),
    inPps: c(IPVS_STATS_ATTR.INPPS, 'inpps'),
    outPps: c(IPVS_STATS_ATTR.OUTPPS, 'outpps'),
    inBps: c(IPVS_STATS_ATTR.INBPS, 'inbps'),
    outBps: c(IPVS_STATS_ATTR.OUTBPS, 'outbps'),
  };
}

function statsOf(m: Map<number, NlAttr>, t64: number, t32: number): IpvsStats | undefined {
  const a = m.get(t64) ?? m.get(t32);
  return a ? decodeStats(a) : undefined;
}

/**
 * Decode one service: the payload of a GET_SERVICE reply or of one message of
 * its dump (kernel ip_vs_genl_fill_service; reply command NEW_SERVICE).
 * Requires AF, PROTOCOL, ADDR, PORT, SCHED_NAME, FLAGS, TIMEOUT, NETMASK, as
 * ipvsadm's parser does; STATS are optional; unknown attributes are ignored.
 * `persistent` is set when IP_VS_SVC_F_PERSISTENT is.
 * @throws IpvsUnsupportedError for a fwmark service, a service of another
 *   family than IPv4 and IPv6, or an unknown protocol; IpvsDecodeError for a malformed payload.
 */
export function decodeService(payload: Uint8Array): ServiceEntry {
  return ipvsReply(() => decodeServiceAttrs(payload));
}

function decodeServiceAttrs(payload: Uint8Array): ServiceEntry {
  const m = topLevel(payload, IPVS_CMD_ATTR.SERVICE, 'IPVS_CMD_ATTR_SERVICE');
  const af = attrU16(required(m, IPVS_SVC_ATTR.AF, 'IPVS_SVC_ATTR_AF'), 'service AF');
  const fwmark = m.get(IPVS_SVC_ATTR.FWMARK);
  if (fwmark) throw new IpvsUnsupportedError(`firewall-mark service ${attrU32(fwmark, 'service FWMARK')} (af ${af}) is not supported`);
  if (af !== AF_INET && af !== AF_INET6) throw new IpvsUnsupportedError(`service of address family ${af} is not supported (IPv4 and IPv6 only)`);
  const protoNum = attrU16(required(m, IPVS_SVC_ATTR.PROTOCOL, 'IPVS_SVC_ATTR_PROTOCOL'), 'service PROTOCOL');
  const address = addressFromNfInetAddr(required(m, IPVS_SVC_ATTR.ADDR, 'IPVS_SVC_ATTR_ADDR'), af, 'service ADDR');
  const port = attrBe16(required(m, IPVS_SVC_ATTR.PORT, 'IPVS_SVC_ATTR_PORT'), 'service PORT');
  const protocol = PROTOCOL_BY_NUMBER.get(protoNum);
  if (!protocol) throw new IpvsUnsupportedError(`service ${address}:${port} has unsupported protocol ${protoNum}`);
  const scheduler = attrString(required(m, IPVS_SVC_ATTR.SCHED_NAME, 'IPVS_SVC_ATTR_SCHED_NAME'), 'service SCHED_NAME');
  const flagsAttr = required(m, IPVS_SVC_ATTR.FLAGS, 'IPVS_SVC_ATTR_FLAGS');
  if (flagsAttr.data.length !== 8) throw new IpvsDecodeError(`service FLAGS: expected 8 bytes, got ${flagsAttr.data.length}`);
  const flags = (readU32(flagsAttr.data, 0) & readU32(flagsAttr.data, 4)) >>> 0;
  const timeout = attrU32(required(m, IPVS_SVC_ATTR.TIMEOUT, 'IPVS_SVC_ATTR_TIMEOUT'), 'service TIMEOUT');
  const netmaskAttr = required(m, IPVS_SVC_ATTR.NETMASK, 'IPVS_SVC_ATTR_NETMASK');
  // IPv6: the prefix length, host-endian (see the module comment).
  const netmask = af === AF_INET6 ? attrU32(netmaskAttr, 'service NETMASK') : attrBe32(netmaskAttr, 'service NETMASK');
  const stats = statsOf(m, IPVS_SVC_ATTR.STATS64, IPVS_SVC_ATTR.STATS);
  return {
    protocol,
    address,
    port,
    scheduler,
    ...((flags & IP_VS_SVC_F.PERSISTENT) !== 0 ? { persistent: { timeoutSeconds: timeout } } : {}),
    netmask,
    flags,
    ...(stats ? { stats } : {}),
  };
}

/**
 * Decode one destination: the payload of one GET_DEST dump message (kernel
 * ip_vs_genl_fill_dest; reply command NEW_DEST). Requires ADDR, PORT,
 * FWD_METHOD, WEIGHT, U_THRESH, L_THRESH, ACTIVE_CONNS, INACT_CONNS,
 * PERSIST_CONNS, as ipvsadm's parser does. ADDR_FAMILY is sent by Linux
 * 4.2 and later only (ip_vs_genl_fill_dest); without it the destination is
 * of its virtual server's family, as it must be before 4.2 (no mixed
 * families): `serviceFamily`, which the caller knows from the service it
 * dumped. Tunnel attributes and unknown attributes are ignored.
 * @param payload one GET_DEST dump message's payload
 * @param serviceFamily AF_INET or AF_INET6: the family of the virtual server whose destinations were dumped (default AF_INET)
 * @throws IpvsUnsupportedError for a destination of another family than IPv4 and IPv6, or an unknown
 *   forwarding method; IpvsDecodeError for a malformed payload.
 */
export function decodeDest(payload: Uint8Array, serviceFamily: number = AF_INET): DestEntry {
  return ipvsReply(() => decodeDestAttrs(payload, serviceFamily));
}

function decodeDestAttrs(payload: Uint8Array, serviceFamily: number): DestEntry {
  const m = topLevel(payload, IPVS_CMD_ATTR.DEST, 'IPVS_CMD_ATTR_DEST');
  const afAttr = m.get(IPVS_DEST_ATTR.ADDR_FAMILY);
  const af = afAttr ? attrU16(afAttr, 'dest ADDR_FAMILY') : serviceFamily;
  if (af !== AF_INET && af !== AF_INET6) throw new IpvsUnsupportedError(`destination of address family ${af} is not supported (IPv4 and IPv6 only)`);
  const address = addressFromNfInetAddr(required(m, IPVS_DEST_ATTR.ADDR, 'IPVS_DEST_ATTR_ADDR'), af, 'dest ADDR');
  const port = attrBe16(required(m, IPVS_DEST_ATTR.PORT, 'IPVS_DEST_ATTR_PORT'), 'dest PORT');
  const fwdNum = attrU32(required(m, IPVS_DEST_ATTR.FWD_METHOD, 'IPVS_DEST_ATTR_FWD_METHOD'), 'dest FWD_METHOD') & IP_VS_CONN_F.FWD_MASK;
  const forwarding = FORWARDING_BY_NUMBER.get(fwdNum);
  if (!forwarding) throw new IpvsUnsupportedError(`destination ${address}:${port} has unsupported forwarding method ${fwdNum}`);
  const u32 = (type: number, name: string): number => attrU32(required(m, type, `IPVS_DEST_ATTR_${name}`), `dest ${name}`);
  const stats = statsOf(m, IPVS_DEST_ATTR.STATS64, IPVS_DEST_ATTR.STATS);
  return {
    address,
    port,
    weight: u32(IPVS_DEST_ATTR.WEIGHT, 'WEIGHT'),
    forwarding,
    upperThreshold: u32(IPVS_DEST_ATTR.U_THRESH, 'U_THRESH'),
    lowerThreshold: u32(IPVS_DEST_ATTR.L_THRESH, 'L_THRESH'),
    activeConns: u32(IPVS_DEST_ATTR.ACTIVE_CONNS, 'ACTIVE_CONNS'),
    inactiveConns: u32(IPVS_DEST_ATTR.INACT_CONNS, 'INACT_CONNS'),
    persistConns: u32(IPVS_DEST_ATTR.PERSIST_CONNS, 'PERSIST_CONNS'),
    ...(stats ? { stats } : {}),
  };
}

/**
 * Decode the GET_INFO reply (kernel ip_vs_genl_get_cmd; reply command
 * SET_INFO): IPVS_INFO_ATTR_VERSION and IPVS_INFO_ATTR_CONN_TAB_SIZE, both
 * u32, both required.
 * @throws IpvsDecodeError
 */
export function decodeInfo(payload: Uint8Array): IpvsInfo {
  return ipvsReply(() => decodeInfoAttrs(payload));
}

function decodeInfoAttrs(payload: Uint8Array): IpvsInfo {
  const m = indexAttrs(parseAttrs(payload));
  const versionCode = attrU32(required(m, IPVS_INFO_ATTR.VERSION, 'IPVS_INFO_ATTR_VERSION'), 'info VERSION');
  const connTabSize = attrU32(required(m, IPVS_INFO_ATTR.CONN_TAB_SIZE, 'IPVS_INFO_ATTR_CONN_TAB_SIZE'), 'info CONN_TAB_SIZE');
  return {
    versionCode,
    version: `${(versionCode >> 16) & 0xff}.${(versionCode >> 8) & 0xff}.${versionCode & 0xff}`,
    connTabSize,
  };
}
