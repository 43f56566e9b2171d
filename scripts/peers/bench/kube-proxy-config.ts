/**
 * The KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1, the file of
 * `kube-proxy --config`) with which the peer bench runs the real kube-proxy
 * inside a node namespace: its defaults, except what would reach outside
 * that namespace or clash with another run:
 *
 * - every conntrack value 0 (`maxPerCore`, `min`, the TCP and UDP
 *   timeouts), which kube-proxy reads as "leave the kernel's value": the
 *   conntrack table size (`nf_conntrack_max`, `hashsize`) is the machine's,
 *   not the namespace's (cmd/kube-proxy/app/conntrack.go);
 * - the health and metrics servers on 127.0.0.1 of the namespace;
 * - `hostnameOverride` = the Node of that proxy, the kubeconfig given.
 *
 * `minSyncPeriod` is set only when asked (the bench's "minSyncPeriod: 0"
 * run); otherwise kube-proxy's default (1 s) applies.
 */

/** What {@link kubeProxyConfig} is given. */
export interface KubeProxyConfigSpec {
  readonly mode: 'iptables' | 'nftables' | 'ipvs';
  /** The Node's name (`hostnameOverride`). */
  readonly node: string;
  /** Path of the kubeconfig kube-proxy connects with. */
  readonly kubeconfig: string;
  /** `clusterCIDR`, e.g. 10.244.0.0/16. */
  readonly clusterCIDR: string;
  /** `minSyncPeriod` of the mode, ms; absent: kube-proxy's default. */
  readonly minSyncPeriodMs?: number;
}

const CIDR = /^[0-9.]+\/\d{1,2}$/;
const NODE = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/**
 * The configuration file's text (YAML, which JSON is: every value is
 * written as a JSON string or number).
 * @throws Error naming the field when `node`, `clusterCIDR`, `kubeconfig` or `minSyncPeriodMs` is malformed.
 */
export function kubeProxyConfig(spec: KubeProxyConfigSpec): string {
  if (!NODE.test(spec.node)) throw new Error(`kube-proxy configuration: node ${JSON.stringify(spec.node)} is not a valid Node name`);
  if (!CIDR.test(spec.clusterCIDR)) throw new Error(`kube-proxy configuration: clusterCIDR ${JSON.stringify(spec.clusterCIDR)} is not an IPv4 CIDR`);
  if (!spec.kubeconfig.startsWith('/')) throw new Error(`kube-proxy configuration: kubeconfig ${JSON.stringify(spec.kubeconfig)} is not an absolute path`);
  const min = spec.minSyncPeriodMs;
  if (min !== undefined && !(Number.isInteger(min) && min >= 0)) throw new Error(`kube-proxy configuration: minSyncPeriodMs ${String(min)} is not a whole number of ms ≥ 0`);
  const config: Record<string, unknown> = {
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
    kind: 'KubeProxyConfiguration',
    mode: spec.mode,
    hostnameOverride: spec.node,
    clusterCIDR: spec.clusterCIDR,
    clientConnection: { kubeconfig: spec.kubeconfig },
    conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s', udpTimeout: '0s', udpStreamTimeout: '0s' },
    healthzBindAddress: '127.0.0.1:10256',
    metricsBindAddress: '127.0.0.1:10249',
    ...(min !== undefined ? { [spec.mode]: { minSyncPeriod: `${min}ms` } } : {}),
  };
  return `${JSON.stringify(config, null, 2)}\n`;
}
