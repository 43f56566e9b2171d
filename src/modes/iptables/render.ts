/**
 * Pure rendering of one service port into kube-proxy's iptables layout
 * (pkg/proxy/iptables/proxier.go, syncProxyRules):
 *
 * - nat `KUBE-SERVICES`: the ClusterIP:port entry, comment "ns/svc:port
 *   cluster IP", to KUBE-SVC (KUBE-SVL under internalTrafficPolicy
 *   Local); one entry per external IP ("… external IP") to KUBE-EXT, and
 *   per LoadBalancer ingress IP in VIP mode ("… loadbalancer IP") to
 *   KUBE-EXT, or to KUBE-FW when `loadBalancerSourceRanges` is set;
 * - nat `KUBE-NODEPORTS`: the NodePort entry to KUBE-EXT (the hooks jump
 *   there for packets to a local address other than 127.0.0.0/8, see
 *   rules/iptables/static.rules), after the nfacct-counted one for
 *   127.0.0.0/8 with RenderOptions.countLocalhostNodePorts;
 * - nat `KUBE-EXT-<hash>`: masquerade then KUBE-SVC under
 *   externalTrafficPolicy Cluster; under Local, pods and this node itself
 *   short-circuit to KUBE-SVC, everything else goes to KUBE-SVL;
 * - nat `KUBE-FW-<hash>`: the allowed source ranges to KUBE-EXT;
 * - nat `KUBE-SVC-<hash>` (the cluster set) and `KUBE-SVL-<hash>` (this
 *   node's endpoints), each when some traffic uses it: the masquerade mark
 *   for ClusterIP traffic from outside the cluster CIDR (or all of it with
 *   masquerade-all) in the chain ClusterIP traffic uses, session-affinity
 *   `recent` checks, then one jump per endpoint, rule i of n with
 *   `-m statistic --mode random --probability 1/(n-i)` and the last one
 *   unconditional;
 * - nat `KUBE-SEP-<hash>`: the hairpin mark (`-s <endpoint>`) and the DNAT;
 * - filter `KUBE-SERVICES`: a REJECT for a ClusterIP with no endpoints, so
 *   that clients are refused at once instead of hanging; a DROP, comment
 *   "ns/svc:port has no local endpoints", under internalTrafficPolicy Local
 *   when endpoints exist but none on this node;
 * - filter `KUBE-EXTERNAL-SERVICES`: the same REJECT, or the DROP of
 *   externalTrafficPolicy Local, for the external frontends;
 * - filter `KUBE-PROXY-FIREWALL`: the DROP of LoadBalancer traffic the
 *   KUBE-FW chain did not accept;
 * - filter `KUBE-NODEPORTS`: the ACCEPT of the health check node port.
 *
 * Options are printed in the order iptables-save prints them back, so the
 * rendered rules and the kernel's read-back compare line for line (the only
 * exception is `--probability`, see canonical.ts).
 *
 * The IPv6 ruleset (RenderOptions.family, for ip6tables-restore) has the
 * same layout, as kube-proxy's IPv6 proxier writes it: host matches are
 * /128, a DNAT target is `[ip]:port` (and so are the endpoint names in
 * comments and KUBE-SEP hashes, net.JoinHostPort), REJECT is printed back
 * by ip6tables-save as `--reject-with icmp6-port-unreachable`, and the
 * `recent` mask is the 128-bit one.
 */
import { formatCIDR, isCanonicalIPv4, isCanonicalIPv4CIDR, parseCIDR, parseIP, type IPPrefix } from '../../model/addr.ts';
import { entriesOf, frontendEntries } from '../../model/frontend-index.ts';
import { needsHealthCheck } from '../../model/health-check.ts';
import { categorizeEndpoints, externallyAccessible, usesClusterEndpoints, usesLocalEndpoints } from '../../model/policy.ts';
import type { Endpoint, IPFamily, NodeInfo, ServicePort } from '../../model/types.ts';
import { endpointChainName, externalChainName, firewallChainName, localServiceChainName, serviceChainName } from '../shared/kube-chains/names.ts';
import type { RenderOptions } from '../../config/render.ts';
import { DroverError } from '../../errors.ts';
import { LOCALHOST_NODEPORTS_ACCEPTED, nfacctMatch } from './nfacct-names.ts';
import { flatString, flatStrings } from '../../util/flat-string.ts';
import type { ServiceRules, SharedRule } from '../shared/kube-chains/service-rules.ts';

/** Thrown when a value about to be written into a rule is not a safe token. */
export class UnsafeValueError extends DroverError {
  constructor(what: string, value: string) {
    super(`refusing to render ${what} ${JSON.stringify(value)}: not a valid token`);
    this.name = 'UnsafeValueError';
  }
}

// Values reach iptables-restore's line parser; the model validates them, and
// the renderer checks again so that nothing with a space, quote or newline
// can ever add options or lines. Addresses and CIDRs are checked by addr.ts.
const SERVICE_PORT_KEY = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?\/[a-z0-9]([-a-z0-9]*[a-z0-9])?(:[a-z0-9]([-a-z0-9]*[a-z0-9])?)?$/;

/** What differs between the IPv4 and the IPv6 ruleset (see the module comment). */
interface FamilySyntax {
  /** The prefix length of a match on one address. */
  readonly host: string;
  /** The REJECT target as iptables-save prints it back. */
  readonly reject: string;
  /** The `recent` module's `--mask` as iptables-save prints it back. */
  readonly mask: string;
  /** The address of a DNAT target or endpoint name: "ip" or "[ip]". */
  readonly hostPart: (ip: string) => string;
  /** True for an address / CIDR of this family in canonical text. */
  readonly ip: (value: string) => boolean;
  readonly cidr: (value: string) => boolean;
}

const SYNTAX: Readonly<Record<IPFamily, FamilySyntax>> = {
  IPv4: {
    host: '/32',
    reject: 'REJECT --reject-with icmp-port-unreachable',
    mask: '255.255.255.255',
    hostPart: (ip) => ip,
    ip: isCanonicalIPv4,
    cidr: isCanonicalIPv4CIDR,
  },
  IPv6: {
    host: '/128',
    reject: 'REJECT --reject-with icmp6-port-unreachable',
    mask: 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
    hostPart: (ip) => `[${ip}]`,
    ip: (value) => {
      const a = parseIP(value);
      return a?.family === 6 && a.text === value;
    },
    cidr: (value) => {
      const c = parseCIDR(value);
      return c?.prefix.family === 6 && c.prefix.text === value;
    },
  },
};

function safe(kind: 'ip' | 'cidr' | 'key', value: string, syntax: FamilySyntax = SYNTAX.IPv4): string {
  const ok = kind === 'key' ? SERVICE_PORT_KEY.test(value) : syntax[kind](value);
  if (!ok) throw new UnsafeValueError(kind, value);
  return value;
}

function safePort(value: number): number {
  if (!Number.isInteger(value) || value < 1 || value > 65535) throw new UnsafeValueError('port', String(value));
  return value;
}

/** kube-proxy's `%0.10f` probability of rule i (0-based) of n. */
export function probability(i: number, n: number): string {
  return (1 / (n - i)).toFixed(10);
}

/**
 * Render one service port on `node` (Snapshot.node; undefined when the
 * source describes none), every frontend of `opts.family` (default IPv4;
 * `sp` must be of that family's view, model/family.ts): the ClusterIP, the
 * NodePort, external IPs and LoadBalancer ingress IPs in VIP mode (with
 * `loadBalancerSourceRanges`), as kube-proxy's syncProxyRules writes them
 * (pkg/proxy/iptables/proxier.go). Its endpoints are the endpoint
 * policy's (model/policy.ts `categorizeEndpoints`): this renderer never
 * chooses them. Frontends and source ranges of the other family are left
 * to that family's ruleset, as kube-proxy's per-family proxiers leave them:
 * with only source ranges of the other family (or 0.0.0.0/0, ::/0 among
 * them) the LoadBalancer IPs take every client. The health check node port is accepted only for a Service that
 * needs one (model/health-check.ts needsHealthCheck).
 * @throws UnsafeValueError if a value is not a valid IP, CIDR, port or service port name
 *   (the model rejects such input first; this is a second line of defence).
 */
export function renderServicePort(sp: ServicePort, opts: RenderOptions, node?: NodeInfo): ServiceRules {
  const family = opts.family ?? 'IPv4';
  const syntax = SYNTAX[family];
  const key = safe('key', sp.key);
  const cip = safe('ip', sp.clusterIP, syntax);
  const port = safePort(sp.port);
  const proto = sp.protocol.toLowerCase();
  if (proto !== 'tcp' && proto !== 'udp' && proto !== 'sctp') throw new UnsafeValueError('protocol', sp.protocol);
  // The frontends are the model's (model/frontend-index.ts), in kube-proxy's order.
  const entries = frontendEntries(sp, family, node);
  const externalIPs = entriesOf(entries, 'ExternalIP').map((e) => safe('ip', e.address, syntax));
  const lbEntries = entriesOf(entries, 'LoadBalancer');
  const lbIPs = lbEntries.map((e) => safe('ip', e.address, syntax));
  const nodeEntry = entries.find((e) => e.kind === 'NodePort');
  const nodePort = nodeEntry === undefined ? undefined : safePort(nodeEntry.port);
  const healthPort = needsHealthCheck(sp) ? safePort(sp.frontends.healthCheckNodePort!) : undefined;
  // Every LoadBalancer entry of a service port has the same source ranges.
  const ranges = lbEntries[0]?.sourceRanges ?? [];
  const allowFromNode = lbEntries[0]?.allowFromNode === true;

  const sets = categorizeEndpoints(sp, node);
  const cluster = sets.cluster ?? [];
  const local = sets.local ?? [];
  const hasEndpoints = sets.hasAnyEndpoints;
  const internalLocal = sp.internalTrafficPolicy === 'Local';
  const externalLocal = sp.externalTrafficPolicy === 'Local';
  const clusterChain = serviceChainName(key, proto);
  const localChain = localServiceChainName(key, proto);
  const extChain = externalChainName(key, proto);
  const fwChain = firewallChainName(key, proto);
  const hasInternal = hasEndpoints && (!internalLocal || local.length > 0);
  const hasExternal = hasEndpoints && (!externalLocal || local.length > 0);
  const usesExt = hasEndpoints && externallyAccessible(sp);
  const usesFW = hasEndpoints && lbIPs.length > 0 && ranges.length > 0;
  const noneComment = hasEndpoints ? `"${key} has no local endpoints"` : `"${key} has no endpoints"`;
  const noneTarget = hasEndpoints ? 'DROP' : syntax.reject;

  const shared: SharedRule[] = [];
  // Every rule is made one piece in memory (util/flat-string.ts): a full sync holds every service port's rules at once.
  const nat = (chain: string, rule: string): void => void shared.push({ table: 'nat', chain, rule: flatString(rule) });
  const filter = (chain: string, rule: string): void => void shared.push({ table: 'filter', chain, rule: flatString(rule) });
  const host = syntax.host;
  const at = (ip: string, p: number, comment: string): string => `-d ${ip}${host} -p ${proto} -m comment --comment ${comment} -m ${proto} --dport ${p}`;
  const clusterComment = `"${key} cluster IP"`;

  if (hasInternal) nat('KUBE-SERVICES', `${at(cip, port, clusterComment)} -j ${internalLocal ? localChain : clusterChain}`);
  if (hasEndpoints) for (const ip of externalIPs) nat('KUBE-SERVICES', `${at(ip, port, `"${key} external IP"`)} -j ${extChain}`);
  if (hasEndpoints) for (const ip of lbIPs) nat('KUBE-SERVICES', `${at(ip, port, `"${key} loadbalancer IP"`)} -j ${usesFW ? fwChain : extChain}`);
  if (nodePort !== undefined && hasEndpoints && opts.countLocalhostNodePorts === true && family === 'IPv4') {
    nat('KUBE-NODEPORTS', `-d 127.0.0.0/8 -p ${proto} -m comment --comment "${key}" -m ${proto} --dport ${nodePort} ${nfacctMatch(LOCALHOST_NODEPORTS_ACCEPTED)} -j ${extChain}`);
  }
  if (nodePort !== undefined && hasEndpoints) nat('KUBE-NODEPORTS', `-p ${proto} -m comment --comment "${key}" -m ${proto} --dport ${nodePort} -j ${extChain}`);

  // Without endpoints anywhere both kinds of traffic are rejected; with some, but none here for a Local policy, dropped.
  if (!hasInternal) filter('KUBE-SERVICES', `${at(cip, port, noneComment)} -j ${noneTarget}`);
  if (!hasExternal) {
    for (const ip of [...externalIPs, ...lbIPs]) filter('KUBE-EXTERNAL-SERVICES', `${at(ip, port, noneComment)} -j ${noneTarget}`);
    if (nodePort !== undefined) {
      filter('KUBE-EXTERNAL-SERVICES', `-p ${proto} -m comment --comment ${noneComment} -m addrtype --dst-type LOCAL -m ${proto} --dport ${nodePort} -j ${noneTarget}`);
    }
  }
  if (usesFW) for (const ip of lbIPs) filter('KUBE-PROXY-FIREWALL', `${at(ip, port, `"${key} traffic not accepted by ${fwChain}"`)} -j DROP`);
  if (healthPort !== undefined) filter('KUBE-NODEPORTS', `-p tcp -m comment --comment "${key} health check node port" -m tcp --dport ${healthPort} -j ACCEPT`);

  const chains = new Map<string, readonly string[]>();
  if (usesExt) chains.set(extChain, externalRules(key, clusterChain, localChain, externalLocal, hasExternal, opts, syntax));
  if (usesFW) chains.set(fwChain, firewallRules(key, extChain, lbIPs, ranges, allowFromNode, syntax));

  const seps = new Map<Endpoint, Sep>();
  const sepOf = (ep: Endpoint): Sep => {
    let sep = seps.get(ep);
    if (!sep) {
      const ip = safe('ip', ep.ip, syntax);
      const target = `${syntax.hostPart(ip)}:${safePort(ep.port)}`;
      sep = { ip, target, chain: endpointChainName(key, proto, target) };
      seps.set(ep, sep);
    }
    return sep;
  };
  const masquerade = opts.masqueradeAll
    ? `-d ${cip}${host} -p ${proto} -m comment --comment ${clusterComment} -m ${proto} --dport ${port} -j KUBE-MARK-MASQ`
    : opts.clusterCIDR !== undefined
      ? `! -s ${safe('cidr', opts.clusterCIDR, syntax)} -d ${cip}${host} -p ${proto} -m comment --comment ${clusterComment} -m ${proto} --dport ${port} -j KUBE-MARK-MASQ`
      : undefined;
  // The chain ClusterIP traffic uses gets the masquerade rule (kube-proxy writes it into internalTrafficChain only).
  if (cluster.length > 0 && usesClusterEndpoints(sp)) {
    chains.set(clusterChain, policyRules(key, cluster.map(sepOf), sp, hasInternal && !internalLocal ? masquerade : undefined, syntax));
  }
  if (local.length > 0 && usesLocalEndpoints(sp)) {
    chains.set(localChain, policyRules(key, local.map(sepOf), sp, hasInternal && internalLocal ? masquerade : undefined, syntax));
  }
  const affinity = sp.sessionAffinity !== null;
  for (const ep of sets.allReachable) {
    const sep = sepOf(ep);
    const recent = affinity ? ` -m recent --set --name ${sep.chain} --mask ${syntax.mask} --rsource` : '';
    chains.set(sep.chain, [
      `-s ${sep.ip}${host} -m comment --comment "${key}" -j KUBE-MARK-MASQ`,
      `-p ${proto} -m comment --comment "${key}"${recent} -m ${proto} -j DNAT --to-destination ${sep.target}`,
    ]);
  }
  for (const rules of chains.values()) flatStrings(rules);
  return { key, shared, chains };
}

/** An endpoint's KUBE-SEP chain, address and "ip:port" ("[ip]:port" for IPv6). */
interface Sep {
  readonly ip: string;
  readonly target: string;
  readonly chain: string;
}

/**
 * A KUBE-SVC or KUBE-SVL chain: the masquerade rule when given, the
 * session-affinity `recent` checks, then one jump per endpoint, rule i of
 * n with `-m statistic --mode random --probability 1/(n-i)` and the last
 * one unconditional (kube-proxy's writeServiceToEndpointRules).
 */
function policyRules(key: string, seps: readonly Sep[], sp: ServicePort, masquerade: string | undefined, syntax: FamilySyntax): string[] {
  const rules: string[] = masquerade === undefined ? [] : [masquerade];
  const affinity = sp.sessionAffinity;
  if (affinity) {
    const seconds = affinity.timeoutSeconds;
    if (!Number.isInteger(seconds) || seconds < 1) throw new UnsafeValueError('affinity timeout', String(seconds));
    for (const sep of seps) {
      rules.push(
        `-m comment --comment "${key} -> ${sep.target}" -m recent --rcheck --seconds ${seconds} --reap --name ${sep.chain} --mask ${syntax.mask} --rsource -j ${sep.chain}`,
      );
    }
  }
  seps.forEach((sep, i) => {
    const stat = i < seps.length - 1 ? ` -m statistic --mode random --probability ${probability(i, seps.length)}` : '';
    rules.push(`-m comment --comment "${key} -> ${sep.target}"${stat} -j ${sep.chain}`);
  });
  return rules;
}

/**
 * The KUBE-EXT chain: under externalTrafficPolicy Cluster, masquerade and
 * go to KUBE-SVC; under Local, traffic from pods (`--cluster-cidr`) and
 * from this node itself (masqueraded) goes to KUBE-SVC, everything else to
 * KUBE-SVL, and to nothing when there is no local endpoint (filter
 * KUBE-EXTERNAL-SERVICES then drops it).
 */
function externalRules(
  key: string,
  clusterChain: string,
  localChain: string,
  externalLocal: boolean,
  hasExternal: boolean,
  opts: RenderOptions,
  syntax: FamilySyntax,
): string[] {
  const rules: string[] = [];
  if (!externalLocal) {
    rules.push(`-m comment --comment "masquerade traffic for ${key} external destinations" -j KUBE-MARK-MASQ`);
  } else {
    if (opts.clusterCIDR !== undefined) {
      rules.push(`-s ${safe('cidr', opts.clusterCIDR, syntax)} -m comment --comment "pod traffic for ${key} external destinations" -j ${clusterChain}`);
    }
    rules.push(`-m comment --comment "masquerade LOCAL traffic for ${key} external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ`);
    rules.push(`-m comment --comment "route LOCAL traffic for ${key} external destinations" -m addrtype --src-type LOCAL -j ${clusterChain}`);
  }
  if (hasExternal) rules.push(`-j ${externalLocal ? localChain : clusterChain}`);
  return rules;
}

/**
 * The KUBE-FW chain: one jump to KUBE-EXT per source range of the family,
 * the LoadBalancer IPs themselves as sources when a range holds this node's
 * InternalIP of the family (`allowFromNode`, model/frontend-index.ts: a VIP
 * that loops back from the node), and a last rule with no target: what
 * falls through is dropped by filter KUBE-PROXY-FIREWALL.
 */
function firewallRules(key: string, ext: string, lbIPs: readonly string[], ranges: readonly IPPrefix[], allowFromNode: boolean, syntax: FamilySyntax): string[] {
  const comment = `-m comment --comment "${key} loadbalancer IP"`;
  const rules = ranges.map((prefix) => `-s ${safe('cidr', formatCIDR(prefix), syntax)} ${comment} -j ${ext}`);
  if (allowFromNode) for (const ip of lbIPs) rules.push(`-s ${ip}${syntax.host} ${comment} -j ${ext}`);
  rules.push(`-m comment --comment "other traffic to ${key} will be dropped by KUBE-PROXY-FIREWALL"`);
  return rules;
}
