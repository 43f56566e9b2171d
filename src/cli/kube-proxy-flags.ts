/**
 * kube-proxy's command-line flags (kube-proxy 1.35: cmd/kube-proxy/app/
 * options.go AddFlags, with component-base's logging flags), and what
 * drover does with each: one table, read before commander parses the
 * command line, and listed in docs/kube-proxy.md. A flag drover has under
 * the same name is left as it is; an alias becomes drover's flag; a flag
 * with no effect on drover is dropped; a flag drover cannot honour is one
 * line naming it and what drover does instead (unless
 * `--config-unsupported=warn`).
 *
 * kube-proxy's flags are pflag flags: `--name=value` or `--name value`,
 * a switch as `--name`, `--name=true` or `--name=false`, and `-v` also as
 * `-v3` or `-v=3`.
 */

/** What drover does with one kube-proxy flag. */
export type FlagUse =
  | {
      /** drover's flag of the same name and meaning. */
      readonly use: 'same';
      readonly switch?: true;
    }
  | {
      /** Becomes drover's flag `to`; with `modes`, only when the mode in use is one of them (kube-proxy ignores it in the others). */
      readonly use: 'alias';
      readonly to: string;
      readonly switch?: true;
      readonly modes?: readonly string[];
    }
  | {
      /** Accepted and dropped: no effect on what drover does, for the reason given. */
      readonly use: 'ignored';
      readonly why: string;
      readonly switch?: true;
    }
  | {
      /** Refused, with what drover does instead, unless `accept` takes the value (one drover honours anyway; then dropped). */
      readonly use: 'refused';
      readonly why: string;
      readonly switch?: true;
      readonly accept?: (value: string) => boolean;
    }
  | {
      /** `--cleanup`: drover's `cleanup` command. */
      readonly use: 'cleanup';
      readonly switch: true;
    };

const notIPVS = ['iptables', 'nftables'];
const zero = (v: string): boolean => /^[+-]?0+(\.0*)?([a-zµμ]+)?$/.test(v);

/** Every flag of kube-proxy 1.35 on Linux, by its name without dashes. */
export const KUBE_PROXY_FLAGS: Readonly<Record<string, FlagUse>> = {
  config: { use: 'same' },
  'write-config-to': { use: 'refused', why: 'drover does not write configuration files; docs/kube-proxy.md lists every field' },
  cleanup: { use: 'cleanup', switch: true },
  'feature-gates': { use: 'refused', why: "drover has no feature gates; what kube-proxy 1.35's gates turn on by default, drover does" },
  kubeconfig: { use: 'same' },
  master: { use: 'same' },
  'kube-api-content-type': { use: 'ignored', why: "drover's client sends JSON; the content type changes nothing that is proxied" },
  'kube-api-burst': { use: 'ignored', why: 'drover only lists and watches, with no client-side rate limit to set' },
  'kube-api-qps': { use: 'ignored', why: 'drover only lists and watches, with no client-side rate limit to set' },
  'hostname-override': { use: 'same' },
  'bind-address': { use: 'same' },
  'healthz-bind-address': { use: 'same' },
  'metrics-bind-address': { use: 'same' },
  'bind-address-hard-fail': { use: 'ignored', why: 'drover always fails to start when it cannot listen on a bind address', switch: true },
  profiling: { use: 'refused', why: 'drover serves no /debug/pprof', switch: true, accept: (v) => v === 'false' },
  'show-hidden-metrics-for-version': { use: 'refused', why: 'drover has no hidden metrics' },
  'init-only': { use: 'refused', why: 'drover has no separate privileged start-up step', switch: true, accept: (v) => v === 'false' },
  'proxy-mode': { use: 'alias', to: '--mode' },
  'iptables-masquerade-bit': { use: 'refused', why: 'drover marks packets to masquerade with bit 14 (0x4000) in every mode, kube-proxy\'s default', accept: (v) => v === '14' },
  'masquerade-all': { use: 'same', switch: true },
  'iptables-localhost-nodeports': { use: 'alias', to: '--nodeport-localhost', switch: true, modes: ['iptables'] },
  'iptables-sync-period': { use: 'alias', to: '--sync-period', modes: notIPVS },
  'iptables-min-sync-period': { use: 'alias', to: '--min-sync-period', modes: notIPVS },
  'ipvs-sync-period': { use: 'alias', to: '--sync-period', modes: ['ipvs'] },
  'ipvs-min-sync-period': { use: 'alias', to: '--min-sync-period', modes: ['ipvs'] },
  // Not kube-proxy's (its nftables mode takes --iptables-sync-period), taken for symmetry.
  'nftables-sync-period': { use: 'alias', to: '--sync-period', modes: ['nftables'] },
  'nftables-min-sync-period': { use: 'alias', to: '--min-sync-period', modes: ['nftables'] },
  'ipvs-scheduler': { use: 'same' },
  'ipvs-exclude-cidrs': { use: 'refused', why: 'drover has no list of virtual servers to leave alone' },
  'ipvs-strict-arp': { use: 'refused', why: 'drover does not set arp_ignore and arp_announce; set them on the node', switch: true, accept: (v) => v === 'false' },
  'ipvs-tcp-timeout': { use: 'refused', why: 'drover leaves the IPVS timeouts as they are', accept: zero },
  'ipvs-tcpfin-timeout': { use: 'refused', why: 'drover leaves the IPVS timeouts as they are', accept: zero },
  'ipvs-udp-timeout': { use: 'refused', why: 'drover leaves the IPVS timeouts as they are', accept: zero },
  'detect-local-mode': { use: 'same' },
  'pod-bridge-interface': { use: 'refused', why: 'drover tells local traffic by its source address only (--detect-local-mode ClusterCIDR or NodeCIDR)' },
  'pod-interface-name-prefix': { use: 'refused', why: 'drover tells local traffic by its source address only (--detect-local-mode ClusterCIDR or NodeCIDR)' },
  'cluster-cidr': { use: 'same' },
  'nodeport-addresses': { use: 'same' },
  'oom-score-adj': { use: 'refused', why: "drover does not set its OOM score; set it where drover is started (systemd's OOMScoreAdjust=, the pod's priority class)" },
  'conntrack-max-per-core': { use: 'same' },
  'conntrack-min': { use: 'same' },
  'conntrack-tcp-timeout-established': { use: 'same' },
  'conntrack-tcp-timeout-close-wait': { use: 'same' },
  'conntrack-tcp-be-liberal': { use: 'same', switch: true },
  'conntrack-udp-timeout': { use: 'same' },
  'conntrack-udp-timeout-stream': { use: 'same' },
  'config-sync-period': { use: 'ignored', why: "drover's watches need no periodic relist; --full-sync-period is its periodic full read-back" },
  'healthz-port': { use: 'refused', why: 'deprecated in kube-proxy; give the port in --healthz-bind-address' },
  'metrics-port': { use: 'refused', why: 'deprecated in kube-proxy; give the port in --metrics-bind-address' },
  // component-base logging flags (logs/api/v1 AddFlags)
  v: { use: 'alias', to: '--verbosity' },
  vmodule: { use: 'refused', why: 'drover has no per-module verbosity' },
  'logging-format': { use: 'alias', to: '--log-format' },
  'log-flush-frequency': { use: 'ignored', why: 'drover writes each log line as it comes' },
  'log-text-split-stream': { use: 'refused', why: 'drover writes every log line to stderr', switch: true, accept: (v) => v === 'false' },
  'log-text-info-buffer-size': { use: 'ignored', why: 'drover writes each log line as it comes, unbuffered' },
  'log-json-split-stream': { use: 'refused', why: 'drover writes every log line to stderr', switch: true, accept: (v) => v === 'false' },
  'log-json-info-buffer-size': { use: 'ignored', why: 'drover writes each log line as it comes, unbuffered' },
};

/** A kube-proxy flag's use, or undefined for a name that is not one. */
export function kubeProxyFlag(name: string): FlagUse | undefined {
  return Object.hasOwn(KUBE_PROXY_FLAGS, name) ? KUBE_PROXY_FLAGS[name] : undefined;
}
