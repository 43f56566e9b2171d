/**
 * What iptables mode does with rules and the kernel (driver.ts loads this
 * module when a command first needs it): kube-proxy's NAT chains through
 * `iptables-restore --noflush`, read back with `iptables-save`.
 */
import { iptablesTraceContext } from '../shared/kube-chains/trace.ts';
import { createLogger } from '../../util/log.ts';
import { loadSource } from '../../sources/load.ts';
import { renderConfig } from '../shared/render-config.ts';
import type { DesiredConfig, ModeOperations, ModeOptions } from '../driver.ts';
import { formatChains, selectServicePorts, serviceChains, withPods } from '../shared/kube-chains/chains.ts';
import { endpointPods } from '../../model/pods.ts';
import { driftItems, formatDrift, ipv6DriftItem, type DriftItem } from '../shared/kube-chains/diff.ts';
import type { ParsedDump, TableName } from '../../kernel/iptables/parse.ts';
import { driftOf } from '../shared/drift.ts';
import { localAddresses, readTables } from '../../kernel/iptables/live.ts';
import { ip6tablesStatusLines, ownedRuleCounts } from '../shared/kube-chains/ruleset.ts';
import { renderRestore, renderSnapshot } from './snapshot.ts';
import { iptablesStatics, iptablesStatics6 } from '../shared/kube-chains/node-ports.ts';
import { createDualStackExec, createIptablesExec, readKernel } from '../shared/iptables-wiring.ts';
import { DualStackIptablesBackend } from './dual-stack.ts';
import { ipv6RenderOptions } from '../../config/render.ts';
import { loadStaticRules, withInvalidDrop } from '../shared/kube-chains/static.ts';
import { hasLocalnetFirewallJump, RouteLocalnetBackend } from './localhost.ts';
import { localhostNodePortsOn } from '../shared/kube-chains/localnet.ts';
import { namespaceSysctls } from '../shared/sysctls.ts';
import { familyView } from '../../model/family.ts';
import { servedRefusals } from '../shared/served-frontends.ts';
import type { ServicePortChains } from '../shared/kube-chains/chains.ts';
import type { Logger } from '../../util/log.ts';
import { ensureCounters, namespaceNfacct, presentCounters, withCountedInvalidDrop } from './nfacct.ts';
import { LOCALHOST_NODEPORTS_ACCEPTED, type KubeProxyCounter } from './nfacct-names.ts';
import { surveyLayout } from '../shared/kube-chains/survey.ts';
import { iptablesSection } from './section.ts';
import { isServiceChain } from '../shared/kube-chains/names.ts';

/**
 * The chains only iptables mode's layout has (kube-proxy's iptables
 * proxier, pkg/proxy/iptables/proxier.go): nat KUBE-NODEPORTS and the
 * per-service chains (IPVS mode's NodePort chain is KUBE-NODE-PORT).
 */
function isIptablesMarker(table: TableName, chain: string): boolean {
  return table === 'nat' && (chain === 'KUBE-NODEPORTS' || isServiceChain(chain));
}

/** Whether `modes` turn on NodePorts on 127.0.0.1 (`--nodeport-localhost`, iptables mode's own section). */
function nodePortLocalhost(modes: DesiredConfig['modes']): boolean {
  return iptablesSection(modes)?.nodeportLocalhost === true;
}

/**
 * What the next full sync would write for the source of `config` against
 * `kernel` in namespace `netns` (diff.ts driftItems, keeping what an
 * incomplete source keeps), and what of the source was skipped.
 * @throws Error when the source path is missing.
 */
async function sourceDrift(
  config: DesiredConfig,
  netns: string | undefined,
  kernel: ParsedDump,
  kernel6?: ParsedDump,
): Promise<{ items: DriftItem[]; problems: readonly string[]; incomplete: readonly string[] }> {
  const opts = config.render;
  const localhost = nodePortLocalhost(config.modes);
  const { snapshot, problems, incomplete } = await loadSource(opts);
  const liberal = opts.conntrackTcpBeLiberal;
  // The counters a running drover created at start (nfacct.ts): its rules name them.
  const counters = await presentCounters(namespaceNfacct(netns));
  const statics = withCountedInvalidDrop(withInvalidDrop(await iptablesStatics(opts.nodeportAddresses, netns, undefined, localhost), liberal), counters);
  const countLocalhost = counters.has(LOCALHOST_NODEPORTS_ACCEPTED) && localhostNodePortsOn(localhost, opts.nodeportAddresses);
  const items = driftItems(statics, renderSnapshot(familyView(snapshot, 'IPv4'), { ...renderConfig(opts), ...(countLocalhost ? { countLocalhostNodePorts: true } : {}) }), kernel, { incomplete: incomplete.length > 0 });
  // The IPv6 tables: compared when the source has IPv6 service ports or the kernel has drover's IPv6 chains (dual-stack.ts).
  const v6 = familyView(snapshot, 'IPv6');
  if (kernel6 !== undefined && (v6.services.size > 0 || kernel6.get('nat')?.has('KUBE-SERVICES'))) {
    const statics6 = withCountedInvalidDrop(withInvalidDrop(await iptablesStatics6(opts.nodeportAddresses, netns), liberal), counters);
    const items6 = driftItems(statics6, renderSnapshot(v6, renderConfig(opts, 'IPv6')), kernel6, { incomplete: incomplete.length > 0 });
    for (const item of items6) items.push(ipv6DriftItem(item));
  }
  return { items, problems, incomplete };
}

/** The live IPv6 filter and nat tables, or undefined when ip6tables cannot read them (a kernel without IPv6). */
async function readKernel6(opts: ModeOptions): Promise<ParsedDump | undefined> {
  try {
    return await readKernel(opts, createLogger(opts.logLevel), 'IPv6');
  } catch {
    return undefined;
  }
}

/** A service port's chains in the IPv6 tables, each table named "… (IPv6)". */
function ipv6Chains(sp: ServicePortChains): ServicePortChains {
  return { servicePort: sp.servicePort, chains: sp.chains.map((c) => ({ ...c, table: `${c.table as TableName} (IPv6)` as const })) };
}

/** kube-proxy's counters ensured in namespace `netns` (nfacct.ts ensureCounters). */
async function startCounters(netns: string | undefined, logger: Logger): Promise<Set<KubeProxyCounter>> {
  const nfacct = namespaceNfacct(netns);
  try {
    return await ensureCounters(nfacct, logger);
  } finally {
    nfacct.close();
  }
}

/** The operations of `--mode iptables` (driver.ts). */
export const iptablesOperations: ModeOperations = {
  async createBackend(config, render, logger) {
    const { kernel } = config;
    const section = iptablesSection(config.modes);
    const exec = await createDualStackExec(kernel, logger);
    logger.info({ mode: kernel.mode, iptables: exec.IPv4.variant, netns: kernel.netns }, 'using iptables-%s', exec.IPv4.variant);
    const cidrs = config.render.nodeportAddresses;
    // cleanup has no --nodeport-localhost: it takes KUBE-FIREWALL too when drover's jumps to it are there (localhost.ts
    // hasLocalnetFirewallJump): a KUBE-FIREWALL of kubelet's or kube-proxy's alone is not drover's to remove.
    const cleanupFirewall = section === undefined && hasLocalnetFirewallJump(await exec.IPv4.save('filter'));
    const localhost = localhostNodePortsOn(section?.nodeportLocalhost === true, cidrs);
    if (section?.nodeportLocalhost === true) {
      logger.info({ on: localhost }, localhost ? 'NodePorts on 127.0.0.1 (IPv4 only: there are none for IPv6)' : '--nodeport-localhost does nothing: --nodeport-addresses holds no part of 127.0.0.0/8');
    }
    // kube-proxy's nfacct counters, ensured once at start (nfacct.ts); cleanup creates none.
    const counters = section === undefined ? new Set<KubeProxyCounter>() : await startCounters(kernel.netns, logger);
    const statics = withCountedInvalidDrop(withInvalidDrop(cleanupFirewall ? loadStaticRules(undefined, true) : await iptablesStatics(cidrs, kernel.netns, logger, localhost), render.tcpBeLiberal), counters);
    const statics6 = withCountedInvalidDrop(withInvalidDrop(await iptablesStatics6(cidrs, kernel.netns, logger), render.tcpBeLiberal), counters);
    const render4 = localhost && counters.has(LOCALHOST_NODEPORTS_ACCEPTED) ? { ...render, countLocalhostNodePorts: true } : render;
    const backend = new DualStackIptablesBackend({
      IPv4: { exec: exec.IPv4, render: render4, statics },
      IPv6: { exec: exec.IPv6, render: ipv6RenderOptions(render, config.render.clusterCidr), statics: statics6 },
      logger,
    });
    return new RouteLocalnetBackend(backend, { netns: kernel.netns, sysctls: namespaceSysctls(kernel.netns) }, localhost, logger);
  },

  async render(snapshot, config, header) {
    const opts = config.render;
    const liberal = opts.conntrackTcpBeLiberal;
    const statics = withInvalidDrop(await iptablesStatics(opts.nodeportAddresses, undefined, undefined, nodePortLocalhost(config.modes)), liberal);
    let text = renderRestore(familyView(snapshot, 'IPv4'), renderConfig(opts), ['drover render: iptables-restore --noflush input', ...header], statics);
    // The IPv6 ruleset follows when the source has IPv6 service ports (dual-stack.ts).
    const v6 = familyView(snapshot, 'IPv6');
    if (v6.services.size > 0) text += renderRestore(v6, renderConfig(opts, 'IPv6'), ['drover render: ip6tables-restore --noflush input'], withInvalidDrop(await iptablesStatics6(opts.nodeportAddresses, undefined), liberal));
    return { text, leftOut: servedRefusals(snapshot) };
  },

  async chains(selector, opts) {
    const kernel6 = await readKernel6(opts);
    const all = serviceChains(await readKernel(opts, createLogger(opts.logLevel)));
    // A dual-stack service port owns chains in both families' tables: the IPv6 ones follow, their tables named "… (IPv6)".
    if (kernel6 !== undefined) for (const sp of serviceChains(kernel6)) all.push(ipv6Chains(sp));
    let found = selectServicePorts(all, selector);
    if (opts.source !== undefined) {
      const { snapshot, problems } = await loadSource({ source: opts.source, serviceCidr: opts.serviceCidr, serviceNodePortRange: opts.serviceNodePortRange, masqueradeAll: false });
      for (const p of problems) process.stderr.write(`drover: ${p}\n`);
      found = withPods(found, endpointPods(snapshot));
    }
    return opts.json ? `${JSON.stringify(found, null, 2)}\n` : formatChains(found);
  },

  /**
   * `trace`: the live filter and nat tables of `opts.family` (IPv4 unless
   * given: iptables-save; IPv6: ip6tables-save, as dual-stack.ts programs
   * the families apart) and the node's addresses of that family (live.ts
   * localAddresses: IPv6 ones of global scope only), in `--netns` when
   * given, as a trace context (trace.ts iptablesTraceContext, whose walk
   * throws RuleSyntaxError for a rule it cannot tokenise); line numbers are
   * those of `iptables-save -t TABLE`.
   * @throws UsageError when not root or the namespace does not exist (wiring.ts createIptablesExec);
   *   Error when iptables-save or `ip addr show` fails.
   */
  async trace(opts) {
    const family = opts.family ?? 'IPv4';
    const exec = await createIptablesExec(opts, createLogger(opts.logLevel), family);
    const [dump, local] = await Promise.all([readTables(exec), localAddresses(opts.netns, family)]);
    const save = family === 'IPv4' ? 'iptables-save' : 'ip6tables-save';
    return { ctx: iptablesTraceContext(dump, local), where: `line numbers are those of ${save} -t TABLE, iptables-${exec.variant}`, note: '' };
  },

  async diff(config) {
    const { kernel } = config;
    const { items, problems, incomplete } = await sourceDrift(config, kernel.netns, await readKernel(kernel, createLogger(kernel.logLevel)), await readKernel6(kernel));
    return { text: formatDrift(items), differs: items.length > 0, problems, incomplete };
  },

  async status(opts, recorded) {
    const kernel = await readKernel(opts, createLogger(opts.logLevel));
    const kernel6 = await readKernel6(opts);
    const drift = await driftOf(async () => (await sourceDrift(recorded, opts.netns, kernel, kernel6)).items.length);
    const { render } = recorded;
    const liberal = render.conntrackTcpBeLiberal;
    const rules = ownedRuleCounts(withInvalidDrop(await iptablesStatics(render.nodeportAddresses, opts.netns, undefined, nodePortLocalhost(recorded.modes)), liberal), kernel);
    const lines = kernel6 === undefined ? [] : ip6tablesStatusLines(ownedRuleCounts(withInvalidDrop(await iptablesStatics6(render.nodeportAddresses, opts.netns), liberal), kernel6));
    return { rules, drift, lines };
  },

  /**
   * `takeover`'s survey: per family, the chains and hook rules of kube-proxy's
   * iptables layout that `cleanup` would remove, in the variant `run` would
   * use (`--iptables-backend`, or the detected one), when nat holds
   * KUBE-NODEPORTS or a per-service chain. An IPv6 family ip6tables cannot
   * read is reported unread.
   */
  survey: (opts) => surveyLayout(opts, (family) => (family === 'IPv4' ? iptablesStatics(undefined, opts.netns) : iptablesStatics6(undefined, opts.netns)), isIptablesMarker),

  async fake(opts) {
    return (await import('./fake-mode.ts')).iptablesFakeMode(opts);
  },
};
