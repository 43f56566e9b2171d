/**
 * What the read-only commands (chains, trace, diff, status) share in IPVS
 * mode: reading the live state in this process's network namespace, and
 * the desired IPVS state of a source (desired.ts, as a sync computes it).
 */
import { desiredIpvsState } from './assemble.ts';
import type { DesiredIpvsState } from './desired.ts';
import { iptablesModeStatics, ipvsStaticRules } from './rules.ts';
import { nodeAddresses } from './node-ips.ts';
import { ipv6DriftWanted, ipvsDrift, joinIpvsDrift, type IpvsDrift } from './diff.ts';
import { readIpvsLive, type IpvsLive } from './live.ts';
import { createLogger } from '../../util/log.ts';
import type { KernelOptions } from '../../config/kernel.ts';
import type { RenderCliOptions } from '../../config/render-cli.ts';
import { loadSource } from '../../sources/load.ts';
import { endpointPods } from '../../model/pods.ts';
import { familyView } from '../../model/family.ts';
import type { IPFamily } from '../../model/types.ts';
import { renderConfig } from '../shared/render-config.ts';
import { createIpvsInspectIO } from './wiring.ts';

/**
 * Read the live IPVS-mode state (ipvs-live.ts) and close the sockets.
 * @param tables also read the filter and nat tables
 * @throws UsageError for `--netns`, no IPVS or no root; the readers' errors.
 */
export async function readIpvsKernel(opts: KernelOptions, tables: boolean): Promise<IpvsLive> {
  const io = await createIpvsInspectIO(opts, createLogger(opts.logLevel));
  try {
    return await readIpvsLive(io, { tables });
  } finally {
    io.close();
  }
}

/**
 * The desired IPVS state of a source on this host (NodePorts on its
 * addresses, node-ips.ts): of its IPv4 view (`desired`) and of its IPv6
 * view (`desired6`, the IPv6 family's), the source's problems (one line
 * each), what of it could not be read, and the Pod of each endpoint
 * derived from one (model/pods.ts endpointPods).
 */
export async function loadDesiredIpvs(
  opts: RenderCliOptions & { ipvsScheduler: string },
): Promise<{ desired: DesiredIpvsState; desired6: DesiredIpvsState; problems: string[]; incomplete: readonly string[]; pods: ReadonlyMap<string, string> }> {
  const { snapshot, problems, incomplete } = await loadSource(opts);
  const of = (family: IPFamily) => desiredIpvsState(familyView(snapshot, family), { scheduler: opts.ipvsScheduler, nodeAddresses: nodeAddresses(undefined, undefined, family) }, family);
  return { desired: of('IPv4'), desired6: of('IPv6'), problems, incomplete, pods: endpointPods(snapshot) };
}

/**
 * The drift of `live` from the source, as a full IPVS sync with these flags
 * would see it (diff.ts): the IPv4 side, then, when a sync would touch it
 * (diff.ts ipv6DriftWanted), the IPv6 side with its ip6tables rules (their
 * tables named "nat (IPv6)", "filter (IPv6)"). When `ip6tables-save` could
 * not read the IPv6 tables, their rules are not compared and a problem line
 * says why.
 * @throws Error for an unreadable source; IpsetTypeError.
 */
export async function ipvsDriftFromSource(
  opts: RenderCliOptions & { ipvsScheduler: string },
  live: IpvsLive,
): Promise<{ drift: IpvsDrift; problems: string[]; incomplete: readonly string[] }> {
  const { desired, desired6, problems, incomplete } = await loadDesiredIpvs(opts);
  const drift4 = ipvsDrift(desired, live, {
    serviceCIDR: opts.serviceCidr,
    hostAddresses: nodeAddresses(undefined).hostAddresses,
    rules: { statics: ipvsStaticRules(renderConfig(opts)), iptablesStatics: iptablesModeStatics('IPv4') },
    incomplete: incomplete.length > 0,
  });
  if (!ipv6DriftWanted(desired6, live)) return { drift: drift4, problems, incomplete };
  // The IPv6 side: its virtual and real servers, KUBE-6- sets, /128 addresses and ip6tables rules (static6.rules).
  const unreadable = live.tables6Error !== undefined;
  const drift6 = ipvsDrift(desired6, live, {
    family: 'IPv6',
    hostAddresses: nodeAddresses(undefined, undefined, 'IPv6').hostAddresses,
    ...(unreadable ? {} : { rules: { statics: ipvsStaticRules(renderConfig(opts, 'IPv6'), undefined, 'IPv6'), iptablesStatics: iptablesModeStatics('IPv6') } }),
    incomplete: incomplete.length > 0,
  });
  const noRules6 = unreadable ? [`the IPv6 side's ip6tables rules were not compared: ${live.tables6Error}`] : [];
  return { drift: joinIpvsDrift(drift4, drift6), problems: [...problems, ...noRules6], incomplete };
}
