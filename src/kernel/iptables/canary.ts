/**
 * The cheap drift check of iptables mode, run at each `--sync-period`
 * between full read-backs (which cost seconds at 10,000 services, most of it
 * in iptables-save):
 *
 * - kube-proxy's canary chains: an empty `KUBE-PROXY-CANARY` chain in the
 *   mangle, nat and filter tables (pkg/util/iptables/iptables.go
 *   MonitorCanary). A table rebuilt by someone else (a firewall reload, a
 *   restore without --noflush, `iptables -X`) loses its canary. Checked
 *   with one `iptables -S KUBE-PROXY-CANARY` per table, which lists that
 *   chain only.
 * - drover's hook jumps in the built-in chains: `iptables -F` empties
 *   every chain but deletes none, so the canary survives it; the hooks do
 *   not. One `iptables -S CHAIN` per built-in chain drover hooks.
 * - With iptables-nft, the nf_tables generation: a counter the kernel bumps
 *   at every ruleset commit, by anyone (nfnetlink NFT_MSG_GETGEN,
 *   <linux/netfilter/nf_tables.h>). A commit that is not drover's means
 *   something may have changed; read back. Read where drover runs, so only
 *   without `--netns` (netlink answers for the process's own namespace).
 *   The generation is read after each of drover's writes, so a commit by
 *   someone else in the moments of that write is taken for drover's.
 *
 * A change none of these catch (under iptables-legacy or `--netns`, a rule
 * of drover's edited by hand; a commit made during drover's own write) is
 * repaired by the full
 * read-back every `--full-sync-period` (default 1 h, kube-proxy's
 * FullSyncPeriod).
 */
import type { NetlinkSocket } from 'netlink';
import { loadNetlink } from '../netlink/load.ts';
import { NetlinkDecodeError, parseAttrs, attrBe32 } from '../netlink/nlattr.ts';

/** kube-proxy's canary chain name. */
export const CANARY_CHAIN = 'KUBE-PROXY-CANARY';

/** The tables that hold a canary, as kube-proxy's. */
export const CANARY_TABLES = ['mangle', 'nat', 'filter'] as const;

/** A table with a canary. */
export type CanaryTable = (typeof CANARY_TABLES)[number];

const NETLINK_NETFILTER = 12;
const NFNL_SUBSYS_NFTABLES = 10;
const NFT_MSG_GETGEN = 16;
const NFTA_GEN_ID = 1;

/**
 * Reads the nf_tables generation of the process's network namespace over
 * one nfnetlink socket, opened on first use (the `netlink` package too).
 */
export class NftGeneration {
  private socket: NetlinkSocket | undefined;

  /**
   * The current generation id. The socket stays open for the next read
   * (unreferenced, so it never keeps the process alive), and is replaced
   * after an error.
   * @throws the socket's error (no nf_tables in the kernel), NetlinkDecodeError for a reply without NFTA_GEN_ID.
   */
  async read(): Promise<number> {
    const { createNetlink } = await loadNetlink();
    this.socket ??= createNetlink(NETLINK_NETFILTER);
    this.socket.unref();
    let msgs;
    try {
      // struct nfgenmsg: family AF_UNSPEC, version NFNETLINK_V0, res_id 0.
      [msgs] = await this.socket.request((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETGEN, Buffer.from([0, 0, 0, 0]), { timeout: 5000 });
    } catch (err) {
      // A socket that timed out or failed may hold a stale reply: the next read opens a new one.
      this.close();
      throw err;
    }
    const reply = msgs[0];
    if (!reply || reply.data.length < 4) throw new NetlinkDecodeError('NFT_MSG_GETGEN: empty reply');
    const id = parseAttrs(Buffer.from(reply.data).subarray(4)).find((a) => a.type === NFTA_GEN_ID);
    if (!id) throw new NetlinkDecodeError('NFT_MSG_GETGEN: reply without NFTA_GEN_ID');
    return attrBe32(id, 'NFTA_GEN_ID');
  }

  /** Close the socket. */
  close(): void {
    this.socket?.close();
    this.socket = undefined;
  }
}
