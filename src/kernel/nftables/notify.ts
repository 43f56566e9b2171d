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
import { attrString, parseAttrs, readU16, readU32 } from '../netlink/nlattr.ts';
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
 * Call `visit` with each netlink message of a datagram of the group: its
 * type (nlmsg_type), offset and length (nlmsg_len, header included), in
 * order, stepping by NLMSG_ALIGN (linux/netlink.h). Stops at the first
 * message length that is too short or runs past the end, and returns why;
 * trailing bytes fewer than a header are ignored.
 * @returns undefined when every message was read, else the reason the walk stopped.
 */
export function walkNotifications(b: Buffer, visit: (type: number, off: number, len: number) => void): string | undefined {
  let off = 0;
  while (b.length - off >= NLMSG_HDRLEN) {
    const len = readU32(b, off);
    if (len < NLMSG_HDRLEN || off + len > b.length) return `malformed netlink notification at offset ${off}: nlmsg_len ${len}, ${b.length - off} bytes left`;
    visit(readU16(b, off + 4), off, len);
    off += (len + 3) & ~3;
  }
  return undefined;
}

/**
 * The NFT_MSG_NEWGEN message at `off` (`len` bytes, header included) of
 * `b`: its generation id and, when the kernel sent them, the committing
 * process's pid and name (nf_tables_fill_gen_info).
 * @returns undefined when it has no 4-byte NFTA_GEN_ID.
 * @throws NetlinkDecodeError (not its subclass NftDecodeError) for an attribute that runs past the message, or a name that is not NUL-terminated.
 */
export function readGenCommit(b: Buffer, off: number, len: number): GenCommit | undefined {
  let gen: number | undefined;
  let pid: number | undefined;
  let name: string | undefined;
  for (const a of parseAttrs(b.subarray(off + NLMSG_HDRLEN + NFGENMSG_LEN, off + len))) {
    if (a.type === NFTA_GEN.ID && a.data.length === 4) gen = a.data.readUInt32BE(0);
    else if (a.type === NFTA_GEN.PROC_PID && a.data.length === 4) pid = a.data.readUInt32BE(0);
    else if (a.type === NFTA_GEN.PROC_NAME) name = attrString(a, 'NFTA_GEN_PROC_NAME');
  }
  return gen === undefined ? undefined : { gen, ...(pid !== undefined ? { pid } : {}), ...(name !== undefined ? { name } : {}) };
}

/**
 * Scan a datagram of the NFNLGRP_NFTABLES group; see the module comment.
 * @throws NftDecodeError for a message length that is too short or runs past
 *   the end, or a NEWGEN without a 4-byte NFTA_GEN_ID; NetlinkDecodeError for
 *   a NEWGEN attribute that cannot be read ({@link readGenCommit}).
 */
export function scanNotifications(buf: Uint8Array): NotificationScan {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const commits: GenCommit[] = [];
  let messages = 0;
  const malformed = walkNotifications(b, (type, off, len) => {
    messages++;
    if (type !== NEWGEN) return;
    const commit = readGenCommit(b, off, len);
    if (commit === undefined) throw new NftDecodeError('NEWGEN: no 4-byte NFTA_GEN_ID');
    commits.push(commit);
  });
  if (malformed !== undefined) throw new NftDecodeError(malformed);
  return { messages, commits };
}
