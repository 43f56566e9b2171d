/**
 * What changes the rendered rules in every mode (`--cluster-cidr`,
 * `--masquerade-all`, `--conntrack-tcp-be-liberal`, the IP family), as the
 * renderers of iptables, IPVS and nftables mode take it.
 */
import type { IPFamily } from '../model/types.ts';

/** Options that change the rendered rules. */
export interface RenderOptions {
  /**
   * Pod network, CIDR (`--cluster-cidr`). Traffic to a ClusterIP from outside
   * it is marked for masquerade. Undefined: no such rule (as kube-proxy).
   */
  readonly clusterCIDR?: string;
  /** Mark all traffic to ClusterIPs for masquerade (`--masquerade-all`). */
  readonly masqueradeAll: boolean;
  /**
   * The IP family of the ruleset: IPv4 (the default, for iptables-restore)
   * or IPv6 (for ip6tables-restore). The service ports rendered must be of
   * the same family's view (model/family.ts), and `clusterCIDR` of it.
   */
  readonly family?: IPFamily;
  /**
   * `conntrack.tcpBeLiberal` (`--conntrack-tcp-be-liberal`): leave out the
   * drop of conntrack-INVALID packets that every mode writes otherwise
   * (iptables and IPVS modes: the first rule of filter KUBE-FORWARD;
   * nftables mode: the first rule of chain `filter-forward`), as kube-proxy
   * does when nf_conntrack_tcp_be_liberal is set (pkg/proxy/iptables,
   * ipvs and nftables proxier.go; kubernetes issues 74839 and 117924).
   * drover then sets that sysctl itself (conntrack/sysctls.ts).
   */
  readonly tcpBeLiberal?: boolean;
  /**
   * iptables mode: count the packets accepted on localhost NodePorts, as
   * kube-proxy does with nfacct: each NodePort with endpoints gets, before
   * its entry in nat KUBE-NODEPORTS, the same jump for destinations in
   * 127.0.0.0/8 with `-m nfacct --nfacct-name localhost_nps_accepted_pkts`.
   * The caller sets it only with localhost NodePorts on
   * (modes/iptables/localhost.ts) and the counter created
   * (modes/iptables/nfacct.ts ensureCounters); IPv4 only, as kube-proxy:
   * ignored for IPv6 and by the other modes.
   */
  readonly countLocalhostNodePorts?: boolean;
}

/** The render options of the IPv6 ruleset: `--masquerade-all` as for IPv4, the IPv6 entry of `--cluster-cidr` (a comma-separated list). */
export function ipv6RenderOptions(render: RenderOptions, clusterCidr: string | undefined): RenderOptions {
  const cidr = clusterCidr?.split(',').find((c) => c.includes(':'));
  return { masqueradeAll: render.masqueradeAll, family: 'IPv6', ...(cidr !== undefined ? { clusterCIDR: cidr } : {}), ...(render.tcpBeLiberal === true ? { tcpBeLiberal: true } : {}) };
}
