/**
 * The source and render settings of the commands that read manifests and
 * render rules (`--source`, `--cluster-cidr`, `--nodeport-addresses`, ...):
 * what the flags and kube-proxy's configuration file fill (cli/options.ts,
 * cli/config-file.ts parse them), read by the sources and the modes.
 */
import type { IPPrefix } from '../model/addr.ts';
import type { NodePortRange } from '../model/claims.ts';

/** Options of the commands that read manifests and render rules. */
export type RenderCliOptions = {
  /** `--source`: a manifest path, or a source URL (sources/select.ts). */
  readonly source: string;
  /** `--nodeport-addresses`; absent or empty: every address; `primary` until cli/node-settings.ts resolves it. */
  readonly nodeportAddresses?: NodePortAddresses;
  /** `--state-dir`: where the allocation state file is (sources/allocation-state.ts); absent: /var/lib/drover. */
  readonly stateDir?: string;
  /** `--kubeconfig`, for `--source kubernetes` (sources/kubernetes/config.ts). */
  readonly kubeconfig?: string;
  /** `--hostname-override`: this node's name (default: the host name). */
  readonly hostnameOverride?: string;
  /** `--list-timeout` of the one-shot commands, ms: how long to wait for the first lists of an API source. */
  readonly listTimeout?: number;
  readonly clusterCidr?: string;
  readonly masqueradeAll: boolean;
  readonly serviceCidr: string;
  /** `--detect-local-mode` (kube-proxy's): local traffic is from `--cluster-cidr` (ClusterCIDR, the default) or from the Node's `spec.podCIDRs` (NodeCIDR). */
  readonly detectLocalMode?: DetectLocalMode;
  /** `--bind-address` (kube-proxy's): the node's primary IP of each family given, overriding its Node's; unspecified addresses left out. */
  readonly bindAddress?: readonly string[];
  /** `--master` (kube-proxy's), for `--source kubernetes`: the API server's URL, overriding the kubeconfig's. */
  readonly master?: string;
  /** `--file-follow-external-links`: a manifest folder's symlinks may lead out of it (sources/links.ts). */
  readonly fileFollowExternalLinks?: boolean;
  /** `--poll-interval` of `run`, ms: time between two reads of a source that cannot be watched (sources/shepherd.ts). */
  readonly pollInterval?: number;
  /** `--file-settle` of `run`, ms: how long a manifest file written in place must be unchanged before it is applied (sources/file.ts). */
  readonly fileSettle?: number;
  /** `--service-node-port-range`: the NodePorts a Service may have (model/claims.ts); absent: 30000-32767, and with the Kubernetes source every port (sources/kubernetes/create.ts). */
  readonly serviceNodePortRange?: NodePortRange;
  /** `--conntrack-tcp-be-liberal` (kube-proxy's `conntrack.tcpBeLiberal`): no drop of conntrack-INVALID packets, and nf_conntrack_tcp_be_liberal=1 in `run` and `sync`. */
  readonly conntrackTcpBeLiberal?: boolean;
};

/** kube-proxy's detectLocalMode values drover takes (pkg/proxy/apis/config LocalModeClusterCIDR, LocalModeNodeCIDR). */
export const DETECT_LOCAL_MODES = ['ClusterCIDR', 'NodeCIDR'] as const;
export type DetectLocalMode = (typeof DETECT_LOCAL_MODES)[number];

/**
 * `--nodeport-addresses` as parsed: CIDRs, or, for kube-proxy's `primary`,
 * an empty list marked `primary` that cli/node-settings.ts replaces with the
 * node's primary addresses once the Node is read (an unresolved one is
 * never handed to a mode: createSyncBackend refuses it).
 */
export type NodePortAddresses = readonly IPPrefix[] & { readonly primary?: true };

/** kube-proxy's keyword for the node's primary IPs in `--nodeport-addresses` (pkg/proxy/apis/config NodePortAddressesPrimary). */
export const NODEPORT_PRIMARY = 'primary';
