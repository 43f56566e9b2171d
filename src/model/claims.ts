/**
 * Frontend ownership, decided once for every mode and command: which
 * Service keeps each frontend (address · protocol · port) that several
 * Services claim, and which NodePorts are refused outright. Modes program
 * the service ports of the Snapshot as they are; what this module refuses
 * is not in them.
 *
 * Services claim in order of creation (created.ts compareByCreation: the
 * earliest `metadata.creationTimestamp` first, a Service without one after
 * every Service with one, then by "namespace/name"), the order in which
 * the API server's allocators would have handed the frontends out and
 * refused the second claimant. The order never depends on what was served
 * before, so every mode, every command and a restarted drover decide the
 * same way.
 *
 *   1. ClusterIPs: a Service one of whose ClusterIP:port/protocol triples
 *      (of either family) an earlier Service has is skipped whole.
 *   2. The other frontends of the Services kept, in the same order, port
 *      by port; a Service that loses one of them is still served without it:
 *      - a NodePort outside the node-port range (the API server's
 *        `--service-node-port-range`, default 30000-32767) is left out,
 *        and so is a `healthCheckNodePort` outside it;
 *      - a NodePort/protocol an earlier Service has is left out (a NodePort
 *        opens the port on every NodePort address of the node);
 *      - an external IP or VIP-mode LoadBalancer IP at this port whose
 *        ip:port/protocol is a ClusterIP triple (of any Service) or an
 *        external or LoadBalancer IP of an earlier Service is left out at
 *        this port. A ClusterIP always beats an external address.
 *
 * Each refusal is one ManifestError naming the Service, the field and, for
 * a clash, the Service that keeps the frontend and why.
 */
import { compareByCreation, precedenceReason } from './created.ts';
import { displayFile, objectError, type ManifestError } from './errors.ts';
import type { ParsedService } from './parsed.ts';
import type { ServicePort } from './types.ts';

/** A range of NodePorts, both ends included, each 1-65535. */
export interface NodePortRange {
  readonly first: number;
  readonly last: number;
}

/** Every port: the range drover checks Services from the Kubernetes API against by default, since the API server has enforced its own `--service-node-port-range` on them. */
export const ANY_NODE_PORT: NodePortRange = Object.freeze({ first: 1, last: 65535 });

/** The API server's default `--service-node-port-range`, 30000-32767. */
export const DEFAULT_NODE_PORT_RANGE: NodePortRange = Object.freeze({ first: 30000, last: 32767 });

/** "30000-32767". */
export function formatNodePortRange(r: NodePortRange): string {
  return `${r.first}-${r.last}`;
}

/**
 * Read a node-port range as the API server reads `--service-node-port-range`
 * (k8s.io/apimachinery/pkg/util/net PortRange.Set): "min-max", "min+offset"
 * (min to min+offset) or a single port, both ends included, each 1-65535.
 * @throws Error naming the value.
 */
export function parseNodePortRange(text: string): NodePortRange {
  const value = text.trim();
  const m = /^(\d{1,5})(?:([-+])(\d{1,5}))?$/.exec(value);
  if (!m) throw new Error(`"${text}" is not a port range (expected e.g. 30000-32767)`);
  const first = Number(m[1]);
  const last = m[2] === undefined ? first : m[2] === '-' ? Number(m[3]) : first + Number(m[3]);
  for (const port of [first, last]) if (port < 1 || port > 65535) throw new Error(`"${text}": port ${port} is out of range 1-65535`);
  if (last < first) throw new Error(`"${text}": the end port is less than the start port`);
  return Object.freeze({ first, last });
}

/** A Service that claims frontends, after ClusterIP allocation: its IPv4 ClusterIP `ip` and IPv6 one `ip6`, at least one of them. */
export interface Claimant {
  readonly svc: ParsedService;
  /** "namespace/name". */
  readonly key: string;
  readonly ip: string | undefined;
  readonly ip6: string | undefined;
}

/** What a Service kept by {@link settleFrontends} is served without. */
export interface Trim {
  /** `index` (ParsedServicePort.index) of each port whose NodePort is left out. */
  readonly nodePorts: ReadonlySet<number>;
  /** By port `index`: the external and LoadBalancer IPs left out at that port. */
  readonly addresses: ReadonlyMap<number, ReadonlySet<string>>;
  /** True when `spec.healthCheckNodePort` is left out. */
  readonly healthCheckNodePort: boolean;
}

/** Outcome of {@link settleFrontends}. */
export interface Settled<T extends Claimant> {
  /** The Services served (whose ClusterIPs are theirs), in the order given. */
  readonly accepted: T[];
  /** By "namespace/name": what a Service in `accepted` is served without; absent when nothing. */
  readonly trims: ReadonlyMap<string, Trim>;
  /** One line per refusal, Services in order of precedence. */
  readonly refusals: ManifestError[];
}

/** A Trim being built. */
interface OpenTrim {
  nodePorts: Set<number>;
  addresses: Map<number, Set<string>>;
  healthCheckNodePort: boolean;
}

/**
 * Decide who keeps each frontend (see the module comment). `claimants` may
 * come in any order; the result does not depend on it. Pure.
 */
export function settleFrontends<T extends Claimant>(claimants: readonly T[], range: NodePortRange = DEFAULT_NODE_PORT_RANGE): Settled<T> {
  const precedence = (c: Claimant) => ({ createdAt: c.svc.createdAt, key: c.key });
  // Each claimant's precedence made once, not at every comparison.
  const ordered = claimants
    .map((c) => ({ c, p: precedence(c) }))
    .sort((a, b) => compareByCreation(a.p, b.p))
    .map(({ c }) => c);
  const refusals: ManifestError[] = [];
  const taken = (loser: T, winner: T) => `Service ${winner.key} (${displayFile(winner.svc.file)}), ${precedenceReason(precedence(winner), precedence(loser))}`;

  // 1. ClusterIPs: the whole Service.
  const owners = new Map<string, T>();
  const kept = new Set<T>();
  for (const c of ordered) {
    const triples = clusterTriples(c);
    const clash = triples.findIndex((t) => owners.has(t));
    if (clash >= 0) {
      const port = c.svc.ports[clash % c.svc.ports.length]!;
      refusals.push(objectError(c.svc, `spec.ports[${port.index}]`, `${triples[clash]} is already used by ${taken(c, owners.get(triples[clash]!)!)}; service skipped`));
      continue;
    }
    for (const t of triples) owners.set(t, c);
    kept.add(c);
  }

  // 2. The other frontends of the Services kept: port by port.
  const clusterOwned = new Set(owners.keys());
  const nodePorts = new Map<string, T>();
  const trims = new Map<string, OpenTrim>();
  const trimOf = (c: T): OpenTrim => {
    let t = trims.get(c.key);
    if (t === undefined) trims.set(c.key, (t = { nodePorts: new Set(), addresses: new Map(), healthCheckNodePort: false }));
    return t;
  };
  for (const c of ordered) {
    if (!kept.has(c)) continue;
    const { svc } = c;
    const external = externalAddresses(c);
    for (const p of svc.ports) {
      if (p.nodePort !== undefined) {
        const field = `spec.ports[${p.index}].nodePort`;
        const claim = `${p.nodePort}/${p.protocol}`;
        const owner = nodePorts.get(claim);
        if (p.nodePort < range.first || p.nodePort > range.last) {
          refusals.push(objectError(svc, field, `${p.nodePort} is outside the NodePort range ${formatNodePortRange(range)} (--service-node-port-range); NodePort not served`));
          trimOf(c).nodePorts.add(p.index);
        } else if (owner !== undefined && owner !== c) {
          refusals.push(objectError(svc, field, `NodePort ${claim} is already used by ${taken(c, owner)}; NodePort not served`));
          trimOf(c).nodePorts.add(p.index);
        } else nodePorts.set(claim, c);
      }
      for (const { ip, field } of external) {
        const t = triple(ip, p);
        const owner = owners.get(t);
        if (owner !== undefined && owner !== c) {
          const by = clusterOwned.has(t) ? `Service ${owner.key} (${displayFile(owner.svc.file)}) as its ClusterIP, which goes first` : taken(c, owner);
          refusals.push(objectError(svc, field, `${t} (port ${p.name === '' ? p.port : p.name}) is already used by ${by}; not served at this address`));
          const open = trimOf(c);
          const at = open.addresses.get(p.index);
          if (at) at.add(ip);
          else open.addresses.set(p.index, new Set([ip]));
        } else owners.set(t, c);
      }
    }
    const hc = svc.healthCheckNodePort;
    if (hc !== undefined && (hc < range.first || hc > range.last)) {
      refusals.push(objectError(svc, 'spec.healthCheckNodePort', `${hc} is outside the NodePort range ${formatNodePortRange(range)} (--service-node-port-range); health check not served`));
      trimOf(c).healthCheckNodePort = true;
    }
  }
  return { accepted: claimants.filter((c) => kept.has(c)), trims, refusals };
}

/**
 * Every frontend `c` claims in {@link settleFrontends}, each once: its
 * ClusterIP triples and external triples ("a " + "ip:port/PROTOCOL": a
 * ClusterIP and an external address at the same triple clash) and its
 * NodePorts ("n " + "nodePort/PROTOCOL"). Two Services clash over some
 * frontend exactly when their claims meet; a Service whose claims meet no
 * other Service's, and whose NodePorts and health check NodePort are in
 * range ({@link claimsInRange}), is kept whole whatever its precedence.
 */
export function frontendClaims(c: Claimant): Set<string> {
  const out = new Set<string>();
  for (const ip of [c.ip, c.ip6]) if (ip !== undefined) for (const p of c.svc.ports) out.add(`a ${triple(ip, p)}`);
  const external = externalAddresses(c);
  for (const p of c.svc.ports) {
    if (p.nodePort !== undefined) out.add(`n ${p.nodePort}/${p.protocol}`);
    for (const { ip } of external) out.add(`a ${triple(ip, p)}`);
  }
  return out;
}

/** True when every NodePort of `svc`, and its health check NodePort, is in `range` ({@link settleFrontends} refuses the others). */
export function claimsInRange(svc: ParsedService, range: NodePortRange = DEFAULT_NODE_PORT_RANGE): boolean {
  const inRange = (port: number | undefined) => port === undefined || (port >= range.first && port <= range.last);
  return svc.ports.every((p) => inRange(p.nodePort)) && inRange(svc.healthCheckNodePort);
}

/**
 * The service ports of one Service (as normalise.ts servicePorts builds
 * them, one per `svc.ports` entry, in that order) without what `trim`
 * leaves out; `ports` itself when there is nothing to leave out.
 */
export function trimServicePorts(ports: readonly ServicePort[], svc: ParsedService, trim: Trim | undefined): readonly ServicePort[] {
  if (trim === undefined) return ports;
  return ports.map((sp, i) => {
    const index = svc.ports[i]!.index;
    const dropNodePort = trim.nodePorts.has(index) && sp.frontends.nodePort !== undefined;
    const dropHealth = trim.healthCheckNodePort && sp.frontends.healthCheckNodePort !== undefined;
    const gone = trim.addresses.get(index);
    if (!dropNodePort && !dropHealth && gone === undefined) return sp;
    const { nodePort, healthCheckNodePort, ...rest } = sp.frontends;
    const frontends = Object.freeze({
      ...rest,
      ...(nodePort !== undefined && !dropNodePort ? { nodePort } : {}),
      ...(gone ? { externalIPs: Object.freeze(rest.externalIPs.filter((e) => !gone.has(e.ip))) } : {}),
      ...(gone ? { loadBalancerIngress: Object.freeze(rest.loadBalancerIngress.filter((e) => !gone.has(e.ip))) } : {}),
      ...(healthCheckNodePort !== undefined && !dropHealth ? { healthCheckNodePort } : {}),
    });
    return Object.freeze({ ...sp, frontends });
  });
}

/**
 * The external frontends of `c` that a proxier programs, each with the
 * field that gives it: its external IPs, then its VIP-mode LoadBalancer
 * IPs, of the families it has a ClusterIP of (frontends.ts), each address
 * once.
 */
function externalAddresses(c: Claimant): Array<{ ip: string; field: string }> {
  if (c.svc.externalIPs.length === 0 && c.svc.loadBalancerIngress.length === 0) return []; // most Services
  const families = new Set([...(c.ip !== undefined ? ['IPv4'] : []), ...(c.ip6 !== undefined ? ['IPv6'] : [])]);
  const out = new Map<string, string>();
  for (const e of c.svc.externalIPs) if (families.has(e.family) && !out.has(e.ip)) out.set(e.ip, 'spec.externalIPs');
  for (const i of c.svc.loadBalancerIngress) if (i.ipMode === 'VIP' && families.has(i.family) && !out.has(i.ip)) out.set(i.ip, 'status.loadBalancer.ingress');
  return [...out].map(([ip, field]) => ({ ip, field }));
}

/** The ClusterIP triples of each Service at its last addresses, made once while the Service and its addresses stay the same. */
const triplesMemo = new WeakMap<ParsedService, { readonly ip: string | undefined; readonly ip6: string | undefined; readonly triples: readonly string[] }>();

/** The ClusterIP triples of `c`: each port at `ip`, then each at `ip6`. */
function clusterTriples(c: Claimant): readonly string[] {
  const seen = triplesMemo.get(c.svc);
  if (seen !== undefined && seen.ip === c.ip && seen.ip6 === c.ip6) return seen.triples;
  const ips = [c.ip, c.ip6].filter((ip): ip is string => ip !== undefined);
  const triples = ips.flatMap((ip) => c.svc.ports.map((p) => triple(ip, p)));
  triplesMemo.set(c.svc, { ip: c.ip, ip6: c.ip6, triples });
  return triples;
}

/** "ip:port/PROTOCOL", the unit of address claims. */
function triple(ip: string, p: { readonly port: number; readonly protocol: string }): string {
  return `${ip}:${p.port}/${p.protocol}`;
}
