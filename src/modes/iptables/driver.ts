/**
 * iptables mode as the commands see it (driver.ts): kube-proxy's NAT chains
 * through `iptables-restore --noflush`, read back with `iptables-save`.
 */
import { iptablesMetrics } from './metrics.ts';
import { iptablesTraceContext } from './trace.ts';
import { createLogger } from '../../util/log.ts';
import { loadSource } from '../../sources/load.ts';
import { renderConfig } from '../shared/render-config.ts';
import { BENCH_CLUSTER_CIDR } from '../../bench/synth.ts';
import type { BenchSettings } from '../../bench/types.ts';
import type { ModeDriver, ModeOptions } from '../driver.ts';
import { IptablesBackend } from './backend.ts';
import { iptablesHarness } from './bench-harness.ts';
import { formatChains, selectServicePorts, serviceChains, withPods } from './chains.ts';
import { endpointPods } from '../../model/pods.ts';
import { driftItems, formatDrift, type DriftItem } from './diff.ts';
import type { ParsedDump } from './parse.ts';
import type { RenderCliOptions } from '../../cli/options.ts';
import { driftOf } from '../shared/drift.ts';
import { toIptablesVariant } from './exec.ts';
import { localAddresses, readTables } from './live.ts';
import { ownedRuleCounts, renderRestore, renderSnapshot } from './ruleset.ts';
import { iptablesStatics } from './node-ports.ts';
import { createIptablesExec, readKernel } from './wiring.ts';

/**
 * What the next full sync would write for the source of `opts` against
 * `kernel` (diff.ts driftItems, keeping what an incomplete source keeps),
 * and what of the source was skipped.
 * @throws Error when the source path is missing.
 */
async function sourceDrift(
  opts: RenderCliOptions & { readonly netns?: string },
  kernel: ParsedDump,
): Promise<{ items: DriftItem[]; problems: readonly string[]; incomplete: readonly string[] }> {
  const { snapshot, problems, incomplete } = await loadSource(opts);
  const statics = await iptablesStatics(opts.nodeportAddresses, opts.netns);
  const items = driftItems(statics, renderSnapshot(snapshot, renderConfig(opts)), kernel, { incomplete: incomplete.length > 0 });
  return { items, problems, incomplete };
}

/** The driver of `--mode iptables`. */
export const iptablesMode: ModeDriver = {
  name: 'iptables',
  title: 'iptables',
  options: { sync: () => [], compare: () => [] },
  metrics: iptablesMetrics,
  help: {
    render: '',
    chains: '',
    chainsJson:
      '[{"servicePort": "ns/name:port", "chains": [{"table": "nat"|"filter", "chain": "KUBE-…", ' +
      '"endpoint": "ip:port" (KUBE-SEP) or null, "pod": "namespace/name" (with --source, for an endpoint derived from a Pod), "rules": ["-A …"]}]}]',
    diff: '',
    trace: '',
    status: '',
    cleanup: '',
  },

  async createBackend(opts, render, logger) {
    const exec = await createIptablesExec(opts, logger);
    logger.info({ mode: opts.mode, iptables: exec.variant, netns: opts.netns }, 'using iptables-%s', exec.variant);
    const statics = await iptablesStatics(opts.nodeportAddresses as RenderCliOptions['nodeportAddresses'], opts.netns, logger);
    return new IptablesBackend({ exec, render, logger, statics });
  },

  runInfo: () => ({}),
  recordedOptions: () => ({}),

  async render(snapshot, opts, header) {
    const statics = await iptablesStatics(opts.nodeportAddresses, undefined);
    return { text: renderRestore(snapshot, renderConfig(opts), ['drover render: iptables-restore --noflush input', ...header], statics), leftOut: [] };
  },

  async chains(selector, opts) {
    let found = selectServicePorts(serviceChains(await readKernel(opts, createLogger(opts.logLevel))), selector);
    if (opts.source !== undefined) {
      const { snapshot, problems } = await loadSource({ source: opts.source, serviceCidr: opts.serviceCidr, masqueradeAll: false });
      for (const p of problems) process.stderr.write(`drover: ${p}\n`);
      found = withPods(found, endpointPods(snapshot));
    }
    return opts.json ? `${JSON.stringify(found, null, 2)}\n` : formatChains(found);
  },

  async trace(opts: ModeOptions) {
    const exec = await createIptablesExec(opts, createLogger(opts.logLevel));
    const [dump, local] = await Promise.all([readTables(exec), localAddresses(opts.netns)]);
    return { ctx: iptablesTraceContext(dump, local), where: `line numbers are those of iptables-save -t TABLE, iptables-${exec.variant}`, note: '' };
  },

  async diff(opts) {
    const { items, problems, incomplete } = await sourceDrift(opts, await readKernel(opts, createLogger(opts.logLevel)));
    return { text: formatDrift(items), differs: items.length > 0, problems, incomplete };
  },

  async status(opts, recorded) {
    const kernel = await readKernel(opts, createLogger(opts.logLevel));
    const drift = await driftOf(async () => (await sourceDrift({ ...recorded, ...(opts.netns ? { netns: opts.netns } : {}) }, kernel)).items.length);
    return { rules: ownedRuleCounts(await iptablesStatics(recorded.nodeportAddresses, opts.netns), kernel), drift, lines: [] };
  },

  bench: {
    placement: 'process',
    async createHarness({ netns, iptablesVariant }) {
      if (netns === undefined) throw new Error('the iptables bench harness programs the node namespace, which is missing');
      return iptablesHarness({ netns, variant: toIptablesVariant(iptablesVariant), render: { clusterCIDR: BENCH_CLUSTER_CIDR, masqueradeAll: false } });
    },
    unavailableReason: async () => undefined,
    methodText: (s: BenchSettings) => [
      '',
      'iptables mode (each timed from starting iptables-restore to its exit):',
      '',
      '- **raw minimal**: only what the change needs: the new or changed KUBE-SVC/KUBE-SEP chains, the deleted ones, and the one KUBE-SERVICES rule that comes or goes. This is the physical limit of a change through iptables-restore.',
      "- **kube-proxy-style**: what kube-proxy's partial sync writes: the static chains of both tables declared and rewritten, including the whole KUBE-SERVICES chain with one rule per service port, plus the changed chains.",
      `- **full re-render**: the whole ruleset re-sent with \`--noflush\` and every chain declared. On iptables-nft this grows much faster than the ruleset, so it is measured ${s.fullBaselineRepeats} time(s) per size, on a "service added" change only, and only up to ${s.fullBaselineMax} services (\`--full-baseline-max\`). It re-sends everything whatever the change, so its time stands for every kind of change.`,
    ],
  },
};
