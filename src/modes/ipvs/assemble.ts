/**
 * IPVS mode's desired state put together from the service ports' shares
 * (desired.ts, desiredServicePort), and kept up to date one service port at
 * a time, so that a partial sync costs what changed and not what exists.
 *
 * When two service ports have the same ClusterIP:port/protocol, the first in
 * ServicePortName order wins and the other contributes nothing (the model
 * refuses such input; this is a second line of defence). The index keeps, for every virtual server,
 * the service ports that claim it, and for every kube-ipvs0 address and
 * ipset entry how many winning service ports want it (two services may share
 * a ClusterIP, or target the same endpoint). {@link DesiredIndex.update}
 * replaces some service ports and returns exactly what became wanted and
 * what stopped being wanted.
 */
import type { Snapshot } from '../../model/types.ts';
import type { VirtualServerKey } from './codec.ts';
import { compareAddresses } from '../../model/addr.ts';
import { compareText, desiredServicePort, type DesiredIpvsState, type DesiredServicePort, type DesiredVirtualServer, type IpvsPlanOptions } from './desired.ts';

/** What one {@link DesiredIndex.update} changed in the desired state. */
export interface DesiredDelta {
  /** Every virtual server the changed service ports had or have, by key, with what is wanted there now (undefined: nothing). */
  readonly virtualServers: ReadonlyMap<string, { readonly vs: VirtualServerKey; readonly desired: DesiredVirtualServer | undefined }>;
  /** KUBE-CLUSTER-IP entries that became wanted and that stopped being wanted, each sorted. */
  readonly clusterIP: EntryDelta;
  /** KUBE-LOOP-BACK entries, as above. */
  readonly loopBack: EntryDelta;
  /** ClusterIPs to bind to and unbind from kube-ipvs0, each sorted numerically. */
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
 * The desired state of every service port, updated in place. Not thread
 * safe; the IPVS backend uses it inside its sync lock and drops it after a
 * failed sync.
 */
export class DesiredIndex {
  private readonly ports = new Map<string, DesiredServicePort>();
  /** Virtual server key → the service ports that claim it. */
  private readonly claims = new Map<string, Set<string>>();
  /** Virtual server key → the service port programmed there. */
  private readonly winners = new Map<string, DesiredServicePort>();
  private readonly addresses = new Counted();
  private readonly clusterIP = new Counted();
  private readonly loopBack = new Counted();
  private realServers = 0;

  /** An index of `ports`. */
  static of(ports: Iterable<DesiredServicePort>): DesiredIndex {
    const index = new DesiredIndex();
    index.update(new Map([...ports].map((p) => [p.server.servicePort, p])));
    return index;
  }

  /**
   * Replace the service ports in `changes` (by ServicePortName; undefined
   * removes one) and return what that changed. Cost: the changed service
   * ports' real servers, not the whole state.
   */
  update(changes: ReadonlyMap<string, DesiredServicePort | undefined>): DesiredDelta {
    for (const c of [this.addresses, this.clusterIP, this.loopBack]) c.begin();
    const scope = new Map<string, VirtualServerKey>();
    for (const [name, next] of changes) {
      const before = this.ports.get(name);
      if (before) {
        scope.set(before.server.key, before.server.vs);
        this.unclaim(name, before);
        this.realServers -= before.server.reals.size;
      }
      if (next) {
        scope.set(next.server.key, next.server.vs);
        this.realServers += next.server.reals.size;
        this.ports.set(name, next);
        this.claim(name, next);
      } else this.ports.delete(name);
    }
    return {
      virtualServers: new Map([...scope].map(([key, vs]) => [key, { vs, desired: this.winners.get(key)?.server }])),
      clusterIP: this.clusterIP.delta(compareText),
      loopBack: this.loopBack.delta(compareText),
      addresses: this.addresses.delta(compareAddresses),
      // Every service port left out of a virtual server this update touched,
      // changed or not (a changed port can push an unchanged one out).
      conflicts: this.conflictsIn(scope.keys()),
    };
  }

  /** The whole desired state, sorted as assembleDesired returns it. Cost: the whole state. */
  state(): DesiredIpvsState {
    return {
      virtualServers: new Map([...this.winners].sort(([a], [b]) => compareText(a, b)).map(([key, p]) => [key, p.server])),
      addresses: [...this.addresses.values()].sort(compareAddresses),
      clusterIPSet: new Set(this.clusterIP.values()),
      loopBackSet: new Set(this.loopBack.values()),
      conflicts: this.conflictsIn(this.claims.keys()),
    };
  }

  /** The service ports that claim one of these virtual servers and are not programmed there, sorted. */
  private conflictsIn(keys: Iterable<string>): string[] {
    const conflicts: string[] = [];
    for (const key of keys) {
      const winner = this.winners.get(key)?.server.servicePort;
      for (const name of this.claims.get(key) ?? []) if (name !== winner) conflicts.push(name);
    }
    return conflicts.sort(compareText);
  }

  /** The virtual server programmed at `key` ({@link virtualServerKey}), if any. Cost: one lookup. */
  server(key: string): DesiredVirtualServer | undefined {
    return this.winners.get(key)?.server;
  }

  /** The keys of every programmed virtual server, in no particular order. */
  serverKeys(): IterableIterator<string> {
    return this.winners.keys();
  }

  /** Number of programmed virtual servers. */
  get serverCount(): number {
    return this.winners.size;
  }

  /** Number of distinct entries wanted in KUBE-CLUSTER-IP and KUBE-LOOP-BACK. */
  get setSizes(): { readonly clusterIP: number; readonly loopBack: number } {
    return { clusterIP: this.clusterIP.size, loopBack: this.loopBack.size };
  }

  /** Number of service ports indexed (winners and conflicting ones). */
  get size(): number {
    return this.ports.size;
  }

  /** Serving endpoints over every service port indexed (each port's real servers), kept up to date by {@link update}. */
  get servingEndpoints(): number {
    return this.realServers;
  }

  private claim(name: string, port: DesiredServicePort): void {
    const key = port.server.key;
    const names = this.claims.get(key) ?? new Set<string>();
    names.add(name);
    this.claims.set(key, names);
    const winner = this.winners.get(key);
    if (winner && compareText(winner.server.servicePort, name) < 0) return;
    if (winner) this.uncount(winner);
    this.winners.set(key, port);
    this.count(port);
  }

  private unclaim(name: string, port: DesiredServicePort): void {
    const key = port.server.key;
    const names = this.claims.get(key)!;
    names.delete(name);
    if (names.size === 0) this.claims.delete(key);
    if (this.winners.get(key) !== port) return;
    this.uncount(port);
    this.winners.delete(key);
    if (names.size === 0) return;
    const next = [...names].sort(compareText)[0]!;
    const successor = this.ports.get(next)!;
    this.winners.set(key, successor);
    this.count(successor);
  }

  private count(port: DesiredServicePort): void {
    this.addresses.inc(port.server.vs.address);
    this.clusterIP.inc(port.clusterIPEntry);
    for (const e of port.loopBackEntries) this.loopBack.inc(e);
  }

  private uncount(port: DesiredServicePort): void {
    this.addresses.dec(port.server.vs.address);
    this.clusterIP.dec(port.clusterIPEntry);
    for (const e of port.loopBackEntries) this.loopBack.dec(e);
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
 * The whole desired IPVS-mode state of a snapshot. Pure.
 * @throws IpvsValidationError or IpsetValidationError, see desiredServicePort (desired.ts).
 */
export function desiredIpvsState(snapshot: Snapshot, opts: IpvsPlanOptions): DesiredIpvsState {
  return assembleDesired([...snapshot.services.values()].map((sp) => desiredServicePort(sp, opts, snapshot.node)));
}

/** The desired virtual servers of a snapshot by key, and the conflicting service ports left out. Pure. */
export function desiredVirtualServers(snapshot: Snapshot, opts: IpvsPlanOptions): { servers: ReadonlyMap<string, DesiredVirtualServer>; conflicts: readonly string[] } {
  const d = desiredIpvsState(snapshot, opts);
  return { servers: d.virtualServers, conflicts: d.conflicts };
}
