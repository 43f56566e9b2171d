/**
 * nftables mode as the commands see it (driver.ts): drover's own table
 * `ip drover`, where Services and endpoints are set and map elements
 * (layout.ts). Element-only changes go over nf_tables netlink; structure
 * and repairs through `nft -f`; the table is read back with `nft -j`.
 * `chains` shows it per frontend (chains.ts), `trace` walks its rules by
 * their comments over its sets and maps (trace.ts), and `trace --kernel`
 * sends one real probe and reads the kernel's own trace of it (kernel-trace.ts).
 */
import { existsSync } from 'node:fs';
import { UsageError } from '../../cli/usage-error.ts';
import { requireNetns, requireRoot } from '../shared/access.ts';
import type { KernelOptions, RenderCliOptions } from '../../cli/options.ts';
import { loadSource } from '../../sources/load.ts';
import { renderConfig } from '../shared/render-config.ts';
import { driftOf } from '../shared/drift.ts';
import type { ModeDriver, ModeOptions } from '../driver.ts';
import type { Logger } from '../../util/log.ts';
import { NftablesBackend, planFullSync } from './backend.ts';
import { nftablesBench } from './bench-mode.ts';
import { formatNftDrift, nftDriftCount } from './diff.ts';
import { NFT, SystemNft } from './exec.ts';
import { MAIN, TABLE } from './layout.ts';
import { nftNodePortIPs } from './node-ports.ts';
import type { LiveTable } from './live.ts';
import { TableModel } from './model.ts';
import { orderOps } from './plan.ts';
import { transactionScript } from './script.ts';
import { nftTraceContext, nftTraceFormat } from './trace.ts';
import { traceKernel } from './kernel-trace.ts';
import { formatNftChains, nftFrontendViews } from './chains.ts';
import { conflictText, desiredNft, type DesiredNft } from './desired.ts';
import { selectServicePorts, UnknownServiceError } from '../iptables/chains.ts';
import { endpointPods } from '../../model/pods.ts';
import { openElementWriter } from './wiring.ts';
import { localAddresses } from '../iptables/live.ts';

/**
 * nft for the command's flags.
 * @throws UsageError when not root, nft is missing or the namespace does not exist.
 */
function nftFor(opts: KernelOptions): SystemNft {
  requireRoot('nftables');
  if (!existsSync(NFT)) throw new UsageError(`nftables mode needs ${NFT} (Debian package nftables)`);
  requireNetns(opts.netns);
  return new SystemNft(opts.netns ? { netns: opts.netns } : {});
}

/** The chains of the layout that are nat chains; the rest are filter chains. */
function isNatChain(name: string): boolean {
  return name.startsWith('nat-') || name === 'services' || name === 'masquerading';
}

/** Rules in the live table, by the kind of chain they are in. */
function ruleCounts(live: LiveTable): { filter: number; nat: number } {
  const counts = { filter: 0, nat: 0 };
  for (const [name, chain] of live.chains) counts[isNatChain(name) ? 'nat' : 'filter'] += chain.comments.length;
  return counts;
}

/** The lines of `drover status` for the live table. */
function statusLines(live: LiveTable): Array<[string, string]> {
  if (!live.exists) return [['nftables', `no table ${TABLE.family} ${TABLE.name}`]];
  const sets = [...live.sets].map(([name, s]) => `${name} ${s.elements.size}`);
  const slots = live.sets.get(MAIN.map)?.elements.size ?? 0;
  return [
    ['nftables', `table ${TABLE.family} ${TABLE.name}: ${live.chains.size} chains, ${live.sets.size} sets and maps, ${slots} endpoint slots`],
    ['elements', sets.join(', ')],
  ];
}

/** What the next full sync would write for the source of `opts` against `live`. */
async function sourceDrift(opts: RenderCliOptions & { readonly netns?: string }, live: LiveTable) {
  const { snapshot, problems, incomplete } = await loadSource(opts);
  const nodePortIPs = await nftNodePortIPs(opts.nodeportAddresses, opts.netns);
  const plan = planFullSync(TableModel.fromLive(live), snapshot, renderConfig(opts), { nodePortIPs }, incomplete.length > 0);
  return { plan, problems, incomplete };
}

/** The driver of `--mode nftables`. */
export const nftablesMode: ModeDriver = {
  name: 'nftables',
  title: 'nftables',
  options: { sync: () => [], compare: () => [] },
  help: {
    render: ', or with --mode nftables the nft script of table ip drover',
    chains:
      '; with --mode nftables: each frontend (ip . protocol . port) with the sets of table ip drover that hold it, its endpoint slots ' +
      'and their hairpin entries, its affinity timeout and entries and its firewall-allow ranges, named by --source',
    chainsJson:
      'with --mode nftables: [{"servicePort": "ns/name:port" or null, "frontend": "ip . proto . port", "sets": [name], ' +
      '"selections": [{"selection": "main"|"local", "map", "counts": [n], "slots": [{slot, endpoint ("ip . port" or null), hairpin: {entry, present} or null, pod}]}], ' +
      '"affinitySeconds": n or null, "affinityEntries": [{client, endpoint}], "firewall": [cidr], "pending": [{op, set, key, value}] (with --source)}]',
    diff: ' (with --mode nftables: the elements, sets and chains of table ip drover)',
    trace: "; with --mode nftables the chains of table ip drover, the endpoint slots with their probability and the affinity entries",
    status: '; in nftables mode the table ip drover and its elements',
    cleanup: ' (with --mode nftables: deletes table ip drover, nothing else)',
  },

  async createBackend(opts: ModeOptions, render, logger: Logger) {
    const nft = nftFor(opts);
    const elements = await openElementWriter(opts, logger);
    // Read once, as IPVS mode reads them (node-ports.ts).
    const nodePortIPs = await nftNodePortIPs(opts.nodeportAddresses as RenderCliOptions['nodeportAddresses'], opts.netns, logger);
    logger.info({ mode: 'nftables', netns: opts.netns, elements: elements ? 'netlink' : 'nft', nodePortAddresses: nodePortIPs }, 'using nftables mode (table ip drover)');
    return new NftablesBackend({ nft, ...(elements ? { elements } : {}), render, frontends: { nodePortIPs }, logger });
  },

  runInfo: () => ({}),
  recordedOptions: () => ({}),

  async render(snapshot, opts, header) {
    const empty = new TableModel();
    // NodePorts on this host's addresses, as a sync here would program them.
    const plan = planFullSync(empty, snapshot, renderConfig(opts), { nodePortIPs: await nftNodePortIPs(opts.nodeportAddresses, undefined) }, false);
    const lines = ['drover render --mode nftables: what a full sync writes onto an empty node (nft -f input)', ...header];
    return {
      text: `${lines.map((l) => `# ${l}`).join('\n')}\n${transactionScript(plan.structure, plan.want, empty, orderOps(plan.ops))}`,
      leftOut: plan.conflicts.map(conflictText),
    };
  },

  async chains(selector, opts) {
    if (selector !== undefined && opts.source === undefined) {
      throw new UnknownServiceError(`selecting ${selector} in nftables mode needs --source: table ${TABLE.family} ${TABLE.name} keeps no service names`);
    }
    const nft = nftFor(opts);
    let desired: DesiredNft | undefined;
    let pods: ReadonlyMap<string, string> | undefined;
    if (opts.source !== undefined) {
      const { snapshot, problems } = await loadSource({ source: opts.source, serviceCidr: opts.serviceCidr, masqueradeAll: false });
      for (const p of problems) process.stderr.write(`drover: ${p}\n`);
      // NodePorts on every address of the node, as a sync without --nodeport-addresses programs them.
      desired = desiredNft(snapshot, { nodePortIPs: await nftNodePortIPs(undefined, opts.netns) });
      pods = endpointPods(snapshot);
    }
    const views = selectServicePorts(nftFrontendViews(await nft.list(), desired, pods), selector, 'in --source');
    return opts.json ? `${JSON.stringify(views, null, 2)}\n` : formatNftChains(views, desired !== undefined);
  },

  async trace(opts) {
    const [live, local] = await Promise.all([nftFor(opts).list(), localAddresses(opts.netns)]);
    const { ctx, note } = nftTraceContext(live, local);
    return {
      ctx,
      format: nftTraceFormat,
      where: `rules numbered by their place in each chain of nft list table ${TABLE.family} ${TABLE.name}; sets and maps as nft -j lists them`,
      note,
    };
  },

  async kernelTrace(opts, evaluated) {
    const r = await traceKernel(nftFor(opts), { ...(opts.netns ? { netns: opts.netns } : {}), ...(opts.probeFrom ? { probeFrom: opts.probeFrom } : {}) }, evaluated);
    return { text: r.text, match: r.comparison.match, json: { probe: r.sent, path: r.path, comparison: r.comparison } };
  },

  async diff(opts) {
    const live = await nftFor(opts).list();
    const { plan, problems, incomplete } = await sourceDrift(opts, live);
    return { text: formatNftDrift(plan, TableModel.fromLive(live)), differs: nftDriftCount(plan) > 0, problems, incomplete };
  },

  async status(opts, recorded) {
    const live = await nftFor(opts).list();
    const drift = await driftOf(async () => nftDriftCount((await sourceDrift({ ...recorded, ...(opts.netns ? { netns: opts.netns } : {}) }, live)).plan));
    return { rules: ruleCounts(live), drift, lines: statusLines(live) };
  },

  bench: nftablesBench,
};
