/**
 * The ClientIP affinity record rule of the IPv6 table, as nf_tables
 * expressions written over netlink (netlink/rule-codec.ts), because nft
 * 1.0.6 cannot compile it.
 *
 * The rule (layout.ts affinityRecordRules) is, in nft's words,
 *
 *   ct state new ct status dnat meta l4proto tcp
 *   ct original ip6 daddr . meta l4proto . ct original proto-dst @affinity-T
 *   update @affinity { ip6 saddr . ct original ip6 daddr . meta l4proto
 *                      . ct original proto-dst timeout Ts : ip6 daddr . th dport }
 *
 * nft 1.0.6 aborts on it ("netlink_gen_expr: Assertion `dreg < ctx->reg_low'
 * failed"): for a map update it reserves one 16-byte register for the key
 * and one for the value whatever their size (netlink_gen_map_stmt asks
 * get_register for the key's set element, not for its concatenation), so
 * no field may start 16 bytes or more into either. The IPv4 key (16 bytes)
 * and value (8) fit; the IPv6 ones (40 and 20) do not. The kernel has no
 * such limit: its sixteen 4-byte registers (NFT_REG32_00..15,
 * <linux/netfilter/nf_tables.h>) hold the 40-byte key and the 20-byte
 * value side by side, and nft lists the rule it cannot write as the text
 * above (`meta l4proto tcp` then implied by `tcp dport`).
 *
 * Register layout (each field padded to 4 bytes, as nft concatenations
 * are): the lookup key `ct original daddr . l4proto . ct original
 * proto-dst` from NFT_REG32_00; the map key `saddr . ct original daddr .
 * l4proto . ct original proto-dst` from NFT_REG32_00 (IPv6: registers 0-9,
 * IPv4: 0-3); the value `daddr . dport` right after it (IPv6: 10-14, IPv4:
 * 4-5). `ct state` and `ct status` are host-endian u32 bitmasks (nft's
 * IP_CT_NEW bit 8 as `ct state new`, IPS_DST_NAT 0x20 as `ct status dnat`);
 * a protocol number is one byte.
 */
import { endianness } from 'node:os';
import type { IPFamily } from '../../model/types.ts';
import { AFFINITY_MAP, affinitySetName } from './layout.ts';
import { UnsafeElementError, type NftProtocol } from './elements.ts';
import { IP_CT_DIR_ORIGINAL, NFT_CT, NFT_META, NFT_PAYLOAD, NFT_REG } from '../../kernel/nftables/constants.ts';
import type { RuleExpr } from '../../kernel/nftables/rule-codec.ts';

/** IANA protocol numbers (/etc/protocols). */
const PROTOCOL_NUMBERS: Readonly<Record<NftProtocol, number>> = { tcp: 6, udp: 17, sctp: 132 };

/** `ct state new` (NF_CT_STATE_BIT(IP_CT_NEW) = 8) and `ct status dnat` (IPS_DST_NAT = 0x20), as host-endian u32. */
const CT_STATE_NEW = 0x8;
const IPS_DST_NAT = 0x20;

function hostU32(v: number): Uint8Array {
  const b = Buffer.alloc(4);
  if (endianness() === 'LE') b.writeUInt32LE(v, 0);
  else b.writeUInt32BE(v, 0);
  return b;
}

/** The 4-byte register `n` (0-15): NFT_REG32_00 + n. */
const reg32 = (n: number): number => NFT_REG.R32_00 + n;

/**
 * The expressions of the rule that records a client's endpoint for the
 * frontends of protocol `proto` with ClientIP affinity of `seconds` (set
 * affinity-`seconds`), in the table of `family` (see the module comment).
 * @throws UnsafeElementError for a timeout that is not 1-86400 s or an unknown protocol.
 */
export function affinityRecordExprs(family: IPFamily, proto: NftProtocol, seconds: number): RuleExpr[] {
  const set = affinitySetName(seconds);
  const number = PROTOCOL_NUMBERS[proto];
  if (number === undefined) throw new UnsafeElementError('protocol', String(proto));
  const v6 = family === 'IPv6';
  const addrBytes = v6 ? 16 : 4;
  const addrRegs = addrBytes / 4;
  const daddrKey = v6 ? NFT_CT.DST_IP6 : NFT_CT.DST_IP;
  // Source and destination address in the IPv6 header (8, 24) and the IPv4 one (12, 16); the destination port at 2 of the transport header.
  const [saddrAt, daddrAt] = v6 ? [8, 24] : [12, 16];
  const key = 0;
  const value = 2 * addrRegs + 2;
  return [
    { kind: 'ct', key: NFT_CT.STATE, dreg: NFT_REG.R1 },
    { kind: 'bitwise', reg: NFT_REG.R1, mask: hostU32(CT_STATE_NEW) },
    { kind: 'cmp', reg: NFT_REG.R1, op: 'neq', data: hostU32(0) },
    { kind: 'ct', key: NFT_CT.STATUS, dreg: NFT_REG.R1 },
    { kind: 'bitwise', reg: NFT_REG.R1, mask: hostU32(IPS_DST_NAT) },
    { kind: 'cmp', reg: NFT_REG.R1, op: 'neq', data: hostU32(0) },
    { kind: 'meta', key: NFT_META.L4PROTO, dreg: NFT_REG.R1 },
    { kind: 'cmp', reg: NFT_REG.R1, op: 'eq', data: Uint8Array.of(number) },
    // The frontend, as conntrack has the connection's original destination: in set affinity-T?
    { kind: 'ct', key: daddrKey, dreg: reg32(0), dir: IP_CT_DIR_ORIGINAL },
    { kind: 'meta', key: NFT_META.L4PROTO, dreg: reg32(addrRegs) },
    { kind: 'ct', key: NFT_CT.PROTO_DST, dreg: reg32(addrRegs + 1), dir: IP_CT_DIR_ORIGINAL },
    { kind: 'lookup', set, sreg: reg32(0) },
    // Key: client . frontend.
    { kind: 'payload', base: NFT_PAYLOAD.NETWORK_HEADER, offset: saddrAt, len: addrBytes, dreg: reg32(key) },
    { kind: 'ct', key: daddrKey, dreg: reg32(key + addrRegs), dir: IP_CT_DIR_ORIGINAL },
    { kind: 'meta', key: NFT_META.L4PROTO, dreg: reg32(key + 2 * addrRegs) },
    { kind: 'ct', key: NFT_CT.PROTO_DST, dreg: reg32(key + 2 * addrRegs + 1), dir: IP_CT_DIR_ORIGINAL },
    // Value: the endpoint the DNAT chose (the packet's destination by now).
    { kind: 'payload', base: NFT_PAYLOAD.NETWORK_HEADER, offset: daddrAt, len: addrBytes, dreg: reg32(value) },
    { kind: 'payload', base: NFT_PAYLOAD.TRANSPORT_HEADER, offset: 2, len: 2, dreg: reg32(value + addrRegs) },
    { kind: 'dynset', set: AFFINITY_MAP, sregKey: reg32(key), sregData: reg32(value), timeoutMs: seconds * 1000 },
  ];
}
