/**
 * The names of kube-proxy's nfacct counters and the match that feeds one
 * (pkg/proxy/metrics/metrics.go, pkg/proxy/iptables/proxier.go); what they
 * count is told in nfacct.ts. A module of its own, free of imports, so that
 * render.ts can name them.
 */

/** kube-proxy's counter of packets the INVALID drop dropped (metrics.IPTablesCTStateInvalidDroppedNFAcctCounter). */
export const CT_STATE_INVALID_DROPPED = 'ct_state_invalid_dropped_pkts';

/** kube-proxy's counter of packets accepted on localhost NodePorts (metrics.LocalhostNodePortAcceptedNFAcctCounter). */
export const LOCALHOST_NODEPORTS_ACCEPTED = 'localhost_nps_accepted_pkts';

/** kube-proxy's counters, in the order it ensures them. */
export const KUBE_PROXY_COUNTERS = [CT_STATE_INVALID_DROPPED, LOCALHOST_NODEPORTS_ACCEPTED] as const;

/** One of kube-proxy's counters. */
export type KubeProxyCounter = (typeof KUBE_PROXY_COUNTERS)[number];

/** The counters the kernel holds for drover, which its rules may name. */
export type CounterSet = ReadonlySet<KubeProxyCounter>;

/** The match that feeds counter `name`, as kube-proxy writes it. */
export function nfacctMatch(name: KubeProxyCounter): string {
  return `-m nfacct --nfacct-name ${name}`;
}

