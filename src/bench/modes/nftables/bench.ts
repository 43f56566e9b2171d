/**
 * nftables mode's part of `drover bench` (bench/harness.ts ModeBench): the harness
 * (harness.ts) runs in a worker inside the node namespace, because
 * its nf_tables netlink socket acts on the namespace of its process.
 */
import { existsSync } from 'node:fs';
import { NFT, SystemNft } from '../../../modes/nftables/exec.ts';
import { NftNetlinkClient } from '../../../kernel/nftables/client.ts';
import { nftNodePortIPs } from '../../../modes/nftables/node-ports.ts';
import { runCommand } from '../../../kernel/exec.ts';
import type { ModeBench } from '../../harness.ts';
import { BENCH_CLUSTER_CIDR } from '../../synth.ts';
import type { BenchSettings } from '../../types.ts';
import { nftablesHarness } from './harness.ts';

/** A table that a throw-away namespace (`unshare --net`) creates and deletes, to see that nf_tables works; the host's netfilter is never touched. */
const PROBE = 'add table ip drover-bench-probe\ndelete table ip drover-bench-probe\n';

/** The bench of `--mode nftables`. */
export const nftablesBench: ModeBench = {
  placement: 'namespace',
  perChangeBaselines: 2,
  async createHarness() {
    // Generous timeouts: a full re-render at 10,000 services takes a while, an emulated guest ~25x longer.
    const netlink = await NftNetlinkClient.open({ timeoutMs: 120_000 });
    try {
      const nodePortIPs = await nftNodePortIPs(undefined, undefined);
      return nftablesHarness(
        { nft: new SystemNft({ timeoutMs: 900_000 }), netlink, close: () => netlink.close() },
        { render: { clusterCIDR: BENCH_CLUSTER_CIDR, masqueradeAll: false }, nodePortIPs },
      );
    } catch (err) {
      netlink.close();
      throw err;
    }
  },
  async unavailableReason() {
    if (!existsSync(NFT)) return `nftables mode needs ${NFT} (Debian package nftables)`;
    const res = await runCommand('unshare', ['--net', NFT, '-f', '-'], { input: PROBE, timeoutMs: 30_000 }).catch((e: Error) => e);
    if (res instanceof Error) return `nf_tables cannot be tried in a throw-away namespace: ${res.message}`;
    if (res.code !== 0) return `this kernel refuses an nf_tables table in a fresh namespace (no nf_tables?): ${res.stderr.trim()}`;
    return undefined;
  },
  methodText: (s: BenchSettings) => [
    '',
    "nftables mode (drover's table `ip drover`, where Services and endpoints are set and map elements; drover's partial syncs write elements over nf_tables netlink, structure through `nft -f`). Each baseline is timed from the first byte sent (the netlink datagram, or spawning `nft -f`) to the kernel's last answer (or nft's exit):",
    '',
    "- **raw minimal**: only the element operations the change needs in drover's layout (planned as drover's planner plans them, plan.ts planFrontend, for a table holding the service port as before): an endpoint removed or added is its slot element, its endpoint-count sets and its hairpin entry; a service added or removed is its frontend in `service-ips` and `cluster-ips`, its slots and its endpoint-count set. All in ONE nf_tables netlink batch, one kernel transaction: the physical limit of the change.",
    '- **minimal script**: the same element operations as `add element`/`delete element` lines of one `nft -f` script (the cost of nft itself: start-up, parsing, its cache of the table, and its own netlink batch).',
    "- **kube-proxy-style**: what kube-proxy's nftables proxier (pkg/proxy/nftables) writes in its partial sync for the same change, in its own layout, applied by `nft -f`; it is kube-proxy's layout and transaction, not kube-proxy itself. A table `ip kube-proxy` with the same service ports (its ClusterIPs moved from 10.96.0.0/12 to 10.112.0.0/12, so that it never answers the bench's connections; base chains hooked as kube-proxy's) is written once per size after drover's full sync, off the clock: a verdict map `service-ips` of `ip . protocol . port : goto service-…`, per service port a chain with the masquerade mark and `numgen random mod N vmap { 0 : goto endpoint-…, … }`, per endpoint a chain with the DNAT. A change adds, flushes and writes again the changed service port's chain and every one of its endpoint chains, adds or deletes its `service-ips` element, and flushes the chains it no longer uses (the next transaction deletes them, as kube-proxy deletes stale chains in a later sync). kube-proxy's own reads (`nft list chains` on full syncs) and its Go-side work are left out, which favours the baseline.",
    `- **full re-render**: drover's whole table deleted and written again, every set, chain and element, by one \`nft -f\` transaction; ${s.fullBaselineRepeats} time(s) per size on a "service added" change, up to ${s.fullBaselineMax} services.`,
    "- **full sync baseline** (`nft -f` of the same ruleset): before drover's full sync, the starting state's whole table, every set, chain and element, written by one `nft -f` transaction into the empty namespace, timed from spawning nft to its exit, then deleted; drover's full sync from empty tables is compared with it.",
    '',
    "The end-to-end clock reads the whole table with `nft -j list table ip drover` and checks it with drover's planner: a change shows when planning the service port's frontends against the read-back writes nothing and its hairpin entries are there. Its `bytes` are the netlink datagram (drover, raw) or the script (the others).",
    '',
    "drover's agent clock in nftables mode is its backend with the netlink element writer (netlink-writer.ts), as `drover run` has it when started inside the namespace it programs (the end-to-end clock's `drover run` is).",
    '',
    "nft 1.0.6 reads the chains of every table in the namespace for any script, so kube-proxy's table, once written, makes every `nft -f` of the run slower: the minimal script, kube-proxy-style, drover's structural writes and drover run's element changes alike (measured apart: one `add element` into a small table took 71 ms with 20,000 chains in another table of the namespace, 11 ms without). The raw baseline and drover's netlink writes do not read anything. A run's final full sync counts as writing nothing when it writes and deletes no element and adds no set: deleting the set of an endpoint count no longer in use (partial syncs keep them) and rewriting the chain that looked it up is its own clean-up.",
  ],
};
