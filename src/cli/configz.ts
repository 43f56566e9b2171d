/**
 * What `drover run` serves at `/configz` on the metrics address, as
 * kube-proxy does (cmd/kube-proxy/app/server.go registers its effective
 * KubeProxyConfiguration with k8s.io/component-base/configz, which answers
 * `{"kubeproxy.config.k8s.io": {…}}`): the settings in effect, from the
 * flags and the configuration file together, under the field names of
 * kube-proxy's `kubeproxy.config.k8s.io/v1alpha1` and with Go's duration
 * text ("30s", "1m0s"). Only the fields drover has are shown; a field
 * kube-proxy has and drover does not is absent, not guessed.
 */
import type { BindAddress } from '../model/addr.ts';
import type { IPPrefix } from '../model/addr.ts';

/** The group name kube-proxy registers its configuration under (pkg/proxy/apis/config GroupName). */
export const CONFIGZ_GROUP = 'kubeproxy.config.k8s.io';

/** The options of `run` that /configz shows (commander's names; a mode's own flags ride along unnamed). */
export interface ConfigzOptions {
  readonly mode: string;
  readonly clusterCidr?: string;
  readonly hostnameOverride?: string;
  readonly kubeconfig?: string;
  /** Off: null, or "" as commander leaves it. */
  readonly metricsBindAddress: BindAddress | null | '';
  readonly healthzBindAddress: BindAddress | null | '';
  readonly nodeportAddresses?: readonly IPPrefix[];
  readonly masqueradeAll: boolean;
  /** ms */
  readonly syncPeriod: number;
  /** ms */
  readonly minSyncPeriod: number;
  readonly nodeportLocalhost?: boolean;
  /** IPVS mode's `--ipvs-scheduler`. */
  readonly ipvsScheduler?: string;
  /** `--detect-local-mode`; absent: ClusterCIDR. */
  readonly detectLocalMode?: string;
  /** `--bind-address`: the node's primary IPs given. */
  readonly bindAddress?: readonly string[];
  /** `--conntrack-tcp-be-liberal`. */
  readonly conntrackTcpBeLiberal?: boolean;
  /** The `--conntrack-*` settings (0: the kernel's left alone); the timeouts in ms. */
  readonly conntrackMaxPerCore?: number;
  readonly conntrackMin?: number;
  readonly conntrackTcpTimeoutEstablished?: number;
  readonly conntrackTcpTimeoutCloseWait?: number;
  readonly conntrackUdpTimeout?: number;
  readonly conntrackUdpTimeoutStream?: number;
}

/**
 * `opts` as a KubeProxyConfiguration under {@link CONFIGZ_GROUP}: `mode`,
 * `clusterCIDR`, `hostnameOverride`, `clientConnection.kubeconfig`, the
 * two bind addresses ("" when off), `bindAddress`, `detectLocalMode`,
 * `nodePortAddresses`, the sync periods at the top level and in the mode's
 * section, `masqueradeAll` in the section kube-proxy reads it from for the
 * mode (`iptables` for the iptables and IPVS modes, `nftables` for
 * nftables), `iptables.localhostNodePorts` (iptables mode),
 * `ipvs.scheduler` (IPVS mode) and `conntrack` (kube-proxy's
 * KubeProxyConntrackConfiguration: 0 leaves the kernel's value alone).
 */
export function configz(opts: ConfigzOptions): Record<string, unknown> {
  const periods = { syncPeriod: goDuration(opts.syncPeriod), minSyncPeriod: goDuration(opts.minSyncPeriod) };
  const iptables: Record<string, unknown> = opts.mode === 'nftables' ? {} : { masqueradeAll: opts.masqueradeAll };
  if (opts.mode === 'iptables') Object.assign(iptables, { localhostNodePorts: opts.nodeportLocalhost === true }, periods);
  const config: Record<string, unknown> = {
    mode: opts.mode,
    bindAddress: opts.bindAddress?.join(',') ?? '',
    detectLocalMode: opts.detectLocalMode ?? 'ClusterCIDR',
    clusterCIDR: opts.clusterCidr ?? '',
    hostnameOverride: opts.hostnameOverride ?? '',
    clientConnection: { kubeconfig: opts.kubeconfig ?? '' },
    metricsBindAddress: bindText(opts.metricsBindAddress),
    healthzBindAddress: bindText(opts.healthzBindAddress),
    nodePortAddresses: opts.nodeportAddresses?.map((p) => p.text) ?? null,
    ...periods,
    iptables,
    conntrack: {
      maxPerCore: opts.conntrackMaxPerCore ?? 0,
      min: opts.conntrackMin ?? 0,
      tcpEstablishedTimeout: goDuration(opts.conntrackTcpTimeoutEstablished ?? 0),
      tcpCloseWaitTimeout: goDuration(opts.conntrackTcpTimeoutCloseWait ?? 0),
      tcpBeLiberal: opts.conntrackTcpBeLiberal === true,
      udpTimeout: goDuration(opts.conntrackUdpTimeout ?? 0),
      udpStreamTimeout: goDuration(opts.conntrackUdpTimeoutStream ?? 0),
    },
  };
  if (opts.mode === 'ipvs') config.ipvs = { ...(opts.ipvsScheduler !== undefined ? { scheduler: opts.ipvsScheduler } : {}), ...periods };
  else if (opts.mode === 'nftables') config.nftables = { masqueradeAll: opts.masqueradeAll, ...periods };
  else if (opts.mode !== 'iptables') config[opts.mode] = periods;
  return { [CONFIGZ_GROUP]: config };
}

/**
 * "IP:PORT" ("[IPv6]:PORT"), or "" for a server that is off: null, or ""
 * (commander stores "" when an option's parser returns null for `--flag ""`).
 */
function bindText(bind: BindAddress | null | ''): string {
  if (!bind) return '';
  return bind.ip.family === 6 ? `[${bind.ip.text}]:${bind.port}` : `${bind.ip.text}:${bind.port}`;
}

/**
 * A duration in whole ms as Go's time.Duration String() writes it:
 * "0s", "500ms", "30s", "1m0s", "1m30.5s", "1h0m0s".
 */
export function goDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms < 1000) return `${ms}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = (ms % 60_000) / 1000;
  return `${h > 0 ? `${h}h` : ''}${h > 0 || m > 0 ? `${m}m` : ''}${s}s`;
}
