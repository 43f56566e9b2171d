/**
 * What nftables mode does with rules and the kernel (driver.ts loads this
 * module when a command first needs it): drover's own tables
 * `ip drover` and, for IPv6 Services, `ip6 drover` (dual-stack.ts), where
 * Services and endpoints are set and map elements (layout.ts). Every
 * command covers the IPv6 table when the source has IPv6 service ports or
 * the kernel has the table, and reports it after the IPv4 one. Element-only
 * changes go over nf_tables netlink; structure and repairs through
 * `nft -f`; the table is read back with `nft -j`.
 * `chains` shows it per frontend (chains.ts), `trace` walks its rules by
 * their comments over its sets and maps (trace.ts), and `trace --kernel`
 * sends one real probe and reads the kernel's own trace of it (kernel-trace.ts).
 */
import { existsSync } from 'node:fs';
import { UsageError } from '../../errors.ts';
import { requireNetns, requireRoot } from '../shared/access.ts';
import type { KernelOptions } from '../../config/kernel.ts';
import type { RenderCliOptions } from '../../config/render-cli.ts';
import { loadSource } from '../../sources/load.ts';
import { renderConfig } from '../shared/render-config.ts';
import { driftOf } from '../shared/drift.ts';
import type { ModeOperations } from '../driver.ts';
import type { Logger } from '../../util/log.ts';
import { planFullSync } from './backend.ts';
import { DualStackNftablesBackend, renderFamilies } from './dual-stack.ts';
import { ipv6RenderOptions } from '../../config/render.ts';
import { familyView } from '../../model/family.ts';
import type { IPFamily, Snapshot } from '../../model/types.ts';
import { formatNftDrift, nftDriftCount } from './diff.ts';
import { NFT, SystemNft } from './exec.ts';
import { MAIN, tableRef } from './layout.ts';
import { nftNodePortIPs } from './node-ports.ts';
import { NO_TABLE, type LiveTable } from './live.ts';
import { TableModel } from './model.ts';
import { nftTraceContext, nftTraceFormatOf } from './trace.ts';
import { traceKernel } from './kernel-trace.ts';
import { formatNftChains, nftFrontendViews } from './chains.ts';
import { desiredNft, type DesiredNft } from './desired.ts';
import { selectServicePorts, UnknownServiceError } from '../shared/kube-chains/chains.ts';
import { endpointPods } from '../../model/pods.ts';
import { openElementWriter, repairWatch } from './wiring.ts';
import { localAddresses } from '../../kernel/iptables/live.ts';

/**
 * nft for the command's flags, for the table of `family` (default IPv4).
 * @throws UsageError when not root, nft is missing or the namespace does not exist.
 */
function nftFor(opts: KernelOptions, family: IPFamily = 'IPv4'): SystemNft {
  requireRoot('nftables');
  if (!existsSync(NFT)) throw new UsageError(`nftables mode needs ${NFT} (Debian package nftables)`);
  requireNetns(opts.netns);
  return new SystemNft({ ...(opts.netns ? { netns: opts.netns } : {}), family });
}

/** Both live tables, IPv4 first; the IPv6 one as missing when nft cannot list it (a kernel without IPv6). */
async function listBoth(opts: KernelOptions): Promise<Record<IPFamily, LiveTable>> {
  const [IPv4, IPv6] = await Promise.all([nftFor(opts).list(), nftFor(opts, 'IPv6').list().catch(() => NO_TABLE)]);
  return { IPv4, IPv6 };
}

/** The families a command covers: IPv4, and IPv6 when `snapshot` has IPv6 service ports or `live6` exists. */
function familiesOf(snapshot: Snapshot | undefined, live6: LiveTable): IPFamily[] {
  return (snapshot !== undefined && familyView(snapshot, 'IPv6').services.size > 0) || live6.exists ? ['IPv4', 'IPv6'] : ['IPv4'];
}

/** This node's NodePort addresses of `family` for `cidrs`; none for IPv6 when they cannot be read. */
async function nodePortIPsOf(family: IPFamily, cidrs: RenderCliOptions['nodeportAddresses'], netns: string | undefined, logger?: Logger): Promise<string[]> {
  if (family === 'IPv4') return nftNodePortIPs(cidrs, netns, logger);
  return nftNodePortIPs(cidrs, netns, logger, 'IPv6').catch((err: Error) => {
    logger?.warn({ err: err.message }, 'cannot read the IPv6 addresses of the node: no IPv6 NodePort');
    return [];
  });
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

/** The lines of `drover status` for the live table of `family` (the IPv6 one's labels end in 6). */
function statusLines(live: LiveTable, family: IPFamily = 'IPv4'): Array<[string, string]> {
  const suffix = family === 'IPv6' ? '6' : '';
  if (!live.exists) return [[`nftables${suffix}`, `no table ${tableRef(family)}`]];
  const sets = [...live.sets].map(([name, s]) => `${name} ${s.elements.size}`);
  const slots = live.sets.get(MAIN.map)?.elements.size ?? 0;
  return [
    [`nftables${suffix}`, `table ${tableRef(family)}: ${live.chains.size} chains, ${live.sets.size} sets and maps, ${slots} endpoint slots`],
    [`elements${suffix}`, sets.join(', ')],
  ];
}

/** What the next full sync of each family would write for the source of `opts` against the live tables of namespace `netns`: IPv4's, then IPv6's when {@link familiesOf} covers it. */
async function sourceDrift(opts: RenderCliOptions, netns: string | undefined, live: Record<IPFamily, LiveTable>) {
  const { snapshot, problems, incomplete } = await loadSource(opts);
  const plans = [];
  for (const family of familiesOf(snapshot, live.IPv6)) {
    const nodePortIPs = await nodePortIPsOf(family, opts.nodeportAddresses, netns);
    const model = TableModel.fromLive(live[family]);
    const plan = planFullSync(model, familyView(snapshot, family), renderConfig(opts, family), { nodePortIPs, family }, incomplete.length > 0);
    plans.push({ family, plan, model });
  }
  return { plans, problems, incomplete };
}

/** The operations of `--mode nftables` (driver.ts). */
export const nftablesOperations: ModeOperations = {
  async createBackend(config, render, logger: Logger) {
    const { kernel } = config;
    const part = async (family: IPFamily) => {
      const elements = await openElementWriter(kernel, logger, family);
      // Read once, as IPVS mode reads them (node-ports.ts).
      const nodePortIPs = await nodePortIPsOf(family, config.render.nodeportAddresses, kernel.netns, logger);
      return { nft: nftFor(kernel, family), ...(elements ? { elements } : {}), frontends: { nodePortIPs, family } };
    };
    const [v4, v6] = [await part('IPv4'), await part('IPv6')];
    logger.info(
      { mode: 'nftables', netns: kernel.netns, elements: v4.elements ? 'netlink' : 'nft', nodePortAddresses: v4.frontends.nodePortIPs, ipv6NodePortAddresses: v6.frontends.nodePortIPs },
      'using nftables mode (table ip drover, and table ip6 drover for IPv6 Services)',
    );
    // With both element writers (netlink in this namespace): the notification watch, opened when `drover run` starts.
    const watch = v4.elements?.generation && v6.elements?.generation ? repairWatch(logger) : undefined;
    return new DualStackNftablesBackend({
      IPv4: { ...v4, render },
      IPv6: { ...v6, render: ipv6RenderOptions(render, config.render.clusterCidr) },
      logger,
      ...(watch ? { watch } : {}),
    });
  },

  async render(snapshot, config, header) {
    const opts = config.render;
    const lines = ['drover render --mode nftables: what a full sync writes onto an empty node (nft -f input)', ...header];
    // NodePorts on this host's addresses, as a sync here would program them; the IPv6 table follows for IPv6 service ports.
    const part = async (family: IPFamily) => ({ render: renderConfig(opts, family), nodePortIPs: await nodePortIPsOf(family, opts.nodeportAddresses, undefined) });
    const { text, leftOut } = renderFamilies(snapshot, { IPv4: await part('IPv4'), IPv6: await part('IPv6') });
    return { text: `${lines.map((l) => `# ${l}\n`).join('')}${text}`, leftOut };
  },

  async chains(selector, opts) {
    if (selector !== undefined && opts.source === undefined) {
      throw new UnknownServiceError(`selecting ${selector} in nftables mode needs --source: table ${tableRef()} keeps no service names`);
    }
    const live = await listBoth(opts);
    let snapshot: Snapshot | undefined;
    let pods: ReadonlyMap<string, string> | undefined;
    if (opts.source !== undefined) {
      const loaded = await loadSource({ source: opts.source, serviceCidr: opts.serviceCidr, serviceNodePortRange: opts.serviceNodePortRange, masqueradeAll: false });
      for (const p of loaded.problems) process.stderr.write(`drover: ${p}\n`);
      snapshot = loaded.snapshot;
      pods = endpointPods(snapshot);
    }
    // Each family's frontends from its table; a dual-stack service port's IPv6 ones follow its IPv4 ones.
    const views = [];
    for (const family of familiesOf(snapshot, live.IPv6)) {
      let desired: DesiredNft | undefined;
      // NodePorts on every address of the node, as a sync without --nodeport-addresses programs them.
      if (snapshot !== undefined) desired = desiredNft(familyView(snapshot, family), { nodePortIPs: await nodePortIPsOf(family, undefined, opts.netns), family });
      views.push(...nftFrontendViews(live[family], desired, pods));
    }
    const selected = selectServicePorts(views, selector, 'in --source');
    return opts.json ? `${JSON.stringify(selected, null, 2)}\n` : formatNftChains(selected, snapshot !== undefined);
  },

  // An IPv6 connection walks table ip6 drover, with the node's IPv6 addresses.
  async trace(opts) {
    const family = opts.family ?? 'IPv4';
    const [live, local] = await Promise.all([nftFor(opts, family).list(), localAddresses(opts.netns, family)]);
    const { ctx, note } = nftTraceContext(live, local, { family });
    return {
      ctx,
      format: nftTraceFormatOf(family),
      where: `rules numbered by their place in each chain of nft list table ${tableRef(family)}; sets and maps as nft -j lists them`,
      note,
    };
  },

  async kernelTrace(opts, evaluated) {
    // The probe is traced in drover's table of its family: ip6 drover for an IPv6 connection.
    const family = evaluated.packet.dst.includes(':') ? 'IPv6' : 'IPv4';
    const r = await traceKernel(nftFor(opts, family), { ...(opts.netns ? { netns: opts.netns } : {}), ...(opts.probeFrom ? { probeFrom: opts.probeFrom } : {}) }, evaluated);
    return { text: r.text, match: r.comparison.match, json: { probe: r.sent, path: r.path, comparison: r.comparison } };
  },

  async diff(config) {
    const live = await listBoth(config.kernel);
    const { plans, problems, incomplete } = await sourceDrift(config.render, config.kernel.netns, live);
    // With the IPv6 table, each table's differences under its name.
    const text = plans.map((p) => (plans.length > 1 ? `table ${tableRef(p.family)}:\n` : '') + formatNftDrift(p.plan, p.model, p.family)).join('');
    return { text, differs: plans.some((p) => nftDriftCount(p.plan) > 0), problems, incomplete };
  },

  async status(opts, recorded) {
    const live = await listBoth(opts);
    const drift = await driftOf(async () => (await sourceDrift(recorded.render, opts.netns, live)).plans.reduce((n, p) => n + nftDriftCount(p.plan), 0));
    const rules = ruleCounts(live.IPv4);
    const lines = statusLines(live.IPv4);
    if (live.IPv6.exists) {
      const r6 = ruleCounts(live.IPv6);
      rules.filter += r6.filter;
      rules.nat += r6.nat;
      lines.push(...statusLines(live.IPv6, 'IPv6'));
    }
    return { rules, drift, lines };
  },

  /** `takeover`'s survey: table ip drover and table ip6 drover when they exist, with their chains and sets (what `cleanup` deletes). */
  async survey(opts) {
    const live = await listBoth(opts);
    const found: string[] = [];
    for (const family of ['IPv4', 'IPv6'] as IPFamily[]) {
      const t = live[family];
      if (t.exists) found.push(`table ${tableRef(family)}: ${t.chains.size} chains, ${t.sets.size} sets and maps`);
    }
    return { found, unread: [] };
  },

  async fake(opts) {
    return (await import('./fake-mode.ts')).nftablesFakeMode(opts);
  },
};
