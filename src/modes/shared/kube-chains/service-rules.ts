/**
 * What kube-proxy's iptables layout holds for one service port: its rules
 * in the chains every service port shares and its own chains. iptables
 * mode renders them (modes/iptables/render.ts); the layout diff
 * (ruleset.ts, diff.ts) compares them with the kernel's.
 */

/**
 * One rule a service port owns in a chain shared by every service port
 * (ruleset.ts SET_CHAINS: KUBE-SERVICES, KUBE-NODEPORTS,
 * KUBE-EXTERNAL-SERVICES, KUBE-PROXY-FIREWALL), without the leading
 * `-A CHAIN `.
 */
export interface SharedRule {
  readonly table: 'filter' | 'nat';
  readonly chain: string;
  readonly rule: string;
}

/** Everything drover programs for one service port. Rules are without the leading `-A CHAIN `. */
export interface ServiceRules {
  /** ServicePortName, "ns/name:port". */
  readonly key: string;
  /**
   * Its rules in the shared chains, in order: nat KUBE-SERVICES (cluster IP,
   * external IPs, LoadBalancer IPs), nat KUBE-NODEPORTS, filter
   * KUBE-SERVICES (REJECT or DROP of the cluster IP), filter
   * KUBE-EXTERNAL-SERVICES, filter KUBE-PROXY-FIREWALL, filter
   * KUBE-NODEPORTS (the health check node port).
   */
  readonly shared: readonly SharedRule[];
  /** nat chains (KUBE-EXT, KUBE-FW, KUBE-SVC, KUBE-SVL, then one KUBE-SEP chain per endpoint) and their rules, in order. */
  readonly chains: ReadonlyMap<string, readonly string[]>;
}

/** The rule of `rules` in `table` `chain` that is the service port's ClusterIP entry or REJECT/DROP; undefined when it has none. */
export function sharedRule(rules: ServiceRules, table: SharedRule['table'], chain = 'KUBE-SERVICES'): string | undefined {
  return rules.shared.find((r) => r.table === table && r.chain === chain)?.rule;
}
