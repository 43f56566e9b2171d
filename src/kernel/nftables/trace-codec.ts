/**
 * nf_tables trace events (NFT_MSG_TRACE, sent to the NFNLGRP_NFTRACE
 * multicast group for a packet with `meta nftrace` set): the decoder. Pure.
 *
 * What the kernel sends (net/netfilter/nf_tables_trace.c nft_trace_notify,
 * called from nf_tables_core.c nft_do_chain; checked against the events of
 * Linux 6.18 in test/fixtures/nftables/trace-*.hex):
 * - one event per rule that matched completely (NFT_TRACETYPE_RULE), with
 *   its verdict: `continue` for a rule of statements only, else the rule's
 *   verdict (a `dnat` or `masquerade` statement ends with NF_ACCEPT, a
 *   `reject` with NF_DROP); a rule whose match fails sends none;
 * - one event when a base chain ends without a verdict
 *   (NFT_TRACETYPE_POLICY, with its policy), and NFT_TRACETYPE_RETURN
 *   events for returns from chains;
 * - RULE events without a rule handle, with verdict `continue`, where a
 *   chain's run starts or resumes without a rule deciding (nft(8) monitor
 *   prints no rule for them, only the packet they may carry);
 * - the first event of each base chain's run carries the packet's network
 *   and transport headers as they are at that hook (so a DNAT before it
 *   shows in the destination), and every event the trace id, which is the
 *   same for every event of one packet (a later packet may get the same id
 *   again: the id hashes the skb's address).
 * Every integer attribute is big-endian (nla_put_be32 / nla_put_be64).
 */
import { ipFromBytes } from '../../model/addr.ts';
import { attrNested, attrString, indexAttrs, parseAttrs, type NlAttr } from '../netlink/nlattr.ts';
import { NFGENMSG_LEN, NFTA_TRACE, NFTA_VERDICT, NFT_MSG, NFT_TRACETYPE, NFT_VERDICT_CODES } from './constants.ts';
import { nftType, parseMessages, type NlMessage } from './codec.ts';
import { NftDecodeError } from './errors.ts';

/** A verdict as nft(8) names it: accept, drop, continue, jump, goto, return, …; `chain` for jump and goto. */
export interface TraceVerdict {
  readonly code: string;
  readonly chain?: string;
}

/** The IPv4 or IPv6 packet an event carries (its headers at that hook; addresses as canonical text). */
export interface TracedPacket {
  readonly src: string;
  readonly dst: string;
  /** IP protocol number (6 TCP, 17 UDP, 132 SCTP). */
  readonly protocol: number;
  /** Ports, for TCP, UDP and SCTP when the transport header came with the event. */
  readonly sport?: number;
  readonly dport?: number;
}

/** One trace event. */
export interface TraceEvent {
  /** NFTA_TRACE_ID. */
  readonly id: number;
  /** NFPROTO_* of the table (2: ip, 10: ip6). */
  readonly family: number;
  readonly table: string;
  readonly chain: string;
  readonly type: 'rule' | 'return' | 'policy';
  /** The rule's handle, for a `rule` event. */
  readonly handle?: number;
  /** The rule's verdict (rule events), the return (return events), or the policy (policy events). */
  readonly verdict?: TraceVerdict;
  /** meta mark, when not 0. */
  readonly mark?: number;
  /** The packet's headers: only on the first event of a base chain's run. */
  readonly packet?: TracedPacket;
}

const TYPES: ReadonlyMap<number, TraceEvent['type']> = new Map([
  [NFT_TRACETYPE.RULE, 'rule'],
  [NFT_TRACETYPE.RETURN, 'return'],
  [NFT_TRACETYPE.POLICY, 'policy'],
]);

function be32(a: NlAttr, what: string): number {
  if (a.data.length !== 4) throw new NftDecodeError(`${what}: expected 4 bytes, got ${a.data.length}`);
  return a.data.readUInt32BE(0);
}

function verdictName(code: number): string {
  return NFT_VERDICT_CODES.get(code) ?? `verdict ${code}`;
}

function verdict(a: NlAttr): TraceVerdict {
  const v = indexAttrs(attrNested(a));
  const code = v.get(NFTA_VERDICT.CODE);
  if (!code) throw new NftDecodeError('NFTA_TRACE_VERDICT without NFTA_VERDICT_CODE');
  const chain = v.get(NFTA_VERDICT.CHAIN);
  return { code: verdictName(be32(code, 'NFTA_VERDICT_CODE') | 0), ...(chain ? { chain: attrString(chain, 'NFTA_VERDICT_CHAIN') } : {}) };
}

/**
 * The IPv4 or IPv6 header (and ports from the transport header) of an
 * event; undefined for another header. For IPv6 the protocol is the fixed
 * header's Next Header: the probes drover sends carry no extension header.
 */
function packet(network: NlAttr, transport: NlAttr | undefined): TracedPacket | undefined {
  const ip = network.data;
  const version = ip.length > 0 ? ip[0]! >> 4 : 0;
  let out: { src: string; dst: string; protocol: number; sport?: number; dport?: number };
  if (version === 4 && ip.length >= 20) {
    const addr = (off: number) => `${ip[off]}.${ip[off + 1]}.${ip[off + 2]}.${ip[off + 3]}`;
    out = { src: addr(12), dst: addr(16), protocol: ip[9]! };
  } else if (version === 6 && ip.length >= 40) {
    out = { src: ipFromBytes(ip.subarray(8, 24)).text, dst: ipFromBytes(ip.subarray(24, 40)).text, protocol: ip[6]! };
  } else return undefined;
  const th = transport?.data;
  if (th && th.length >= 4 && (out.protocol === 6 || out.protocol === 17 || out.protocol === 132)) {
    out.sport = th.readUInt16BE(0);
    out.dport = th.readUInt16BE(2);
  }
  return out;
}

/**
 * Decode one NFT_MSG_TRACE message.
 * @throws NftDecodeError for another message type, a missing table, chain,
 *   type or id, or an attribute of the wrong size.
 */
export function decodeTraceEvent(msg: NlMessage): TraceEvent {
  if (msg.type !== nftType(NFT_MSG.TRACE)) throw new NftDecodeError(`message type 0x${msg.type.toString(16)} is not NFT_MSG_TRACE`);
  if (msg.payload.length < NFGENMSG_LEN) throw new NftDecodeError('NFT_MSG_TRACE: no nfgenmsg');
  const a = indexAttrs(parseAttrs(msg.payload.subarray(NFGENMSG_LEN)));
  const need = (type: number, what: string): NlAttr => {
    const x = a.get(type);
    if (!x) throw new NftDecodeError(`NFT_MSG_TRACE without ${what}`);
    return x;
  };
  const rawType = be32(need(NFTA_TRACE.TYPE, 'NFTA_TRACE_TYPE'), 'NFTA_TRACE_TYPE');
  const type = TYPES.get(rawType);
  if (!type) throw new NftDecodeError(`NFT_MSG_TRACE of unknown type ${rawType}`);
  const handle = a.get(NFTA_TRACE.RULE_HANDLE);
  if (handle && handle.data.length !== 8) throw new NftDecodeError(`NFTA_TRACE_RULE_HANDLE: expected 8 bytes, got ${handle.data.length}`);
  const v = a.get(NFTA_TRACE.VERDICT);
  const policy = a.get(NFTA_TRACE.POLICY);
  const mark = a.get(NFTA_TRACE.MARK);
  const network = a.get(NFTA_TRACE.NETWORK_HEADER);
  const pkt = network ? packet(network, a.get(NFTA_TRACE.TRANSPORT_HEADER)) : undefined;
  const markValue = mark ? be32(mark, 'NFTA_TRACE_MARK') : 0;
  return {
    id: be32(need(NFTA_TRACE.ID, 'NFTA_TRACE_ID'), 'NFTA_TRACE_ID'),
    family: msg.payload[0]!,
    table: attrString(need(NFTA_TRACE.TABLE, 'NFTA_TRACE_TABLE'), 'NFTA_TRACE_TABLE'),
    chain: attrString(need(NFTA_TRACE.CHAIN, 'NFTA_TRACE_CHAIN'), 'NFTA_TRACE_CHAIN'),
    type,
    ...(handle ? { handle: Number(handle.data.readBigUInt64BE(0)) } : {}),
    ...(v ? { verdict: verdict(v) } : policy ? { verdict: { code: verdictName(be32(policy, 'NFTA_TRACE_POLICY')) } } : {}),
    ...(markValue !== 0 ? { mark: markValue } : {}),
    ...(pkt ? { packet: pkt } : {}),
  };
}

/**
 * The trace events of one received datagram; other messages (none are
 * expected on the group) are skipped.
 * @throws NftDecodeError for a malformed datagram or event.
 */
export function decodeTraceDatagram(datagram: Uint8Array): TraceEvent[] {
  return parseMessages(datagram)
    .filter((m) => m.type === nftType(NFT_MSG.TRACE))
    .map(decodeTraceEvent);
}
