/**
 * Every field of kube-proxy's configuration file (KubeProxyConfiguration,
 * kubeproxy.config.k8s.io/v1alpha1: staging/src/k8s.io/kube-proxy/config/
 * v1alpha1/types.go, with component-base's ClientConnectionConfiguration and
 * LoggingConfiguration), and what drover does with it: one table, read by
 * config-file.ts and listed in docs/kube-proxy.md.
 *
 * A field is either used (it becomes the default of a drover flag, so a
 * flag on the command line still wins), accepted with no effect (what it
 * sets makes no difference to drover, or kube-proxy itself does not use it
 * on Linux), or refused: a value drover cannot honour is one line naming
 * the field, unless `--config-unsupported=warn`. The mode-specific sections
 * apply as kube-proxy's v1alpha1 conversion applies them
 * (pkg/proxy/apis/config/v1alpha1/conversion.go): the sync periods of the
 * mode in use, `nftables.masqueradeAll` in nftables mode and
 * `iptables.masqueradeAll` in the others. Those fill settings of every mode
 * (config/proxy-config.ts); a mode's own settings are the fields whose
 * flags the mode declares (ModeDriver.options), such as
 * `iptables.localhostNodePorts` and `ipvs.scheduler`, and land in that
 * mode's section of the configuration.
 */

/** How a field's value becomes a flag's text (a boolean for a switch). @throws Error for a value of the wrong shape. */
export type FieldText = (value: unknown) => string | boolean;

/** What drover does with one field. */
export type FieldUse =
  | {
      /** Becomes the default of `flag`, through the flag's own parser. */
      readonly use: 'flag';
      readonly flag: string;
      readonly text: FieldText;
      /** Only in these modes (kube-proxy reads the field in them only); in the others it has no effect. */
      readonly modes?: readonly string[];
      /** A value drover cannot honour, with why; undefined when it can. */
      readonly refuse?: (value: unknown) => string | undefined;
      /** When no command has `flag`, the values drover honours anyway (e.g. JSON logs); others are refused. */
      readonly withoutFlag?: (value: unknown) => boolean;
    }
  | {
      /** Accepted: no effect on what drover does, for the reason given (docs/kube-proxy.md). */
      readonly use: 'ignored';
      readonly why: string;
    }
  | {
      /** Refused when set, unless `accept` takes the value (one drover honours anyway). */
      readonly use: 'refused';
      readonly why: string;
      readonly accept?: (value: unknown) => boolean;
      /** Only in these modes (kube-proxy reads the field in them only); in the others it has no effect. */
      readonly modes?: readonly string[];
    };

/** One field of the file. */
export interface FieldRule {
  readonly rule: FieldUse;
  /**
   * A pointer field of kube-proxy's types (`*int32`, `*bool`,
   * `*metav1.Duration`): only `null` is "not set", and 0 or false is a value
   * (kube-proxy defaults only a nil pointer). Other fields: a zero value
   * (`0`, `""`, `"0s"`, `false`, `[]`, `{}`) is not set, as kube-proxy's
   * defaulting reads them.
   */
  readonly pointer?: true;
  /** The value is a map (featureGates) or a list, read whole: its keys are not fields. */
  readonly whole?: true;
}

const str = (v: unknown): string => {
  if (typeof v !== 'string') throw new Error(`expected a string, got ${JSON.stringify(v)}`);
  return v;
};
const bool = (v: unknown): boolean => {
  if (typeof v !== 'boolean') throw new Error(`expected true or false, got ${JSON.stringify(v)}`);
  return v;
};
/** An integer, as the flag's decimal text. */
const int = (v: unknown): string => {
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new Error(`expected an integer, got ${JSON.stringify(v)}`);
  return String(v);
};
/** A list of strings, as the flag's comma-separated text. */
const list = (v: unknown): string => {
  if (!Array.isArray(v) || v.some((e) => typeof e !== 'string')) throw new Error(`expected a list of strings, got ${JSON.stringify(v)}`);
  return (v as string[]).join(',');
};
/** A Go duration, given to the flag's parser as it is (util/duration.ts). */
const duration = str;

/** kube-proxy accepts "IP" alone for its bind addresses and adds the default port (proxyutil.AppendPortIfNeeded). */
const bindAddress =
  (defaultPort: number) =>
  (v: unknown): string => {
    const s = str(v).trim();
    if (s === '') return '';
    if (/^[0-9.]+$/.test(s)) return `${s}:${defaultPort}`;
    if (/^[0-9A-Fa-f:]+$/.test(s) && s.includes(':') && !/\]:/.test(s)) return `[${s}]:${defaultPort}`;
    return s;
  };

/** The masquerade bit drover marks with in every mode (0x4000), kube-proxy's default. */
export const MASQUERADE_BIT = 14;
const masqueradeBit = (modes: readonly string[]): FieldUse => ({
  use: 'refused',
  why: `drover marks packets to masquerade with bit ${MASQUERADE_BIT} (0x4000) in every mode, kube-proxy's default`,
  accept: (v) => v === MASQUERADE_BIT,
  modes,
});
/** A field of the ipvs section that drover's IPVS mode does not honour. */
const ipvsOnly = (why: string): FieldUse => ({ use: 'refused', why, modes: ['ipvs'] });

/** A Windows-only field: kube-proxy on Linux does not read it either. */
const windows: FieldUse = { use: 'ignored', why: 'Windows only; kube-proxy on Linux does not read it either' };

/** The conntrack fields: each becomes kube-proxy's flag of the same meaning, which drover's conntrack settings take. */
const conntrack = (flag: string, text: FieldText): FieldUse => ({ use: 'flag', flag, text });

/** The modes that take `iptables.syncPeriod`, `iptables.masqueradeAll` (kube-proxy's default branch: every mode but the one with its own section). */
const NOT_NFTABLES = ['iptables', 'ipvs'];

/**
 * Every field, by its dotted path. A section (an object of fields) is
 * walked; a path that is neither a field nor a section is an unknown field.
 */
export const FIELDS: Readonly<Record<string, FieldRule>> = {
  apiVersion: { rule: { use: 'ignored', why: 'checked: kubeproxy.config.k8s.io/v1alpha1' } },
  kind: { rule: { use: 'ignored', why: 'checked: KubeProxyConfiguration' } },
  featureGates: { rule: { use: 'refused', why: "drover has no feature gates; what kube-proxy 1.35's gates turn on by default, drover does" }, whole: true },

  'clientConnection.kubeconfig': { rule: { use: 'flag', flag: '--kubeconfig', text: str } },
  'clientConnection.acceptContentTypes': { rule: { use: 'ignored', why: "drover's client asks for JSON; the content type changes nothing that is proxied" } },
  'clientConnection.contentType': { rule: { use: 'ignored', why: "drover's client sends JSON; the content type changes nothing that is proxied" } },
  'clientConnection.qps': { rule: { use: 'ignored', why: 'drover only lists and watches (three watches), with no client-side rate limit to set' } },
  'clientConnection.burst': { rule: { use: 'ignored', why: 'drover only lists and watches (three watches), with no client-side rate limit to set' } },

  'logging.format': { rule: { use: 'flag', flag: '--log-format', text: str, withoutFlag: (v) => v === 'json' } },
  'logging.flushFrequency': { rule: { use: 'ignored', why: 'drover writes each log line as it comes' } },
  'logging.verbosity': { rule: { use: 'flag', flag: '--verbosity', text: int } },
  'logging.vmodule': { rule: { use: 'refused', why: 'drover has no per-module verbosity' }, whole: true },
  'logging.options.text.splitStream': { rule: { use: 'refused', why: 'drover writes every log line to stderr' } },
  'logging.options.text.infoBufferSize': { rule: { use: 'ignored', why: 'drover writes each log line as it comes, unbuffered' } },
  'logging.options.json.splitStream': { rule: { use: 'refused', why: 'drover writes every log line to stderr' } },
  'logging.options.json.infoBufferSize': { rule: { use: 'ignored', why: 'drover writes each log line as it comes, unbuffered' } },

  hostnameOverride: { rule: { use: 'flag', flag: '--hostname-override', text: str } },
  bindAddress: { rule: { use: 'flag', flag: '--bind-address', text: str } },
  healthzBindAddress: { rule: { use: 'flag', flag: '--healthz-bind-address', text: bindAddress(10256) } },
  metricsBindAddress: { rule: { use: 'flag', flag: '--metrics-bind-address', text: bindAddress(10249) } },
  bindAddressHardFail: { rule: { use: 'ignored', why: 'drover always fails to start when it cannot listen on a bind address' } },
  enableProfiling: { rule: { use: 'refused', why: 'drover serves no /debug/pprof' } },
  showHiddenMetricsForVersion: { rule: { use: 'refused', why: 'drover has no hidden metrics' } },

  mode: { rule: { use: 'flag', flag: '--mode', text: str } },

  'iptables.masqueradeBit': { rule: masqueradeBit(NOT_NFTABLES), pointer: true },
  'iptables.masqueradeAll': { rule: { use: 'flag', flag: '--masquerade-all', text: bool, modes: NOT_NFTABLES } },
  'iptables.localhostNodePorts': { rule: { use: 'flag', flag: '--nodeport-localhost', text: bool, modes: ['iptables'] }, pointer: true },
  'iptables.snatNodeInternalIP': {
    rule: { use: 'refused', why: "drover masquerades to the address of the outgoing interface, not the node's InternalIP", accept: (v) => v === false },
    pointer: true,
  },
  'iptables.syncPeriod': { rule: { use: 'flag', flag: '--sync-period', text: duration, modes: ['iptables'] } },
  'iptables.minSyncPeriod': { rule: { use: 'flag', flag: '--min-sync-period', text: duration, modes: ['iptables'] } },

  'ipvs.syncPeriod': { rule: { use: 'flag', flag: '--sync-period', text: duration, modes: ['ipvs'] } },
  'ipvs.minSyncPeriod': { rule: { use: 'flag', flag: '--min-sync-period', text: duration, modes: ['ipvs'] } },
  'ipvs.scheduler': { rule: { use: 'flag', flag: '--ipvs-scheduler', text: str } },
  'ipvs.excludeCIDRs': { rule: ipvsOnly('drover has no list of virtual servers to leave alone'), whole: true },
  'ipvs.strictARP': { rule: ipvsOnly('drover does not set arp_ignore and arp_announce; set them on the node') },
  'ipvs.tcpTimeout': { rule: ipvsOnly('drover leaves the IPVS timeouts as they are') },
  'ipvs.tcpFinTimeout': { rule: ipvsOnly('drover leaves the IPVS timeouts as they are') },
  'ipvs.udpTimeout': { rule: ipvsOnly('drover leaves the IPVS timeouts as they are') },

  'nftables.masqueradeBit': { rule: masqueradeBit(['nftables']), pointer: true },
  'nftables.masqueradeAll': { rule: { use: 'flag', flag: '--masquerade-all', text: bool, modes: ['nftables'] } },
  'nftables.syncPeriod': { rule: { use: 'flag', flag: '--sync-period', text: duration, modes: ['nftables'] } },
  'nftables.minSyncPeriod': { rule: { use: 'flag', flag: '--min-sync-period', text: duration, modes: ['nftables'] } },

  'winkernel.networkName': { rule: windows },
  'winkernel.sourceVip': { rule: windows },
  'winkernel.enableDSR': { rule: windows },
  'winkernel.rootHnsEndpointName': { rule: windows },
  'winkernel.forwardHealthCheckVip': { rule: windows },
  windowsRunAsService: { rule: windows },

  detectLocalMode: { rule: { use: 'flag', flag: '--detect-local-mode', text: str, refuse: (v) => (v === 'ClusterCIDR' || v === 'NodeCIDR' ? undefined : 'drover tells local traffic by its source address only: ClusterCIDR or NodeCIDR') } },
  'detectLocal.bridgeInterface': { rule: { use: 'ignored', why: 'read only with detectLocalMode BridgeInterface, which drover refuses' } },
  'detectLocal.interfaceNamePrefix': { rule: { use: 'ignored', why: 'read only with detectLocalMode InterfaceNamePrefix, which drover refuses' } },
  clusterCIDR: { rule: { use: 'flag', flag: '--cluster-cidr', text: str } },
  nodePortAddresses: { rule: { use: 'flag', flag: '--nodeport-addresses', text: list }, whole: true },

  oomScoreAdj: { rule: { use: 'refused', why: "drover does not set its OOM score; set it where drover is started (systemd's OOMScoreAdjust=, the pod's priority class)" }, pointer: true },
  'conntrack.maxPerCore': { rule: conntrack('--conntrack-max-per-core', int), pointer: true },
  'conntrack.min': { rule: conntrack('--conntrack-min', int), pointer: true },
  'conntrack.tcpEstablishedTimeout': { rule: conntrack('--conntrack-tcp-timeout-established', duration), pointer: true },
  'conntrack.tcpCloseWaitTimeout': { rule: conntrack('--conntrack-tcp-timeout-close-wait', duration), pointer: true },
  'conntrack.tcpBeLiberal': { rule: conntrack('--conntrack-tcp-be-liberal', bool) },
  'conntrack.udpTimeout': { rule: conntrack('--conntrack-udp-timeout', duration) },
  'conntrack.udpStreamTimeout': { rule: conntrack('--conntrack-udp-timeout-stream', duration) },
  configSyncPeriod: { rule: { use: 'ignored', why: "drover's watches need no periodic relist; --full-sync-period is its periodic full read-back" } },
  portRange: { rule: { use: 'ignored', why: 'unused by kube-proxy too (it configured the userspace proxy)' } },

  // drover's own section, which kube-proxy does not have: the node DNS (docs/dns.md).
  'drover.dns.address': { rule: { use: 'flag', flag: '--dns-address', text: str } },
  'drover.dns.port': { rule: { use: 'flag', flag: '--dns-port', text: int } },
  'drover.dns.clusterDomain': { rule: { use: 'flag', flag: '--cluster-domain', text: str } },
  'drover.dns.ttl': { rule: { use: 'flag', flag: '--dns-ttl', text: int } },
  'drover.dns.upstreams': { rule: { use: 'flag', flag: '--dns-upstream', text: list }, whole: true },
  'drover.dns.interceptClusterDns': { rule: { use: 'flag', flag: '--dns-intercept-cluster-dns', text: bool } },
  'drover.dns.clusterDns': { rule: { use: 'flag', flag: '--cluster-dns', text: str } },
};

/** The sections: every proper prefix of a field's path. */
export const SECTIONS: ReadonlySet<string> = new Set(
  Object.keys(FIELDS).flatMap((path) => {
    const parts = path.split('.');
    return parts.slice(1).map((_, i) => parts.slice(0, i + 1).join('.'));
  }),
);

/** A field's rule, or undefined for a path that is not a field (Object's own members included). */
export function fieldRule(path: string): FieldRule | undefined {
  return Object.hasOwn(FIELDS, path) ? FIELDS[path] : undefined;
}
