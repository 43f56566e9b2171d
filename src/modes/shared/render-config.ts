/** The render flags every mode shares (`--cluster-cidr`, `--masquerade-all`), as the renderers take them. */
import type { RenderCliOptions } from '../../cli/options.ts';
import type { RenderOptions } from '../iptables/render.ts';

/** Render options from the CLI flags. */
export function renderConfig(opts: RenderCliOptions): RenderOptions {
  return { masqueradeAll: opts.masqueradeAll, ...(opts.clusterCidr ? { clusterCIDR: opts.clusterCidr } : {}) };
}
