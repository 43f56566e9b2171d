/**
 * Pure rendering of one service port into kube-proxy's iptables layout
 * (pkg/proxy/iptables/proxier.go, syncProxyRules):
 *
 * - nat `KUBE-SERVICES`: one jump per ClusterIP:port with endpoints for
 *   ClusterIP traffic (model/policy.ts `internalEndpoints`: the cluster
 *   set, or this node's endpoints under internalTrafficPolicy Local),
 *   comment "ns/svc:port cluster IP";
 * - nat `KUBE-SVC-<hash>` (`KUBE-SVL-<hash>` under internalTrafficPolicy
 *   Local, with the local endpoints only): the masquerade mark for traffic from outside the
 *   cluster CIDR (or all traffic with masquerade-all), session-affinity
 *   `recent` checks, then one jump per endpoint, rule i of n with
 *   `-m statistic --mode random --probability 1/(n-i)` and the last one
 *   unconditional;
 * - nat `KUBE-SEP-<hash>`: the hairpin mark (`-s <endpoint>`) and the DNAT;
 * - filter `KUBE-SERVICES`: a REJECT for a ClusterIP with no endpoints, so
 *   that clients are refused at once instead of hanging; a DROP, comment
 *   "ns/svc:port has no local endpoints", under internalTrafficPolicy Local
 *   when endpoints exist but none on this node.
 *
 * Options are printed in the order iptables-save prints them back, so the
 * rendered rules and the kernel's read-back compare line for line (the only
 * exception is `--probability`, see canonical.ts).
 */
import { isCanonicalIPv4, isCanonicalIPv4CIDR } from '../../model/addr.ts';
import { internalEndpoints } from '../../model/policy.ts';
import type { NodeInfo, ServicePort } from '../../model/types.ts';
import { endpointChainName, localServiceChainName, serviceChainName } from './names.ts';
import { DroverError } from '../../errors.ts';

/** Options that change the rendered rules. */
export interface RenderOptions {
  /**
   * Pod network, CIDR (`--cluster-cidr`). Traffic to a ClusterIP from outside
   * it is marked for masquerade. Undefined: no such rule (as kube-proxy).
   */
  readonly clusterCIDR?: string;
  /** Mark all traffic to ClusterIPs for masquerade (`--masquerade-all`). */
  readonly masqueradeAll: boolean;
}

/** Everything drover programs for one service port. Rules are without the leading `-A CHAIN `. */
export interface ServiceRules {
  /** ServicePortName, "ns/name:port". */
  readonly key: string;
  /** The rule in nat KUBE-SERVICES, or null when the port has no serving endpoints. */
  readonly natJump: string | null;
  /** The REJECT (no endpoints) or DROP (no local endpoints) rule in filter KUBE-SERVICES, or null when ClusterIP traffic has endpoints. */
  readonly filterReject: string | null;
  /** nat chains (the KUBE-SVC chain, then one KUBE-SEP chain per endpoint) and their rules, in order. */
  readonly chains: ReadonlyMap<string, readonly string[]>;
}

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
const SAFE: Readonly<Record<'ip' | 'cidr' | 'key', (value: string) => boolean>> = {
  ip: isCanonicalIPv4,
  cidr: isCanonicalIPv4CIDR,
  key: (value) => SERVICE_PORT_KEY.test(value),
};

function safe(kind: keyof typeof SAFE, value: string): string {
  if (!SAFE[kind](value)) throw new UnsafeValueError(kind, value);
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
 * source describes none). Its endpoints are the endpoint policy's
 * (model/policy.ts `internalEndpoints`): this renderer never chooses them.
 * @throws UnsafeValueError if a value is not a valid IP, CIDR, port or service port name
 *   (the model rejects such input first; this is a second line of defence).
 */
export function renderServicePort(sp: ServicePort, opts: RenderOptions, node?: NodeInfo): ServiceRules {
  const key = safe('key', sp.key);
  const cip = safe('ip', sp.clusterIP);
  const port = safePort(sp.port);
  const proto = sp.protocol.toLowerCase();
  if (proto !== 'tcp' && proto !== 'udp' && proto !== 'sctp') throw new UnsafeValueError('protocol', sp.protocol);
  const dest = `-d ${cip}/32 -p ${proto}`;
  const dport = `-m ${proto} --dport ${port}`;
  const { policy, endpoints, none } = internalEndpoints(sp, node);

  if (none === 'REJECT') {
    return {
      key,
      natJump: null,
      filterReject: `${dest} -m comment --comment "${key} has no endpoints" ${dport} -j REJECT --reject-with icmp-port-unreachable`,
      chains: new Map(),
    };
  }
  if (none === 'DROP') {
    return { key, natJump: null, filterReject: `${dest} -m comment --comment "${key} has no local endpoints" ${dport} -j DROP`, chains: new Map() };
  }

  const svcChain = policy === 'local' ? localServiceChainName(key, proto) : serviceChainName(key, proto);
  const clusterComment = `-m comment --comment "${key} cluster IP"`;
  const svcRules: string[] = [];
  if (opts.masqueradeAll) {
    svcRules.push(`${dest} ${clusterComment} ${dport} -j KUBE-MARK-MASQ`);
  } else if (opts.clusterCIDR !== undefined) {
    svcRules.push(`! -s ${safe('cidr', opts.clusterCIDR)} ${dest} ${clusterComment} ${dport} -j KUBE-MARK-MASQ`);
  }

  const chains = new Map<string, readonly string[]>();
  const seps = endpoints.map((ep) => {
    const ip = safe('ip', ep.ip);
    const target = `${ip}:${safePort(ep.port)}`;
    return { ip, target, chain: endpointChainName(key, proto, target) };
  });
  const affinity = sp.sessionAffinity;
  if (affinity) {
    const seconds = affinity.timeoutSeconds;
    if (!Number.isInteger(seconds) || seconds < 1) throw new UnsafeValueError('affinity timeout', String(seconds));
    for (const sep of seps) {
      svcRules.push(
        `-m comment --comment "${key} -> ${sep.target}" -m recent --rcheck --seconds ${seconds} --reap --name ${sep.chain} --mask 255.255.255.255 --rsource -j ${sep.chain}`,
      );
    }
  }
  seps.forEach((sep, i) => {
    const stat = i < seps.length - 1 ? ` -m statistic --mode random --probability ${probability(i, seps.length)}` : '';
    svcRules.push(`-m comment --comment "${key} -> ${sep.target}"${stat} -j ${sep.chain}`);
  });
  chains.set(svcChain, svcRules);

  for (const sep of seps) {
    const recent = affinity ? ` -m recent --set --name ${sep.chain} --mask 255.255.255.255 --rsource` : '';
    chains.set(sep.chain, [
      `-s ${sep.ip}/32 -m comment --comment "${key}" -j KUBE-MARK-MASQ`,
      `-p ${proto} -m comment --comment "${key}"${recent} -m ${proto} -j DNAT --to-destination ${sep.target}`,
    ]);
  }

  return { key, natJump: `${dest} ${clusterComment} ${dport} -j ${svcChain}`, filterReject: null, chains };
}
