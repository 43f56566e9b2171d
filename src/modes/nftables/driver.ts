/**
 * nftables mode as the commands see it (driver.ts): drover's own tables
 * `ip drover` and, for IPv6 Services, `ip6 drover` (dual-stack.ts), where
 * Services and endpoints are set and map elements (layout.ts). Every
 * command covers the IPv6 table when the source has IPv6 service ports or
 * the kernel has the table, and reports it after the IPv4 one. Element-only
 * changes go over nf_tables netlink; structure and repairs through
 * `nft -f`; the table is read back with `nft -j`.
 * `chains` shows it per frontend (chains.ts), `trace` walks its rules by
 * their comments over its sets and maps (trace.ts), and `trace --kernel`
 * sends one real probe and reads the kernel's own trace of it (kernel-trace.ts).
 * Names, options and help only: what the mode does with rules and the kernel
 * is operations.ts, loaded when a command first needs it.
 */
import { operationsOnUse, type ModeDriver } from '../driver.ts';
import { nftablesSyncLogFields } from './sync-detail.ts';

/**
 * `run`'s default minimum sync period in nftables mode, ms. A change of
 * Services or endpoints is a few element updates over nf_tables netlink,
 * about 2 ms per sync at 10,000 Services, so the syncs need far less
 * batching than kube-proxy's 1 s; the value is the one the peer bench chose
 * (docs/peers.md, "The default minimum sync period").
 */
export const NFTABLES_MIN_SYNC_PERIOD_MS = 50;

/** The driver of `--mode nftables`. */
export const nftablesMode: ModeDriver = {
  name: 'nftables',
  title: 'nftables',
  filter: 'nftables',
  minSyncPeriodMs: NFTABLES_MIN_SYNC_PERIOD_MS,
  options: { sync: () => [], compare: () => [] },
  metrics: async () => (await import('./metrics.ts')).nftablesMetrics,
  syncLogFields: nftablesSyncLogFields,
  help: {
    render: ', or with --mode nftables the nft script of table ip drover (and of table ip6 drover for IPv6 Services)',
    chains:
      '; with --mode nftables: each frontend (ip . protocol . port) with the sets of table ip drover that hold it, its endpoint slots ' +
      'and their hairpin entries, its affinity timeout and entries and its firewall-allow ranges, named by --source',
    chainsJson:
      'with --mode nftables: [{"servicePort": "ns/name:port" or null, "frontend": "ip . proto . port", "sets": [name], ' +
      '"selections": [{"selection": "main"|"local", "map", "counts": [n], "slots": [{slot, endpoint ("ip . port" or null), hairpin: {entry, present} or null, pod}]}], ' +
      '"affinitySeconds": n or null, "affinityEntries": [{client, endpoint}], "firewall": [cidr], "pending": [{op, set, key, value}] (with --source)}]',
    diff: ' (with --mode nftables: the elements, sets and chains of table ip drover and table ip6 drover)',
    trace: '; with --mode nftables the chains of table ip drover (table ip6 drover for --dst [ipv6]:port), the endpoint slots with their probability and the affinity entries',
    status: '; in nftables mode the tables ip drover and ip6 drover and their elements',
    cleanup: ' (with --mode nftables: deletes table ip drover and table ip6 drover, nothing else)',
  },
  runInfo: () => ({}),
  recordedSection: () => ({}),
  ...operationsOnUse(async () => (await import('./operations.ts')).nftablesOperations, true),
};
