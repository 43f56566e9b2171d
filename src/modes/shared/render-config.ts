/** The render flags every mode shares (`--cluster-cidr`, `--masquerade-all`, `--conntrack-tcp-be-liberal`), as the renderers take them. */
import type { RenderCliOptions } from '../../config/render-cli.ts';
import type { IPFamily } from '../../model/types.ts';
import type { RenderOptions } from '../../config/render.ts';

/**
 * Render options from the CLI flags, for the ruleset of `family` (default
 * IPv4): `--cluster-cidr` may list one CIDR per family ("10.244.0.0/16,
 * fd00:10:244::/56", as kube-proxy's clusterCIDR), and each family's
 * ruleset takes its own; the IPv6 options carry `family: 'IPv6'`.
 */
export function renderConfig(opts: Pick<RenderCliOptions, 'clusterCidr' | 'masqueradeAll' | 'conntrackTcpBeLiberal'>, family: IPFamily = 'IPv4'): RenderOptions {
  const cidr = opts.clusterCidr?.split(',').find((c) => c.includes(':') === (family === 'IPv6'));
  return {
    masqueradeAll: opts.masqueradeAll,
    ...(cidr ? { clusterCIDR: cidr } : {}),
    ...(family === 'IPv6' ? { family } : {}),
    ...(opts.conntrackTcpBeLiberal === true ? { tcpBeLiberal: true } : {}),
  };
}
