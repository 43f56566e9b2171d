/**
 * nf_tables change notifications (the NFNLGRP_NFTABLES multicast group of
 * NETLINK_NETFILTER): find the generation commits in a received datagram.
 *
 * net/netfilter/nf_tables_api.c nf_tables_commit announces a committed batch
 * to the group: one message per object it changed (tables, chains, rules,
 * sets, each set element), packed several to a datagram
 * (nft_commit_notify), and then, in a datagram of its own, one
 * NFT_MSG_NEWGEN (nf_tables_gen_notify) carrying the new generation id and
 * the pid and name of the process that committed. iptables-nft commits
 * through the same batches, so its rule changes are announced the same way.
 * A full sync announces hundreds of thousands of elements: the scan reads
 * only each message's 16-byte header and decodes NEWGEN alone.
 */
import { attrString, attrBe32, indexAttrs, parseAttrs, readU16, readU32 } from '../netlink/nlattr.ts';
import { decodeGen } from './codec.ts';
import { NftDecodeError } from './errors.ts';
import { NFGENMSG_LEN, NFNL_SUBSYS_NFTABLES, NFT_MSG, NFTA_GEN, NLMSG_HDRLEN } from './constants.ts';

/** One NFT_MSG_NEWGEN: a batch committed. */
export interface GenCommit {
  /** The generation id after the commit (NFTA_GEN_ID; what NFT_MSG_GETGEN reads until the next commit). */
  readonly gen: number;
  /** pid of the committing process (NFTA_GEN_PROC_PID), when the kernel sent it. */
  readonly pid?: number;
  /** Its command name (NFTA_GEN_PROC_NAME, at most 15 characters), when the kernel sent it. */
  readonly name?: string;
}

/** What one notification datagram held. */
export interface NotificationScan {
  /** Netlink messages in the datagram. */
  readonly messages: number;
  /** The generation commits among them, in order. */
  readonly commits: GenCommit[];
}

const NEWGEN = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG.NEWGEN;

/**
 * Scan a datagram of the NFNLGRP_NFTABLES group; see the module comment.
 * @throws NftDecodeError for a message length that is too short or runs past
 *   the end, or a NEWGEN without a 4-byte NFTA_GEN_ID.
 */
export function scanNotifications(buf: Uint8Array): NotificationScan {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const commits: GenCommit[] = [];
  let messages = 0;
  let off = 0;
  while (b.length - off >= NLMSG_HDRLEN) {
    const len = readU32(b, off);
    if (len < NLMSG_HDRLEN || off + len > b.length) throw new NftDecodeError(`malformed netlink notification at offset ${off}: nlmsg_len ${len}, ${b.length - off} bytes left`);
    messages++;
    if (readU16(b, off + 4) === NEWGEN) {
      const msg = { type: NEWGEN, flags: readU16(b, off + 6), seq: readU32(b, off + 8), pid: readU32(b, off + 12), payload: b.subarray(off + NLMSG_HDRLEN, off + len) };
      const attrs = indexAttrs(parseAttrs(msg.payload.subarray(NFGENMSG_LEN)));
      const pid = attrs.get(NFTA_GEN.PROC_PID);
      const name = attrs.get(NFTA_GEN.PROC_NAME);
      commits.push({
        gen: decodeGen(msg),
        ...(pid ? { pid: attrBe32(pid, 'NFTA_GEN_PROC_PID') } : {}),
        ...(name ? { name: attrString(name, 'NFTA_GEN_PROC_NAME') } : {}),
      });
    }
    off += (len + 3) & ~3;
  }
  return { messages, commits };
}
