/**
 * IPVS mode's desired state put together from the service ports' shares
 * (desired.ts, desiredServicePort), and kept up to date one service port at
 * a time, so that a partial sync costs what changed and not what exists.
 *
 * A service port claims several virtual servers: its ClusterIP one and
 * those of its external frontends. When two service ports claim the same
 * address:port/protocol, the first in ServicePortName order wins there and
 * the other contributes nothing to that virtual server (the model settles
 * every clash of ClusterIPs, NodePorts and external addresses first, the
 * same way in every mode, model/claims.ts; this is a second line of
 * defence, for what the model cannot see, such as an external IP equal to
 * one of this node's NodePort addresses). The index
 * keeps, for every virtual server, the service ports that claim it, and for
 * every kube-ipvs0 address and ipset entry how many winning claims want it
 * (two services may share a ClusterIP, or target the same endpoint). {@link DesiredIndex.update}
 * replaces some service ports and returns exactly what became wanted and
 * what stopped being wanted.
 */
import type { IPFamily, Snapshot } from '../../model/types.ts';
import { settleView } from '../../model/frontend-index.ts';
import type { VirtualServerKey } from '../../kernel/ipvs/codec.ts';
import { compareAddresses } from '../../model/addr.ts';
import { compareText, desiredServicePort, type DesiredIpvsState, type DesiredServicePort, type DesiredVirtualServer, type IpvsPlanOptions } from './desired.ts';
import type { SetEntry } from './frontends.ts';
import { CLUSTER_IP_SET, IPVS_SETS, LOOP_BACK_SET, type OwnedSetName } from './ipset.ts';

/** What one {@link DesiredIndex.update} changed in the desired state. */
export interface DesiredDelta {
  /** Every virtual server the changed service ports had or have, by key, with what is wanted there now (undefined: nothing). */
  readonly virtualServers: ReadonlyMap<string, { readonly vs: VirtualServerKey; readonly desired: DesiredVirtualServer | undefined }>;
  /** KUBE-CLUSTER-IP entries that became wanted and that stopped being wanted, each sorted. */
  readonly clusterIP: EntryDelta;
  /** KUBE-LOOP-BACK entries, as above. */
  readonly loopBack: EntryDelta;
  /** The entries of every one of drover's sets (ipset.ts IPVS_SETS), as above; `clusterIP` and `loopBack` are two of them. */
  readonly sets: ReadonlyMap<OwnedSetName, EntryDelta>;
  /** Addresses to bind to and unbind from kube-ipvs0 (ClusterIPs, external and ingress IPs), each sorted numerically. */
  readonly addresses: EntryDelta;
  /**
   * Service ports left out of the virtual servers in `virtualServers` because
   * another one (first by ServicePortName) has the same ClusterIP:port/protocol,
   * whether they changed or not; sorted.
   */
  readonly conflicts: readonly string[];
}

/** Values that became wanted (`add`) and stopped being wanted (`del`). */
export interface EntryDelta {
  readonly add: readonly string[];
  readonly del: readonly string[];
}

/** Reference counts of one kind of value, recording the values whose presence changed since `begin`. */
class Counted {
  private readonly counts = new Map<string, number>();
  private touched = new Map<string, boolean>();

  inc(value: string): void {
    const n = this.counts.get(value) ?? 0;
    if (!this.touched.has(value)) this.touched.set(value, n > 0);
    this.counts.set(value, n + 1);
  }

  dec(value: string): void {
    const n = this.counts.get(value) ?? 0;
    if (!this.touched.has(value)) this.touched.set(value, n > 0);
    if (n <= 1) this.counts.delete(value);
    else this.counts.set(value, n - 1);
  }

  begin(): void {
    this.touched = new Map();
  }

  /** The values whose presence changed since `begin`, sorted with `compare`. */
  delta(compare: (a: string, b: string) => number): EntryDelta {
    const add: string[] = [];
    const del: string[] = [];
    for (const [value, was] of this.touched) {
      const is = this.counts.has(value);
      if (is && !was) add.push(value);
      else if (!is && was) del.push(value);
    }
    return { add: add.sort(compare), del: del.sort(compare) };
  }

  values(): IterableIterator<string> {
    return this.counts.keys();
  }

  /** How many distinct values are wanted. */
  get size(): number {
    return this.counts.size;
  }
}

/**
 * One virtual server a service port claims, with what it contributes while
 * it is programmed: the ClusterIP one (its address, its KUBE-CLUSTER-IP and
 * KUBE-LOOP-BACK entries, and desired.ts DesiredServicePort.entries) or an external one (desired.ts DesiredExternalServer).
 */
interface Claim {
  readonly server: DesiredVirtualServer;
  /** False for a ClusterIP virtual server that is withheld (desired.ts DesiredServicePort.withheld): it holds its key, address and entries, but no virtual server is programmed. */
  readonly programmed: boolean;
  /** kube-ipvs0 addresses it needs bound. */
  readonly addresses: readonly string[];
  readonly entries: readonly SetEntry[];
}

/** The claims of a service port: the ClusterIP virtual server first, then the external ones; one per key (the first). */
function claimsOf(port: DesiredServicePort): Claim[] {
  const all: Claim[] = [
    {
      server: port.server,
      programmed: !port.withheld,
      addresses: [port.server.vs.address],
      entries: [{ set: CLUSTER_IP_SET, entry: port.clusterIPEntry }, ...port.loopBackEntries.map((entry): SetEntry => ({ set: LOOP_BACK_SET, entry })), ...port.entries],
    },
    ...port.external.map((x): Claim => ({ server: x.server, programmed: true, addresses: x.bind ? [x.server.vs.address] : [], entries: x.entries })),
  ];
  const seen = new Set<string>();
  return all.filter((c) => !seen.has(c.server.key) && seen.add(c.server.key));
}

/** The virtual server a winning claim programs, if it programs one. */
function programmed(winner: { readonly claim: Claim } | undefined): DesiredVirtualServer | undefined {
  return winner?.claim.programmed ? winner.claim.server : undefined;
}

/**
 * The desired state of every service port, updated in place. Not thread
 * safe; the IPVS backend uses it inside its sync lock and drops it after a
 * failed sync.
 */
export class DesiredIndex {
  private readonly ports = new Map<string, { readonly port: DesiredServicePort; readonly claims: readonly Claim[] }>();
  /** Virtual server key → the service ports that claim it. */
  private readonly claims = new Map<string, Set<string>>();
  /** Virtual server key → the service port programmed there, and its claim. */
  private readonly winners = new Map<string, { readonly name: string; readonly claim: Claim }>();
  private readonly addresses = new Counted();
  private readonly sets = new Map<OwnedSetName, Counted>(IPVS_SETS.map((s) => [s.name, new Counted()]));
  private realServers = 0;
  /** Winners whose claim programs no virtual server. */
  private withheld = 0;

  /** An index of `ports`. */
  static of(ports: Iterable<DesiredServicePort>): DesiredIndex {
    const index = new DesiredIndex();
    index.update(new Map([...ports].map((p) => [p.server.servicePort, p])));
    return index;
  }

  /**
   * Replace the service ports in `changes` (by ServicePortName; undefined
   * removes one) and return what that changed. Cost: the changed service
   * ports' virtual and real servers, not the whole state.
   */
  update(changes: ReadonlyMap<string, DesiredServicePort | undefined>): DesiredDelta {
    for (const c of [this.addresses, ...this.sets.values()]) c.begin();
    const scope = new Map<string, VirtualServerKey>();
    for (const [name, next] of changes) {
      const before = this.ports.get(name);
      if (before) {
        for (const c of before.claims) scope.set(c.server.key, c.server.vs);
        this.unclaim(name, before.claims);
        this.realServers -= before.port.server.reals.size;
        this.ports.delete(name);
      }
      if (next) {
        const claims = claimsOf(next);
        for (const c of claims) scope.set(c.server.key, c.server.vs);
        this.realServers += next.server.reals.size;
        this.ports.set(name, { port: next, claims });
        this.claim(name, claims);
      }
    }
    const sets = new Map([...this.sets].map(([set, c]) => [set, c.delta(compareText)] as const));
    return {
      virtualServers: new Map([...scope].map(([key, vs]) => [key, { vs, desired: programmed(this.winners.get(key)) }])),
      clusterIP: sets.get(CLUSTER_IP_SET)!,
      loopBack: sets.get(LOOP_BACK_SET)!,
      sets,
      addresses: this.addresses.delta(compareAddresses),
      // Every service port left out of a virtual server this update touched,
      // changed or not (a changed port can push an unchanged one out).
      conflicts: this.conflictsIn(scope.keys()),
    };
  }

  /** The whole desired state, sorted as assembleDesired returns it. Cost: the whole state. */
  state(): DesiredIpvsState {
    const sets = Object.fromEntries([...this.sets].map(([set, c]) => [set, new Set(c.values())])) as unknown as Record<OwnedSetName, ReadonlySet<string>>;
    return {
      virtualServers: this.winnerServers(true),
      withheld: this.winnerServers(false),
      addresses: [...this.addresses.values()].sort(compareAddresses),
      clusterIPSet: sets[CLUSTER_IP_SET],
      loopBackSet: sets[LOOP_BACK_SET],
      sets,
      conflicts: this.conflictsIn(this.claims.keys()),
    };
  }

  /** The winners' virtual servers that are (`programmed`) or are not programmed, by key, sorted by key. */
  private winnerServers(programmed: boolean): Map<string, DesiredVirtualServer> {
    const winners = [...this.winners].filter(([, w]) => w.claim.programmed === programmed);
    return new Map(winners.sort(([a], [b]) => compareText(a, b)).map(([key, w]) => [key, w.claim.server]));
  }

  /** The service ports that claim one of these virtual servers and are not programmed there, sorted, each once. */
  private conflictsIn(keys: Iterable<string>): string[] {
    const conflicts = new Set<string>();
    for (const key of keys) {
      const winner = this.winners.get(key)?.name;
      for (const name of this.claims.get(key) ?? []) if (name !== winner) conflicts.add(name);
    }
    return [...conflicts].sort(compareText);
  }

  /** The virtual server programmed at `key` ({@link virtualServerKey}), if any. Cost: one lookup. */
  server(key: string): DesiredVirtualServer | undefined {
    return programmed(this.winners.get(key));
  }

  /** True when the service port that wins `key` ({@link virtualServerKey}) wants its virtual server withheld (desired.ts DesiredServicePort.withheld). Cost: one lookup. */
  isWithheld(key: string): boolean {
    const winner = this.winners.get(key);
    return winner !== undefined && !winner.claim.programmed;
  }

  /** The keys of every programmed virtual server, in no particular order. */
  *serverKeys(): IterableIterator<string> {
    for (const [key, w] of this.winners) if (w.claim.programmed) yield key;
  }

  /** Number of programmed virtual servers. */
  get serverCount(): number {
    return this.winners.size - this.withheld;
  }

  /** Number of distinct entries wanted in KUBE-CLUSTER-IP and KUBE-LOOP-BACK. */
  get setSizes(): { readonly clusterIP: number; readonly loopBack: number } {
    return { clusterIP: this.setSize(CLUSTER_IP_SET), loopBack: this.setSize(LOOP_BACK_SET) };
  }

  /** Number of distinct entries wanted in one of drover's sets. */
  setSize(set: OwnedSetName): number {
    return this.sets.get(set)!.size;
  }

  /** Number of service ports indexed (winners and conflicting ones). */
  get size(): number {
    return this.ports.size;
  }

  /** Endpoints of ClusterIP traffic over every service port indexed (each port's ClusterIP real servers), kept up to date by {@link update}. */
  get servingEndpoints(): number {
    return this.realServers;
  }

  private claim(name: string, claims: readonly Claim[]): void {
    for (const claim of claims) {
      const key = claim.server.key;
      const names = this.claims.get(key) ?? new Set<string>();
      names.add(name);
      this.claims.set(key, names);
      const winner = this.winners.get(key);
      if (winner && compareText(winner.name, name) < 0) continue;
      if (winner) this.uncount(winner.claim);
      this.winners.set(key, { name, claim });
      this.count(claim);
    }
  }

  private unclaim(name: string, claims: readonly Claim[]): void {
    for (const claim of claims) {
      const key = claim.server.key;
      const names = this.claims.get(key)!;
      names.delete(name);
      if (names.size === 0) this.claims.delete(key);
      if (this.winners.get(key)?.name !== name) continue;
      this.uncount(claim);
      this.winners.delete(key);
      if (names.size === 0) continue;
      const next = [...names].sort(compareText)[0]!;
      const successor = this.ports.get(next)!.claims.find((c) => c.server.key === key)!;
      this.winners.set(key, { name: next, claim: successor });
      this.count(successor);
    }
  }

  private count(claim: Claim): void {
    if (!claim.programmed) this.withheld++;
    for (const a of claim.addresses) this.addresses.inc(a);
    for (const e of claim.entries) this.sets.get(e.set)!.inc(e.entry);
  }

  private uncount(claim: Claim): void {
    if (!claim.programmed) this.withheld--;
    for (const a of claim.addresses) this.addresses.dec(a);
    for (const e of claim.entries) this.sets.get(e.set)!.dec(e.entry);
  }
}

/**
 * Put the service ports' shares together, in ServicePortName order: the
 * first of two service ports with the same ClusterIP:port/protocol wins, the
 * other is listed in `conflicts`. Pure.
 */
export function assembleDesired(ports: Iterable<DesiredServicePort>): DesiredIpvsState {
  return DesiredIndex.of(ports).state();
}

/**
 * The whole desired IPVS-mode state of `snapshot`, `family`'s view
 * (model/family.ts), each service port with the frontends it is served
 * with (model/frontend-index.ts settleView: a frontend two service ports
 * want is programmed for its owner only); `conflicts` names the service
 * ports refused one there too. Pure.
 * @throws IpvsValidationError or IpsetValidationError, see desiredServicePort (desired.ts).
 */
export function desiredIpvsState(snapshot: Snapshot, opts: IpvsPlanOptions, family: IPFamily = 'IPv4'): DesiredIpvsState {
  const { view: served, refusals } = settleView(snapshot, family);
  const state = assembleDesired([...served.services.values()].map((sp) => desiredServicePort(sp, opts, served.node)));
  if (refusals.length === 0) return state;
  // A service port refused a frontend is left out there, as one the index below leaves out.
  return { ...state, conflicts: [...new Set([...refusals.map((r) => r.servicePort), ...state.conflicts])].sort(compareText) };
}

/** The desired virtual servers of a snapshot (`family`'s view) by key, and the conflicting service ports left out. Pure. */
export function desiredVirtualServers(
  snapshot: Snapshot,
  opts: IpvsPlanOptions,
  family: IPFamily = 'IPv4',
): { servers: ReadonlyMap<string, DesiredVirtualServer>; conflicts: readonly string[] } {
  const d = desiredIpvsState(snapshot, opts, family);
  return { servers: d.virtualServers, conflicts: d.conflicts };
}
