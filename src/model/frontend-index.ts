/**
 * The frontends of a family's service ports, expanded once for every mode,
 * and one index of them that refuses a second owner.
 *
 * A frontend is what a client connects to: an address, a protocol and a
 * port. {@link frontendEntries} expands one service port of a family view
 * (family.ts) into its frontends, in kube-proxy's order (pkg/proxy/
 * iptables/proxier.go syncProxyRules): the ClusterIP, each external IP of
 * the family, each VIP-mode LoadBalancer IP of the family (with the
 * family's `loadBalancerSourceRanges`), then the NodePort, whose address is
 * {@link EVERY_NODE_PORT_ADDRESS}: every NodePort address of the node, as
 * each mode reads them (iptables: any local address; IPVS and nftables:
 * the addresses read when the backend starts). Modes program these entries;
 * none expands a service port itself.
 *
 * {@link FrontendIndex} holds the entries of every service port of one
 * family, keyed by address·protocol·port. The model settles ownership when
 * it builds a Snapshot (claims.ts), so a frontend with two owners reaches
 * the index only from a Snapshot made otherwise; the index then settles it
 * the way claims.ts does, the same for every mode:
 *
 *   - a ClusterIP goes first: an external frontend at another service
 *     port's ClusterIP:port/protocol is not served;
 *   - between two ClusterIPs, the service port first by ServicePortName
 *     keeps it and the other is left out whole (claims.ts skips the later
 *     Service);
 *   - between two external frontends (NodePort, external IP, LoadBalancer
 *     IP), the service port first by ServicePortName keeps it; the other is
 *     served without that frontend.
 *
 * Each refusal is a {@link FrontendRefusal} naming both service ports,
 * which the modes log as warnings (and `render` lists). A service port's
 * frontends that are the same address·protocol·port (an external IP that
 * is also its LoadBalancer IP) are one frontend, not a clash.
 */
import type { IPPrefix } from './addr.ts';
import { externalIPsOf, loadBalancerIPsOf, rangesHoldNode, sourceRangesOf } from './frontends.ts';
import { compareStrings } from './order.ts';
import type { IPFamily, NodeInfo, Protocol, ServicePort, Snapshot, TrafficPolicy } from './types.ts';

/** The address of a NodePort entry: every NodePort address of the node. */
export const EVERY_NODE_PORT_ADDRESS = '*';

/** What gives a frontend: the ClusterIP, `spec.externalIPs`, a VIP-mode `status.loadBalancer.ingress` IP, or the NodePort. */
export type FrontendKind = 'ClusterIP' | 'ExternalIP' | 'LoadBalancer' | 'NodePort';

/** One frontend of one service port, of one IP family. */
export interface FrontendEntry {
  /** "address:port/PROTOCOL" ("[address]:port/PROTOCOL" for IPv6, "*:port/PROTOCOL" for a NodePort): the index key. */
  readonly key: string;
  /** A canonical address of the family, or {@link EVERY_NODE_PORT_ADDRESS} for a NodePort. */
  readonly address: string;
  readonly protocol: Protocol;
  /** 1-65535: the service port, or the NodePort. */
  readonly port: number;
  readonly kind: FrontendKind;
  /** ServicePortName of the service port it belongs to, "ns/name:port". */
  readonly servicePort: string;
  /** The traffic policy that picks its endpoints (policy.ts): internalTrafficPolicy for a ClusterIP, externalTrafficPolicy otherwise. */
  readonly policy: TrafficPolicy;
  /** ClientIP session affinity timeout, seconds; undefined without affinity. */
  readonly affinitySeconds?: number;
  /**
   * LoadBalancer entries: the family's `loadBalancerSourceRanges`, host bits
   * cleared (frontends.ts sourceRangesOf); empty: every client. Empty for
   * the other kinds.
   */
  readonly sourceRanges: readonly IPPrefix[];
  /** LoadBalancer entries: a source range holds this node's InternalIP of the family, so the LoadBalancer IPs are allowed as sources too (kube-proxy's allowFromNode). */
  readonly allowFromNode: boolean;
}

/** "address:port/PROTOCOL", bracketed for IPv6: the unit of frontend ownership. */
export function frontendKey(address: string, protocol: Protocol, port: number): string {
  return `${address.includes(':') ? `[${address}]` : address}:${port}/${protocol}`;
}

const NO_RANGES: readonly IPPrefix[] = Object.freeze([]);

/**
 * The frontends of service port `sp` of `family`'s view (family.ts) on
 * `node` (Snapshot.node), in kube-proxy's order: ClusterIP, external IPs
 * (manifest order), VIP-mode LoadBalancer IPs (status order), NodePort.
 * The health-check NodePort is not a frontend of the service port
 * (health-check.ts). Values are the model's, validated when it was built;
 * modes check them again as they write them. Pure; O(frontends + ranges).
 */
export function frontendEntries(sp: ServicePort, family: IPFamily, node?: NodeInfo): FrontendEntry[] {
  const f = sp.frontends;
  const affinity = sp.sessionAffinity === null ? {} : { affinitySeconds: sp.sessionAffinity.timeoutSeconds };
  const external = sp.externalTrafficPolicy;
  const entry = (kind: FrontendKind, address: string, port: number, policy: TrafficPolicy, ranges = NO_RANGES, allowFromNode = false): FrontendEntry => ({
    key: frontendKey(address, sp.protocol, port),
    address,
    protocol: sp.protocol,
    port,
    kind,
    servicePort: sp.key,
    policy,
    ...affinity,
    sourceRanges: ranges,
    allowFromNode,
  });
  const out: FrontendEntry[] = [entry('ClusterIP', sp.clusterIP, sp.port, sp.internalTrafficPolicy)];
  for (const ip of externalIPsOf(f, family)) out.push(entry('ExternalIP', ip, sp.port, external));
  const lbIPs = loadBalancerIPsOf(f, family);
  if (lbIPs.length > 0) {
    const ranges = sourceRangesOf(f.loadBalancerSourceRanges, family);
    const fromNode = rangesHoldNode(ranges, node, family);
    for (const ip of lbIPs) out.push(entry('LoadBalancer', ip, sp.port, external, ranges, fromNode));
  }
  if (f.nodePort !== undefined) out.push(entry('NodePort', EVERY_NODE_PORT_ADDRESS, f.nodePort, external));
  return out;
}

/** The entries of `kind` among `entries`. */
export function entriesOf(entries: readonly FrontendEntry[], kind: FrontendKind): FrontendEntry[] {
  return entries.filter((e) => e.kind === kind);
}

/** A frontend a service port wants and another one keeps. */
export interface FrontendRefusal {
  /** The service port refused. */
  readonly servicePort: string;
  /** The frontend it wanted. */
  readonly entry: FrontendEntry;
  /** The service port that keeps it. */
  readonly owner: string;
  /** True when the refused frontend is the ClusterIP: the service port is left out whole. */
  readonly whole: boolean;
}

const KIND_TEXT: Readonly<Record<FrontendKind, string>> = { ClusterIP: 'ClusterIP', ExternalIP: 'external IP', LoadBalancer: 'LoadBalancer IP', NodePort: 'NodePort' };

/** The warning of a refusal, naming both service ports: "service port a/b:http: NodePort *:30080/TCP belongs to service port a/a:http; not served there". */
export function refusalText(r: FrontendRefusal, family: IPFamily): string {
  const what = `${KIND_TEXT[r.entry.kind]} ${r.entry.key}${family === 'IPv6' ? ' (IPv6)' : ''}`;
  return `service port ${r.servicePort}: ${what} belongs to service port ${r.owner}; ${r.whole ? 'service port left out' : 'not served there'}`;
}

/** What one {@link FrontendIndex.update} changed. */
export interface FrontendDelta {
  /** Service ports whose served frontends may have changed: those updated, and those that gained or lost a frontend through them. */
  readonly changed: ReadonlySet<string>;
  /** Refusals that hold now and did not before the update, by service port then frontend. */
  readonly refusals: readonly FrontendRefusal[];
}

/** One indexed service port. */
interface Indexed {
  readonly sp: ServicePort;
  readonly entries: readonly FrontendEntry[];
  /** The service port as served: `sp`, trimmed of refused frontends, or null when left out whole. */
  served: ServicePort | null;
  refusals: readonly FrontendRefusal[];
}

/**
 * The frontends of every service port of one family, unique by
 * address·protocol·port (see the module comment), updated per changed
 * service port: an update costs the frontends of the changed service ports
 * and of those that share one with them, not the whole index. Not thread
 * safe; a backend keeps one per family and updates it inside its sync.
 */
export class FrontendIndex {
  private readonly ports = new Map<string, Indexed>();
  /** Frontend key → the service ports that want it. */
  private readonly claimants = new Map<string, Set<string>>();
  /** Service ports served otherwise than as given (trimmed or left out). */
  private readonly altered = new Map<string, ServicePort | null>();

  constructor(readonly family: IPFamily) {}

  /** An index of every service port of `view` (a family view of `family`, family.ts). */
  static of(view: Snapshot, family: IPFamily): FrontendIndex {
    const index = new FrontendIndex(family);
    index.update(view, view.services.keys());
    return index;
  }

  /**
   * Take the service ports `keys` as `view` (the family's view) has them now
   * (absent: removed) and settle the frontends they share. Cost: their
   * frontends and those of the service ports sharing one, O(changed).
   */
  update(view: Snapshot, keys: Iterable<string>): FrontendDelta {
    const changed = new Set<string>();
    const touched = new Set<string>();
    const previous = new Map<string, readonly FrontendRefusal[]>();
    for (const name of keys) {
      changed.add(name);
      const before = this.ports.get(name);
      if (before) {
        if (!previous.has(name)) previous.set(name, before.refusals);
        for (const e of before.entries) {
          touched.add(e.key);
          const set = this.claimants.get(e.key);
          set?.delete(name);
          if (set?.size === 0) this.claimants.delete(e.key);
        }
        this.ports.delete(name);
        this.altered.delete(name);
      }
      const sp = view.services.get(name);
      if (sp === undefined) continue;
      const entries = frontendEntries(sp, this.family, view.node);
      this.ports.set(name, { sp, entries, served: sp, refusals: [] });
      for (const e of entries) {
        touched.add(e.key);
        let set = this.claimants.get(e.key);
        if (set === undefined) this.claimants.set(e.key, (set = new Set()));
        set.add(name);
      }
    }
    // A service port left out whole (or no longer) releases (or claims) its other frontends: one level, since only ClusterIPs leave a port out.
    const again = new Set<string>();
    for (const key of touched) for (const name of this.claimants.get(key) ?? []) again.add(name);
    for (const name of again) for (const e of this.ports.get(name)!.entries) touched.add(e.key);
    for (const key of touched) for (const name of this.claimants.get(key) ?? []) again.add(name);

    const refusals: FrontendRefusal[] = [];
    for (const name of [...again].sort(compareStrings)) {
      const port = this.ports.get(name)!;
      const before = previous.get(name) ?? port.refusals;
      const now = this.refusalsOf(name, port);
      port.refusals = now;
      const whole = now.some((r) => r.whole);
      const served = whole ? null : now.length === 0 ? port.sp : trimServicePort(port.sp, now, this.family);
      if (served === port.sp) this.altered.delete(name);
      else this.altered.set(name, served);
      const was = new Set(before.map((r) => `${r.entry.key} ${r.owner}`));
      if (now.length !== before.length || now.some((r) => !was.has(`${r.entry.key} ${r.owner}`))) changed.add(name);
      for (const r of now) if (!was.has(`${r.entry.key} ${r.owner}`)) refusals.push(r);
      port.served = served;
    }
    return { changed, refusals };
  }

  /** The service port `name` as served: trimmed of refused frontends; undefined when it is not indexed or left out whole. Cost: one lookup. */
  served(name: string): ServicePort | undefined {
    return this.ports.get(name)?.served ?? undefined;
  }

  /** The entries `name` is served with (its own, less those refused); empty when left out. */
  entries(name: string): FrontendEntry[] {
    const port = this.ports.get(name);
    if (port === undefined || port.served === null) return [];
    const refused = new Set(port.refusals.map((r) => r.entry.key));
    return port.entries.filter((e) => !refused.has(e.key));
  }

  /** Every refusal that holds, by service port then frontend. Cost: the service ports with one. */
  refusals(): FrontendRefusal[] {
    return [...this.altered.keys()].sort(compareStrings).flatMap((name) => this.ports.get(name)!.refusals);
  }

  /**
   * `view` with every service port as served ({@link served}), without
   * copying it: a lookup or a walk goes through the index only for the
   * service ports it alters. `view` must be what the index was last
   * updated with. Cost: O(1) to make.
   */
  view(view: Snapshot): Snapshot {
    if (this.altered.size === 0) return view;
    return { ...view, services: new ServedPorts(view.services, this.altered) };
  }

  /** The refusals of `name` now. */
  private refusalsOf(name: string, port: Indexed): FrontendRefusal[] {
    const out: FrontendRefusal[] = [];
    const seen = new Set<string>();
    for (const e of port.entries) {
      if (seen.has(e.key)) continue;
      seen.add(e.key);
      const owner = this.owner(e.key);
      if (owner !== undefined && owner !== name) out.push({ servicePort: name, entry: e, owner, whole: e.kind === 'ClusterIP' });
    }
    const whole = out.find((r) => r.whole);
    return whole ? [whole] : out;
  }

  /** Who keeps frontend `key`: the first ClusterIP claimant by name, else the first claimant not left out. */
  private owner(key: string): string | undefined {
    let cluster: string | undefined;
    let other: string | undefined;
    for (const name of this.claimants.get(key) ?? []) {
      const port = this.ports.get(name)!;
      const isCluster = port.entries[0]!.key === key;
      if (isCluster) {
        if (cluster === undefined || compareStrings(name, cluster) < 0) cluster = name;
      } else if ((other === undefined || compareStrings(name, other) < 0) && !this.leftOut(name)) other = name;
    }
    return cluster ?? other;
  }

  /** True when another service port keeps the ClusterIP of `name`. */
  private leftOut(name: string): boolean {
    const cluster = this.ports.get(name)!.entries[0]!.key;
    for (const other of this.claimants.get(cluster)!) {
      if (other !== name && compareStrings(other, name) < 0 && this.ports.get(other)!.entries[0]!.key === cluster) return true;
    }
    return false;
  }
}

/** The service ports of the whole family view `view` as served: {@link FrontendIndex.view} of a new index, and its refusals. Pure; O(frontends). */
export function settleView(view: Snapshot, family: IPFamily): { view: Snapshot; refusals: FrontendRefusal[] } {
  const index = FrontendIndex.of(view, family);
  return { view: index.view(view), refusals: index.refusals() };
}

/** `sp` without the frontends of `refused` (none of them its ClusterIP). */
function trimServicePort(sp: ServicePort, refused: readonly FrontendRefusal[], family: IPFamily): ServicePort {
  // An address refused at this port is refused as an external IP and as a LoadBalancer IP alike (one frontend).
  const gone = new Set(refused.filter((r) => r.entry.kind !== 'NodePort').map((r) => r.entry.address));
  const dropNodePort = refused.some((r) => r.entry.kind === 'NodePort');
  const { nodePort, ...rest } = sp.frontends;
  const frontends = Object.freeze({
    ...rest,
    ...(nodePort !== undefined && !dropNodePort ? { nodePort } : {}),
    externalIPs: rest.externalIPs.filter((e) => e.family !== family || !gone.has(e.ip)),
    loadBalancerIngress: rest.loadBalancerIngress.filter((i) => i.family !== family || !gone.has(i.ip)),
  });
  return Object.freeze({ ...sp, frontends });
}

/** A family view's service ports with some replaced (a trimmed ServicePort) or left out (null), read through. */
class ServedPorts implements ReadonlyMap<string, ServicePort> {
  constructor(
    private readonly base: ReadonlyMap<string, ServicePort>,
    private readonly altered: ReadonlyMap<string, ServicePort | null>,
  ) {}

  get size(): number {
    let n = this.base.size;
    for (const [name, sp] of this.altered) if (sp === null && this.base.has(name)) n--;
    return n;
  }

  get(name: string): ServicePort | undefined {
    if (!this.altered.has(name)) return this.base.get(name);
    return this.altered.get(name) ?? undefined;
  }

  has(name: string): boolean {
    return this.get(name) !== undefined;
  }

  *entries(): MapIterator<[string, ServicePort]> {
    for (const [name, sp] of this.base) {
      const served = this.altered.has(name) ? this.altered.get(name) : sp;
      if (served) yield [name, served];
    }
  }

  *keys(): MapIterator<string> {
    for (const [name] of this.entries()) yield name;
  }

  *values(): MapIterator<ServicePort> {
    for (const [, sp] of this.entries()) yield sp;
  }

  [Symbol.iterator](): MapIterator<[string, ServicePort]> {
    return this.entries();
  }

  forEach(fn: (value: ServicePort, key: string, map: ReadonlyMap<string, ServicePort>) => void): void {
    for (const [name, sp] of this.entries()) fn(sp, name, this);
  }
}

