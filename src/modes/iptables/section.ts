/**
 * iptables mode's section of the configuration (config/proxy-config.ts
 * ProxyConfig.modes): the settings of the flags the mode declares
 * (driver.ts `options`), read by the mode alone.
 */
import { modeSection, type ProxyConfig } from '../../config/proxy-config.ts';

/** The mode's name, its key in ProxyConfig.modes. */
export const IPTABLES_MODE = 'iptables';

/** iptables mode's own settings. */
export interface IptablesSection {
  /** `--nodeport-localhost` (kube-proxy's `iptables.localhostNodePorts`): NodePorts on 127.0.0.1 too (localhost.ts). */
  readonly nodeportLocalhost: boolean;
}

/** iptables mode's section of `modes`; undefined when there is none (`cleanup`, which takes none of the mode's flags). */
export function iptablesSection(modes: ProxyConfig['modes']): IptablesSection | undefined {
  const section = modeSection(modes, IPTABLES_MODE);
  return section === undefined ? undefined : { nodeportLocalhost: section.nodeportLocalhost === true };
}
