/**
 * IPVS mode's part of `drover takeover`'s survey (driver.ts
 * ModeDriver.survey): the iptables chains only kube-proxy's IPVS layout has
 * (pkg/proxy/ipvs/proxier.go: KUBE-NODE-PORT, KUBE-LOAD-BALANCER,
 * KUBE-IPVS-FILTER, KUBE-IPVS-OUT-FILTER, KUBE-SOURCE-RANGES-FIREWALL), the
 * dummy link kube-ipvs0, IPVS mode's ipsets, and the layout's virtual
 * servers (handover.ts). Those are read over netlink in this process's own
 * namespace only (wiring.ts): with `--netns`, the survey says so in its
 * `unread`.
 */
import { runCommand } from '../../kernel/exec.ts';
import type { TableName } from '../../kernel/iptables/parse.ts';
import { DUMMY_INTERFACE } from '../../kernel/rtnetlink/link.ts';
import type { IPFamily } from '../../model/types.ts';
import type { BackendConfig, ModeOptions, ModeSurvey } from '../driver.ts';
import { surveyLayout } from '../shared/kube-chains/survey.ts';
import { familySetName, IPVS_SETS } from './ipset.ts';
import { ipvsStaticRules } from './rules.ts';
import { surveyVirtualServers } from './handover.ts';

/** The chains only IPVS mode's layout has, per table. */
const IPVS_ONLY: Readonly<Record<TableName, readonly string[]>> = {
  nat: ['KUBE-NODE-PORT', 'KUBE-LOAD-BALANCER'],
  filter: ['KUBE-IPVS-FILTER', 'KUBE-IPVS-OUT-FILTER', 'KUBE-SOURCE-RANGES-FIREWALL'],
};

/** True for a chain of {@link IPVS_ONLY}. */
function isIpvsMarker(table: TableName, chain: string): boolean {
  return IPVS_ONLY[table].includes(chain);
}

/**
 * IPVS mode's state in the namespace of `opts.netns`: its chains (per
 * family, counted as cleanup removes them), kube-ipvs0 when the link exists,
 * those of IPVS mode's ipsets that exist (`ipset list -n`; unread when
 * ipset fails), and the layout's virtual servers (handover.ts: unread with
 * `--netns`; those outside the layout in `ignored`; `render.serviceCidr` as
 * cleanup's).
 * @throws UsageError when not root or the namespace does not exist; CommandError when iptables-save fails for IPv4.
 */
export async function ipvsSurvey(opts: ModeOptions, render: BackendConfig['render'] = {}): Promise<ModeSurvey> {
  const netns = opts.netns !== undefined ? { netns: opts.netns } : {};
  const { found, unread, elsewhere } = await surveyLayout(opts, (family) => ipvsStaticRules({ masqueradeAll: false }, undefined, family), isIpvsMarker, ' (IPVS layout)');
  const servers = await surveyVirtualServers(opts, render);
  unread.unshift(...servers.unread);
  const link = await runCommand('ip', ['-o', 'link', 'show', 'dev', DUMMY_INTERFACE], netns);
  if (link.code === 0) found.push(`link ${DUMMY_INTERFACE}`);
  const sets = await runCommand('ipset', ['list', '-n'], netns);
  if (sets.code !== 0) {
    unread.push(`ipsets: ipset list -n failed: ${sets.stderr.trim()}`);
  } else {
    const names = new Set(sets.stdout.split('\n'));
    const ours = (['IPv4', 'IPv6'] as IPFamily[]).flatMap((f) => IPVS_SETS.map((s) => familySetName(s.name, f))).filter((n) => names.has(n));
    if (ours.length > 0) found.push(`ipsets ${ours.join(', ')}`);
  }
  found.push(...servers.found);
  return { found, unread, elsewhere, ignored: servers.ignored, ...(servers.cannotRemove !== undefined ? { cannotRemove: servers.cannotRemove } : {}) };
}
