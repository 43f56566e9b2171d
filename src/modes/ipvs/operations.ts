/**
 * What IPVS mode does with rules and the kernel (driver.ts loads this
 * module when a command first needs it): virtual and real servers
 * over generic netlink, kube-ipvs0 and ipsets, after kube-proxy's IPVS
 * proxier (pkg/proxy/ipvs/proxier.go). Everything runs in drover's own
 * network namespace (wiring.ts).
 */
import { loadSource } from '../../sources/load.ts';
import { familyView, IP_FAMILIES } from '../../model/family.ts';
import type { IPFamily, Snapshot } from '../../model/types.ts';
import type { RenderCliOptions } from '../../config/render-cli.ts';
import type { NodeAddresses } from './frontends.ts';
import { renderConfig } from '../shared/render-config.ts';
import { createLogger } from '../../util/log.ts';
import { localAddresses } from '../../kernel/iptables/live.ts';
import { ip6tablesStatusLines, ownedRuleCounts } from '../shared/kube-chains/ruleset.ts';
import { selectServicePorts, UnknownServiceError } from '../shared/kube-chains/chains.ts';
import type { DesiredConfig, ModeOperations } from '../driver.ts';
import { driftOf } from '../shared/drift.ts';
import { desiredIpvsState } from './assemble.ts';
import { refusalText, settleView } from '../../model/frontend-index.ts';
import { formatIpvsChains, ipvsServicePortViews } from './chains.ts';
import type { DesiredIpvsState } from './desired.ts';
import { formatIpvsDrift, ipvsDriftCount } from './diff.ts';
import { ipvsDriftFromSource, loadDesiredIpvs, readIpvsKernel } from './inspect.ts';
import { nodeAddresses } from './node-ips.ts';
import { CLUSTER_IP_SET, familySetName, LOOP_BACK_SET } from './ipset.ts';
import { DUMMY_INTERFACE } from '../../kernel/rtnetlink/link.ts';
import { ipvsCounts, unsupportedNote, type IpvsCounts } from './live.ts';
import { ipvsSection } from './options.ts';
import { renderIpvs } from './render.ts';
import { ipvsStaticRules } from './rules.ts';
import { ipvsTraceContext, ipvsTraceFormat } from './trace.ts';
import { createIpvsBackend } from './wiring.ts';
import { ipvsSurvey } from './survey.ts';
import { drainIpvs } from './handover.ts';

/** "1 entry", "2 entries". */
function count(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

/**
 * The IPVS lines of `drover status`: virtual and real servers (both
 * families), ipset entries (KUBE-CLUSTER-IP and KUBE-LOOP-BACK always, each
 * frontend set only when it is missing or has entries; the IPv6 family's
 * KUBE-6- sets only when they exist and, but for KUBE-6-CLUSTER-IP and
 * KUBE-6-LOOP-BACK, have entries), kube-ipvs0 addresses.
 */
export function ipvsStatusLines(c: IpvsCounts): Array<[string, string]> {
  const always = new Set<string>([CLUSTER_IP_SET, LOOP_BACK_SET]);
  const always6 = new Set([CLUSTER_IP_SET, LOOP_BACK_SET].map((s) => familySetName(s, 'IPv6')));
  const sets = Object.entries(c.sets).filter(([name, n]) => (name.startsWith('KUBE-6-') ? n !== null && (always6.has(name) || n !== 0) : always.has(name) || n !== 0));
  const entries = sets.reduce((sum, [, n]) => sum + (n ?? 0), 0);
  return [
    ['ipvs', `${count(c.virtualServers, 'virtual server', 'virtual servers')}, ${count(c.realServers, 'real server', 'real servers')}${c.quiesced > 0 ? ` (${c.quiesced} at weight 0)` : ''} in the kernel`],
    ['ipsets', `${count(entries, 'entry', 'entries')} (${sets.map(([name, n]) => `${name} ${n ?? 'missing'}`).join(', ')})`],
    [DUMMY_INTERFACE, c.addresses === null ? 'missing' : count(c.addresses, 'address', 'addresses')],
  ];
}

/**
 * `drover render --mode ipvs`: the IPv4 view of the snapshot (render.ts),
 * then, when it has IPv6 service ports, the IPv6 view under a comment line,
 * each with its family's NodePort addresses (`addresses`, node-ips.ts), as
 * a sync here would program them; and the service ports left out. Pure
 * apart from `addresses`.
 */
export function renderIpvsFamilies(
  snapshot: Snapshot,
  config: { readonly render: Pick<RenderCliOptions, 'clusterCidr' | 'masqueradeAll' | 'conntrackTcpBeLiberal'>; readonly modes: DesiredConfig['modes'] },
  header: readonly string[],
  addresses: (family: IPFamily) => NodeAddresses,
): { text: string; leftOut: string[] } {
  let text = '';
  const leftOut: string[] = [];
  const scheduler = ipvsSection(config.modes).ipvsScheduler;
  for (const family of IP_FAMILIES) {
    const view = familyView(snapshot, family);
    if (family === 'IPv6' && view.services.size === 0) continue;
    // The frontends the model's index refuses (the same lines in every mode), then what the virtual servers leave out besides.
    const refused = settleView(view, family).refusals;
    leftOut.push(...refused.map((r) => refusalText(r, family)));
    const named = new Set(refused.map((r) => r.servicePort));
    const desired = desiredIpvsState(view, { scheduler, nodeAddresses: addresses(family) }, family);
    const head = family === 'IPv4' ? ['drover render --mode ipvs: what a full sync writes onto an empty node', ...header] : ['the IPv6 view of the source (kube-ipvs0 is shared; sets, rules and virtual servers are the IPv6 family\'s)'];
    text += renderIpvs(desired, ipvsStaticRules(renderConfig(config.render, family), undefined, family), head, family);
    leftOut.push(...desired.conflicts.filter((c) => !named.has(c)).map((c) => `service port ${c}${family === 'IPv6' ? ' (IPv6)' : ''}: one of its addresses:port/protocol (ClusterIP, external IP, LoadBalancer IP or NodePort) belongs to another service port; left out there`));
  }
  return { text, leftOut };
}

/** The settings of `config` a drift from the source is computed with: the render settings and IPVS mode's scheduler from its section. */
function driftOptions(config: DesiredConfig): RenderCliOptions & { ipvsScheduler: string } {
  return { ...config.render, ipvsScheduler: ipvsSection(config.modes).ipvsScheduler };
}

/** The operations of `--mode ipvs` (driver.ts). */
export const ipvsOperations: ModeOperations = {
  createBackend: (opts, render, logger) => createIpvsBackend(opts, render, logger),

  render(snapshot, config, header) {
    return renderIpvsFamilies(snapshot, config, header, (family) => nodeAddresses(undefined, undefined, family));
  },

  async chains(selector, opts) {
    if (selector !== undefined && opts.source === undefined) {
      throw new UnknownServiceError(`selecting ${selector} in IPVS mode needs --source: IPVS keeps no service names`);
    }
    let desired: DesiredIpvsState | undefined;
    let pods: ReadonlyMap<string, string> | undefined;
    if (opts.source !== undefined) {
      const loaded = await loadDesiredIpvs({ source: opts.source, serviceCidr: opts.serviceCidr, serviceNodePortRange: opts.serviceNodePortRange, masqueradeAll: false, ipvsScheduler: 'rr' });
      for (const p of loaded.problems) process.stderr.write(`drover: ${p}\n`);
      // Both families' virtual servers, each named by its service port.
      desired = {
        ...loaded.desired,
        virtualServers: new Map([...loaded.desired.virtualServers, ...loaded.desired6.virtualServers]),
        withheld: new Map([...loaded.desired.withheld, ...loaded.desired6.withheld]),
      };
      pods = loaded.pods;
    }
    const live = await readIpvsKernel(opts, false);
    process.stderr.write(unsupportedNote(live, 'not shown'));
    const views = selectServicePorts(ipvsServicePortViews(live, desired?.virtualServers, pods, desired?.withheld), selector, 'in --source');
    return opts.json ? `${JSON.stringify(views, null, 2)}\n` : formatIpvsChains(views, desired !== undefined);
  },

  /**
   * `trace`: the live tables of `opts.family` (IPv4 unless given:
   * iptables-save; IPv6: ip6tables-save, whose rules match the KUBE-6- sets,
   * dual-stack.ts), every ipset, the node's addresses of that family
   * (iptables/live.ts localAddresses: kube-ipvs0's /32 or /128 among them)
   * and the virtual servers (those of the packet's family are the only ones
   * its key can find), as a trace context with IPVS as its dataplane.
   * @throws UsageError as readIpvsKernel; Error when `ip6tables-save` cannot
   *   read the IPv6 tables for an IPv6 trace, or `ip addr show` fails.
   */
  async trace(opts) {
    const family = opts.family ?? 'IPv4';
    const [live, local] = await Promise.all([readIpvsKernel(opts, true), localAddresses(undefined, family)]);
    if (family === 'IPv6' && live.tables6Error !== undefined) throw new Error(`trace --mode ipvs of an IPv6 connection: the IPv6 tables cannot be read: ${live.tables6Error}`);
    const save = family === 'IPv6' ? 'ip6tables-save' : 'iptables-save';
    return {
      ctx: ipvsTraceContext(live, local, family),
      format: ipvsTraceFormat,
      where: `line numbers are those of ${save} -t TABLE; IPVS as read over netlink, ipsets as ipset save lists them`,
      // A fwmark virtual server takes packets by their mark, which trace does not follow.
      note: unsupportedNote(live, 'not evaluated (the trace assumes none of them takes the packet)'),
    };
  },

  async diff(config) {
    const live = await readIpvsKernel(config.kernel, true);
    const { drift, problems, incomplete } = await ipvsDriftFromSource(driftOptions(config), live);
    return { text: formatIpvsDrift(drift), differs: ipvsDriftCount(drift) > 0, problems, incomplete };
  },

  survey: ipvsSurvey,
  drain: drainIpvs,

  async status(opts, recorded) {
    const live = await readIpvsKernel(opts, true);
    const drift = await driftOf(async () => ipvsDriftCount((await ipvsDriftFromSource(driftOptions(recorded), live)).drift));
    const rules6 = ip6tablesStatusLines(ownedRuleCounts(ipvsStaticRules(renderConfig(recorded.render, 'IPv6'), undefined, 'IPv6'), live.tables6));
    return { rules: ownedRuleCounts(ipvsStaticRules(renderConfig(recorded.render)), live.tables), drift, lines: [...ipvsStatusLines(ipvsCounts(live)), ...rules6] };
  },

  async fake(opts) {
    return (await import('./fake-mode.ts')).ipvsFakeMode(opts);
  },
};
