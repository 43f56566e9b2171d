/**
 * What `drover run` serves at `/configz` on the metrics address, as
 * kube-proxy does (cmd/kube-proxy/app/server.go registers its effective
 * KubeProxyConfiguration with k8s.io/component-base/configz, which answers
 * `{"kubeproxy.config.k8s.io": {…}}`): the settings in effect, from the
 * flags and the configuration file together, under the field names of
 * kube-proxy's `kubeproxy.config.k8s.io/v1alpha1` and with Go's duration
 * text ("30s", "1m0s"). Only the fields drover has are shown; a field
 * kube-proxy has and drover does not is absent, not guessed. It reads the
 * ProxyConfig `run` was built from; a mode's own settings are found through
 * the flags the mode declares, so this file names none of them.
 */
import type { BindAddress } from '../model/addr.ts';
import { modeSection, type ModeSection, type ProxyConfig, type SyncPeriods } from '../config/proxy-config.ts';
import type { ModeDriver } from '../modes/driver.ts';
import { modeDriver } from '../modes/registry.ts';
import { FIELDS } from './kube-proxy-fields.ts';
import { goDuration } from '../util/duration.ts';

/** The group name kube-proxy registers its configuration under (pkg/proxy/apis/config GroupName). */
export const CONFIGZ_GROUP = 'kubeproxy.config.k8s.io';

/** The configuration of `run` that /configz shows: its ProxyConfig, with the sync periods and the servers it always has. */
export type ConfigzConfig = Pick<ProxyConfig, 'kernel' | 'render' | 'conntrack' | 'modes'> & {
  readonly sync: SyncPeriods;
  /** A server off: null, or "" as commander leaves it. */
  readonly server: { readonly metricsBindAddress: BindAddress | null | ''; readonly healthzBindAddress: BindAddress | null | '' };
};

/**
 * `config` as a KubeProxyConfiguration under {@link CONFIGZ_GROUP}: `mode`,
 * `clusterCIDR`, `hostnameOverride`, `clientConnection.kubeconfig`, the
 * two bind addresses ("" when off), `bindAddress`, `detectLocalMode`,
 * `nodePortAddresses`, the sync periods at the top level and in the mode's
 * section, `masqueradeAll` in the section kube-proxy reads it from for the
 * mode (`iptables` for the iptables and IPVS modes, `nftables` for
 * nftables), the fields of the mode's own settings ({@link modeFields}:
 * `iptables.localhostNodePorts` in iptables mode, `ipvs.scheduler` in IPVS
 * mode) and `conntrack` (kube-proxy's KubeProxyConntrackConfiguration: 0
 * leaves the kernel's value alone).
 */
export function configz(config: ConfigzConfig): Record<string, unknown> {
  const { kernel, render, sync, conntrack } = config;
  const { mode } = kernel;
  const periods = { syncPeriod: goDuration(sync.syncPeriod), minSyncPeriod: goDuration(sync.minSyncPeriod) };
  const own = modeFields(modeDriver(mode), modeSection(config.modes, mode));
  const iptables: Record<string, unknown> = mode === 'nftables' ? {} : { masqueradeAll: render.masqueradeAll };
  if (mode === 'iptables') Object.assign(iptables, own.iptables, periods);
  const out: Record<string, unknown> = {
    mode,
    bindAddress: render.bindAddress?.join(',') ?? '',
    detectLocalMode: render.detectLocalMode ?? 'ClusterCIDR',
    clusterCIDR: render.clusterCidr ?? '',
    hostnameOverride: render.hostnameOverride ?? '',
    clientConnection: { kubeconfig: render.kubeconfig ?? '' },
    metricsBindAddress: bindText(config.server.metricsBindAddress),
    healthzBindAddress: bindText(config.server.healthzBindAddress),
    nodePortAddresses: render.nodeportAddresses?.map((p) => p.text) ?? null,
    ...periods,
    iptables,
    conntrack: {
      maxPerCore: conntrack.conntrackMaxPerCore ?? 0,
      min: conntrack.conntrackMin ?? 0,
      tcpEstablishedTimeout: goDuration(conntrack.conntrackTcpTimeoutEstablished ?? 0),
      tcpCloseWaitTimeout: goDuration(conntrack.conntrackTcpTimeoutCloseWait ?? 0),
      tcpBeLiberal: render.conntrackTcpBeLiberal === true,
      udpTimeout: goDuration(conntrack.conntrackUdpTimeout ?? 0),
      udpStreamTimeout: goDuration(conntrack.conntrackUdpTimeoutStream ?? 0),
    },
  };
  if (mode === 'nftables') out.nftables = { masqueradeAll: render.masqueradeAll, ...own.nftables, ...periods };
  else if (mode !== 'iptables') out[mode] = { ...own[mode], ...periods };
  return { [CONFIGZ_GROUP]: out };
}

/**
 * The fields of kube-proxy's configuration file that hold mode `mode`'s own
 * settings, by section and key, with their values in `section`: each field
 * of kube-proxy-fields.ts that becomes a flag the mode declares
 * (ModeDriver.options) and that kube-proxy reads in that mode. A switch not
 * in `section` is false; another setting not in it is left out. The value
 * is shown as the mode's section holds it (the flag's parsed value).
 */
export function modeFields(mode: Pick<ModeDriver, 'name' | 'options'>, section: ModeSection | undefined): Record<string, Record<string, unknown>> {
  const own = new Map(mode.options.sync().map((o) => [o.long, o]));
  const out: Record<string, Record<string, unknown>> = {};
  for (const [path, { rule }] of Object.entries(FIELDS)) {
    const option = rule.use === 'flag' && (rule.modes === undefined || rule.modes.includes(mode.name)) ? own.get(rule.flag) : undefined;
    if (option === undefined) continue;
    const value = section?.[option.attributeName()];
    const isSwitch = !option.required && !option.optional;
    if (!isSwitch && value === undefined) continue;
    const dot = path.lastIndexOf('.');
    (out[path.slice(0, dot)] ??= {})[path.slice(dot + 1)] = isSwitch ? value === true : value;
  }
  return out;
}

/**
 * "IP:PORT" ("[IPv6]:PORT"), or "" for a server that is off: null, or ""
 * (commander stores "" when an option's parser returns null for `--flag ""`).
 */
function bindText(bind: BindAddress | null | ''): string {
  if (!bind) return '';
  return bind.ip.family === 6 ? `[${bind.ip.text}]:${bind.port}` : `${bind.ip.text}:${bind.port}`;
}

