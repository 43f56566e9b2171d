/**
 * What nftables mode wants programmed for a Snapshot: one entry per
 * frontend (an address, protocol and port clients connect to), with the
 * endpoints the endpoint policy chose for it (model/policy.ts) and what
 * happens without any. Pure.
 *
 * The frontends of a service port, all of one IP family (`family`, the
 * table's: IPv4 for `ip drover`, IPv6 for `ip6 drover`; the snapshot is
 * that family's view, model/family.ts): its ClusterIP; its NodePort on
 * each of this node's NodePort addresses of the family
 * (`--nodeport-addresses`, read once when the backend starts; loopback
 * never); its external IPs of the family; its LoadBalancer ingress IPs of
 * the family in VIP mode, with the `loadBalancerSourceRanges` of the
 * family. The other family's are left to the other table, as kube-proxy's
 * per-family proxiers leave them (model/frontends.ts).
 */
import { formatCIDR, parseIP } from '../../model/addr.ts';
import { entriesOf, frontendEntries, settleView } from '../../model/frontend-index.ts';
import { categorizeEndpoints, externallyAccessible, internalEndpoints } from '../../model/policy.ts';
import type { Endpoint, IPFamily, NodeInfo, ServicePort, Snapshot } from '../../model/types.ts';
import { firewallText, frontendText, hairpinText, nftProtocol, safePort, targetText, UnsafeElementError, type NftProtocol } from './elements.ts';

/** One frontend of one service port. */
export interface DesiredFrontend {
  /** ServicePortName, "ns/name:port". */
  readonly servicePort: string;
  /** The frontend's element text (elements.ts frontendText). */
  readonly frontend: string;
  readonly protocol: NftProtocol;
  /** `cluster` for the ClusterIP; `external` for a NodePort, an external IP or a LoadBalancer IP. */
  readonly kind: 'cluster' | 'external';
  /** externalTrafficPolicy Local (external frontends only): other clients than pods and the node get {@link local}. */
  readonly externalLocal: boolean;
  /** The endpoints every client gets (pods and the node only, under externalTrafficPolicy Local), as element texts (`ip . port`), sorted, no duplicates. */
  readonly targets: readonly string[];
  /** This node's endpoints, for the other clients of an externalTrafficPolicy Local frontend; empty otherwise. */
  readonly local: readonly string[];
  /** The hairpin entries of every endpoint it may send to (elements.ts hairpinText), sorted. */
  readonly hairpin: readonly string[];
  /**
   * Without any endpoint to send to: `reject` when none is usable anywhere,
   * `drop` for a ClusterIP under internalTrafficPolicy Local whose endpoints
   * are all on other nodes; null otherwise.
   */
  readonly none: 'reject' | 'drop' | null;
  /** ClientIP affinity timeout, seconds; undefined without affinity. */
  readonly affinitySeconds?: number;
  /** For a LoadBalancer IP with source ranges: the `frontend . range` elements of set firewall-allow; undefined for every client. */
  readonly firewall?: readonly string[];
}

/** What the frontends of a snapshot depend on besides it. */
export interface DesiredOptions {
  /** This node's NodePort addresses of `family` (no loopback), sorted. */
  readonly nodePortIPs: readonly string[];
  /** The family of the table (default IPv4); the snapshot must be its view (model/family.ts). */
  readonly family?: IPFamily;
}

/** `ip`, checked to be a canonical address of `family`. @throws UnsafeElementError */
function ipOf(family: IPFamily, ip: string): string {
  const a = parseIP(ip);
  if (a?.text !== ip || a.family !== (family === 'IPv4' ? 4 : 6)) throw new UnsafeElementError(`${family} address`, ip);
  return ip;
}

const sortedTexts = (eps: readonly Endpoint[]): string[] => [...new Set(eps.map((ep) => targetText(ep)))].sort();

/**
 * The frontends of service port `sp` on `node`.
 * @throws UnsafeElementError for a value that cannot be an element (the model validates them first).
 */
export function desiredFrontends(sp: ServicePort, node: NodeInfo | undefined, opts: DesiredOptions): DesiredFrontend[] {
  const family = opts.family ?? 'IPv4';
  const protocol = nftProtocol(sp.protocol);
  const port = safePort(sp.port);
  const affinity = sp.sessionAffinity ? { affinitySeconds: sp.sessionAffinity.timeoutSeconds } : {};
  const out: DesiredFrontend[] = [];

  const internal = internalEndpoints(sp, node);
  out.push({
    servicePort: sp.key,
    frontend: frontendText({ ip: ipOf(family, sp.clusterIP), protocol, port }),
    protocol,
    kind: 'cluster',
    externalLocal: false,
    targets: sortedTexts(internal.endpoints),
    local: [],
    hairpin: [...new Set(internal.endpoints.map((ep) => hairpinText(protocol, ep)))].sort(),
    none: internal.none === null ? null : internal.none === 'DROP' ? 'drop' : 'reject',
    ...(internal.endpoints.length > 0 ? affinity : {}),
  });
  if (!externallyAccessible(sp)) return out;

  const sets = categorizeEndpoints(sp, node);
  const externalLocal = sp.externalTrafficPolicy === 'Local';
  const has = sets.hasAnyEndpoints;
  // Under policy Local, pods and the node go to the cluster set (kube-proxy's KUBE-EXT short-circuit).
  const targets = has ? sortedTexts(sets.cluster ?? sets.local ?? []) : [];
  const local = has && externalLocal ? sortedTexts(sets.local ?? []) : [];
  const hairpin = [...new Set(sets.allReachable.map((ep) => hairpinText(protocol, ep)))].sort();
  const external = (ip: string, p: number, firewall?: readonly string[]): DesiredFrontend => ({
    servicePort: sp.key,
    frontend: frontendText({ ip, protocol, port: p }),
    protocol,
    kind: 'external',
    externalLocal: has && externalLocal,
    targets,
    local,
    hairpin: has ? hairpin : [],
    none: has ? null : 'reject',
    ...(has ? affinity : {}),
    ...(firewall ? { firewall } : {}),
  });
  // The frontends are the model's (model/frontend-index.ts); the table lists NodePorts first.
  const entries = frontendEntries(sp, family, node);
  for (const e of entriesOf(entries, 'NodePort')) for (const ip of opts.nodePortIPs) out.push(external(ipOf(family, ip), safePort(e.port)));
  for (const e of entriesOf(entries, 'ExternalIP')) out.push(external(e.address, port));
  const lbEntries = entriesOf(entries, 'LoadBalancer');
  for (const e of lbEntries) {
    if (e.sourceRanges.length === 0) {
      out.push(external(e.address, port));
      continue;
    }
    const frontend = frontendText({ ip: e.address, protocol, port });
    // A VIP that loops back from the node: the LoadBalancer IPs themselves are clients too (kube-proxy's allowFromNode).
    const host = family === 'IPv4' ? 32 : 128;
    const clients = [...e.sourceRanges.map(formatCIDR), ...(e.allowFromNode ? lbEntries.map((lb) => `${lb.address}/${host}`) : [])];
    out.push(external(e.address, port, [...new Set(clients.map((c) => firewallText(frontend, c)))].sort()));
  }
  return out;
}

/** A service port left out because a frontend of its belongs to another service port. */
export interface FrontendConflict {
  /** The service port left out. */
  readonly servicePort: string;
  /** The frontend it wanted (elements.ts frontendText). */
  readonly frontend: string;
  /** Which field of its Service gave that frontend: `spec.clusterIP`, `spec.ports[].nodePort`, `spec.externalIPs` or `status.loadBalancer.ingress`. */
  readonly field: string;
  /** The service port that keeps the frontend. */
  readonly owner: string;
}

/** The one-line message of a conflict: the object, the field and the frontend, and who keeps it. */
export function conflictText(c: FrontendConflict): string {
  return `service port ${c.servicePort}: ${c.field} gives frontend ${c.frontend}, which belongs to service port ${c.owner}; service port left out`;
}

/** The field of `sp` that gives its frontend `f`. */
function fieldOf(sp: ServicePort | undefined, f: DesiredFrontend): string {
  if (f.kind === 'cluster') return 'spec.clusterIP';
  const [ip, , port] = f.frontend.split(' . ');
  const externalIPs = sp ? sp.frontends.externalIPs.map((e) => e.ip) : [];
  const lbIPs = sp ? sp.frontends.loadBalancerIngress.map((i) => i.ip) : [];
  if (sp?.frontends.nodePort !== undefined && Number(port) === sp.frontends.nodePort && !externalIPs.includes(ip!) && !lbIPs.includes(ip!)) {
    return 'spec.ports[].nodePort';
  }
  return externalIPs.includes(ip!) ? 'spec.externalIPs' : 'status.loadBalancer.ingress';
}

/** The frontends of `sp`, each once (an external IP that is also its LoadBalancer IP is programmed once). */
export function uniqueFrontends(sp: ServicePort, node: NodeInfo | undefined, opts: DesiredOptions): DesiredFrontend[] {
  return [...new Map(desiredFrontends(sp, node, opts).map((f) => [f.frontend, f] as const)).values()];
}

/** What {@link claimFrontends} reads and writes: frontend → the service port that owns it. A Map is one. */
export interface FrontendOwners {
  /** The owner of `frontend`; undefined when it is free. */
  get(frontend: string): string | undefined;
  /** Give `frontend` to `servicePort`. */
  set(frontend: string, servicePort: string): unknown;
}

/**
 * `owners` (frontend → service port, as the last sync left them) as it is
 * once the service ports of `released` give up their frontends, without
 * copying it: a frontend whose owner is in `released` reads as free, and
 * what is given out is kept apart. What a partial sync claims against
 * (backend.ts). Costs O(1) to make and per lookup; `owners` is not changed.
 */
export function releasedOwners(owners: ReadonlyMap<string, string>, released: ReadonlySet<string>): FrontendOwners {
  const claimed = new Map<string, string>();
  return {
    get(frontend) {
      const mine = claimed.get(frontend);
      if (mine !== undefined) return mine;
      const owner = owners.get(frontend);
      return owner !== undefined && released.has(owner) ? undefined : owner;
    },
    set: (frontend, servicePort) => claimed.set(frontend, servicePort),
  };
}

/**
 * Hand out frontends to `candidates` (service ports with their frontends,
 * in key order). The model has already settled every clash between
 * ClusterIPs, NodePorts and external addresses (model/claims.ts), the same
 * way in every mode; what is left here is only a frontend the model cannot
 * see, such as an external IP equal to one of this node's NodePort
 * addresses. A service port gets all of its frontends when none is in
 * `owners` (frontend → service port, updated), else none and a conflict.
 * Service ports that `incumbents` (the owners of the last sync) names as
 * the owner of one of their frontends go first, so a frontend already
 * served stays with its service port; the rest by key.
 */
export function claimFrontends(
  candidates: ReadonlyArray<readonly [ServicePort | undefined, string, readonly DesiredFrontend[]]>,
  owners: FrontendOwners,
  incumbents: ReadonlyMap<string, string>,
): { accepted: Map<string, readonly DesiredFrontend[]>; conflicts: FrontendConflict[] } {
  const first = (c: (typeof candidates)[number]): boolean => c[2].some((f) => incumbents.get(f.frontend) === c[1]);
  const ordered = [...candidates.filter(first), ...candidates.filter((c) => !first(c))];
  const accepted = new Map<string, readonly DesiredFrontend[]>();
  const conflicts: FrontendConflict[] = [];
  for (const [sp, key, mine] of ordered) {
    let owner: string | undefined;
    const taken = mine.find((f) => (owner = owners.get(f.frontend)) !== undefined && owner !== key);
    if (taken) {
      conflicts.push({ servicePort: key, frontend: taken.frontend, field: fieldOf(sp, taken), owner: owner! });
      continue;
    }
    for (const f of mine) owners.set(f.frontend, key);
    accepted.set(key, mine);
  }
  conflicts.sort((a, b) => (a.servicePort < b.servicePort ? -1 : a.servicePort > b.servicePort ? 1 : 0));
  return { accepted, conflicts };
}

/** Every frontend of a snapshot, by frontend text. */
export interface DesiredNft {
  readonly frontends: ReadonlyMap<string, DesiredFrontend>;
  /** Service ports left out because one of their frontends belongs to another service port. */
  readonly conflicts: readonly FrontendConflict[];
}

/**
 * The desired frontends of `snapshot`, each service port with the
 * frontends the model's index serves it with (model/frontend-index.ts
 * settleView). A frontend two service ports still want (a NodePort address
 * that is also an external IP) stays with the one `incumbents` (frontend → service port, from the last
 * sync) names, else with the first by key; the other is left out whole.
 */
export function desiredNft(snapshot: Snapshot, opts: DesiredOptions, incumbents: ReadonlyMap<string, string> = new Map()): DesiredNft {
  // Each service port with the frontends it is served with (model/frontend-index.ts): what is left to claim here is a clash with a NodePort address.
  const served = settleView(snapshot, opts.family ?? 'IPv4').view;
  const candidates = [...served.services.values()].map((sp) => [sp, sp.key, uniqueFrontends(sp, served.node, opts)] as const);
  const { accepted, conflicts } = claimFrontends(candidates, new Map(), incumbents);
  const frontends = new Map<string, DesiredFrontend>();
  // In key order, as the snapshot lists them.
  for (const [, key] of candidates) for (const f of accepted.get(key) ?? []) frontends.set(f.frontend, f);
  return { frontends, conflicts };
}
