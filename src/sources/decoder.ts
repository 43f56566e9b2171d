/**
 * Decoding desired state, apart from how it arrives: raw objects are
 * validated (parse.ts), the objects a source serves are kept in groups, and
 * every {@link Decoder.apply} rebuilds the Snapshot (normalise.ts: endpoint
 * matching, ClusterIP allocation, cross-object conflicts; the service ports
 * of a Service whose objects did not change are reused, see normalise.ts
 * BuildMemo) and says which service ports changed since the previous apply.
 *
 * A transport decides what a group is: the file source makes one group per
 * manifest file (all the objects it serves from that file, last valid
 * versions included, see last-good.ts); a source that watches an API makes
 * one group per object, keyed by its "Kind/namespace/name". Either way a
 * change names only the groups it touches, and the changed service ports
 * are found from them, after kube-proxy's ServiceChangeTracker and
 * EndpointsChangeTracker (pkg/proxy/servicechangetracker.go,
 * pkg/proxy/endpointschangetracker.go): every Service, EndpointSlice or
 * Endpoints object that was added, replaced or removed marks the service
 * ports of its Service ("namespace/name"; an object a group holds again,
 * the same object by reference, is not a change, and a changed identity
 * also marks through its other copies, since which copy counts may
 * change); a Pod marks every Service whose
 * selector selects it, before or after the change (selectors.ts); a Node
 * every Service with a selector (its zone goes into their Pod-derived
 * endpoints); and so do the services a cross-object rule (frontend
 * claims, claims.ts; allocation, exhaustion) may have moved; a marked service port whose ServicePort is the same before and
 * after is dropped, as the trackers drop a change whose previous and
 * current state are equal.
 *
 * The rebuild is normalise.ts's buildSnapshot over every object, except
 * for the most common change, which costs only the Services it touches: a
 * change of EndpointSlices or Endpoints alone, each of a Service that the
 * last build served (a Kubernetes Service with its own ClusterIP), none
 * of them in two copies, while no Pod is held. Such a change cannot move anything across Services, so the last
 * snapshot is patched with the service ports of those Services, built as
 * buildSnapshot builds them (normalise.ts endpointGroups, servicePorts).
 * So is a change of Kubernetes Services alone, each with a ClusterIP of
 * its own, when the last build refused, skipped and allocated nothing and
 * the changed Services claim no frontend another Service claims (claims.ts
 * frontendClaims) and leave no endpoint object with a warning: such a
 * change moves nothing across Services either (see patchServices).
 */
import { isDeepStrictEqual } from 'node:util';
import { parseServiceCIDR } from '../model/allocate.ts';
import type { ManifestError } from '../model/errors.ts';
import { claimsInRange, frontendClaims, type NodePortRange } from '../model/claims.ts';
import { BuildMemo, buildSnapshot, endpointGroups, servicePorts, type BuildResult } from '../model/normalise.ts';
import { orphanWarnings } from '../model/endpoints.ts';
import { compareStrings } from '../model/order.ts';
import { parseObject, type ParseResult } from '../model/parse.ts';
import type { ManifestObject, ParsedEndpoints, ParsedEndpointSlice, ParsedObject, ParsedService } from '../model/parsed.ts';
import { EMPTY_SNAPSHOT, type ServicePort, type Snapshot } from '../model/types.ts';
import { portsOfKey } from '../model/family.ts';
import { SelectorIndex } from './selectors.ts';

/**
 * A transport's name for a set of objects it replaces together: a manifest
 * file's path for the file source, "Kind/namespace/name" for one object of
 * an API watch. Groups are built in the order of their keys (by
 * compareStrings), which decides between two objects of the same identity.
 */
export type GroupKey = string;

/** What changed at the transport since the previous {@link Decoder.apply}. */
export interface DecoderChanges {
  /** Groups added or replaced, each with every object it serves now, in order (an empty list is the same as removing it). */
  readonly upsert: Iterable<readonly [GroupKey, readonly ParsedObject[]]>;
  /** Groups that are gone; an unknown key is ignored. */
  readonly remove: Iterable<GroupKey>;
}

/** Outcome of one {@link Decoder.apply}: normalise.ts's result and the changed service ports. */
export interface DecodeResult extends BuildResult {
  /**
   * ServicePortNames ("namespace/name:port", see normalise.ts
   * servicePortKey) added, removed or modified since the previous apply;
   * undefined at the first apply (everything is new).
   */
  readonly changed: ReadonlySet<string> | undefined;
  /**
   * The `refusals` that the previous apply did not have (all of them at the
   * first): what a source logs, so that each refusal is logged once while
   * it holds rather than at every load.
   */
  readonly newRefusals: readonly ManifestError[];
}

/**
 * Where a Decoder's ClusterIP allocations outlive the process (the
 * allocation state file, allocation-state.ts), so that a restarted drover
 * hands out the same addresses.
 */
export interface AllocationMemory {
  /** "namespace/name" → ClusterIP, as an earlier process left them. */
  readonly initial: ReadonlyMap<string, string>;
  /**
   * Record the allocations to remember now ("namespace/name" → ClusterIP,
   * sorted by key); called after an apply that changed them. Must not
   * throw (it runs inside {@link Decoder.apply}).
   */
  save(allocations: ReadonlyMap<string, string>): void;
}

/** Options of {@link Decoder}. */
export interface DecoderOptions {
  /** Service CIDR for ClusterIP allocation, e.g. "10.96.0.0/12". */
  readonly serviceCIDR: string;
  /** Allocations of earlier processes, and where to keep them; none: the allocation lives in memory only. */
  readonly allocations?: AllocationMemory;
  /** This node's name (BuildOptions.nodeName): which Node object is this node's, and whose endpoints are local without one. */
  readonly nodeName?: string;
  /** NodePorts allowed (`--service-node-port-range`, BuildOptions.nodePortRange); default 30000-32767. */
  readonly nodePortRange?: NodePortRange;
  /** False: every apply rebuilds the whole Snapshot, never patches it (see the module comment); for tests. Default true. */
  readonly patch?: boolean;
}

/**
 * The Service ("namespace/name") whose service ports a Service,
 * EndpointSlice or Endpoints object affects. (A Pod or a Node affects
 * the Services a {@link SelectorIndex} names; a Node also the endpoint
 * policy of every service port, so the proxier syncs in full when the
 * snapshot's node changes.)
 */
export function serviceOf(o: ParsedObject & { kind: 'Service' | 'EndpointSlice' | 'Endpoints' }): string {
  return o.kind === 'Service' ? `${o.namespace}/${o.name}` : `${o.namespace}/${o.serviceName}`;
}

/** Decodes the objects of one source; see the module comment. Not shared between sources. */
export class Decoder {
  private readonly serviceCIDR: string;
  private readonly nodeName: string | undefined;
  private readonly nodePortRange: NodePortRange | undefined;
  /** Parse result of each raw object (a transport hands the same object again while it is unchanged). */
  private readonly parsed = new WeakMap<ManifestObject, ParseResult>();
  private readonly groups = new Map<GroupKey, readonly ParsedObject[]>();
  /** The keys of `groups`, sorted by compareStrings (kept up to date by {@link Decoder.apply}, not sorted again). */
  private readonly keys = new SortedKeys();
  /** How many places among `groups` hold each object (a transport may hand the same object to two groups, or twice to one). */
  private readonly places = new Map<ParsedObject, number>();
  /** The group that holds each object among `groups` (the last one named, when several do). */
  private readonly groupOf = new Map<ParsedObject, GroupKey>();
  /** The Services with a selector among `groups`' objects. */
  private readonly selectors = new SelectorIndex();
  /**
   * Every object among `groups` by its identity ("Kind/namespace/name"),
   * duplicates included: the object itself while it is the only one (by far
   * the common case, and no Set to keep per object), a list of them otherwise.
   */
  private readonly copies = new Map<string, ParsedObject | ParsedObject[]>();
  /** The service ports of the last builds, for the Services whose objects did not change. */
  private readonly memo = new BuildMemo();
  private snapshot: Snapshot = EMPTY_SNAPSHOT;
  /** "namespace/name" → the ServicePortNames it has in `snapshot`. */
  private portsOf = new Map<string, string[]>();
  /** Services a cross-object error or a refusal named at the last apply (they may be served, or served whole, once the other side changes). */
  private crossErrors = new Set<string>();
  /** "namespace/name" → ClusterIP allocated at the last apply. */
  private allocated = new Map<string, string>();
  private first = true;
  /** The errors, warnings, allocations and notes of the last build. */
  private lastBuild: Omit<BuildResult, 'snapshot'> | undefined;
  /** "namespace/name" → the EndpointSlices and Endpoints among `groups`' objects that name that Service. */
  private readonly endpointObjects = new Map<string, Set<ParsedEndpointSlice | ParsedEndpoints>>();
  /** How many Services among `groups`' objects claim each frontend (claims.ts frontendClaims; Services with a ClusterIP given only). */
  private readonly claims = new Map<string, number>();
  /** How many Pods `groups` hold. */
  private pods = 0;
  private readonly patch: boolean;
  /** How many applies patched the last snapshot instead of building a whole one (see the module comment). */
  patches = 0;
  private readonly memory: AllocationMemory | undefined;
  /**
   * Allocations of an earlier process for services not built yet: each is
   * offered to allocation (normalise.ts `remembered`) until its service is
   * built or another service takes its address.
   */
  private remembered: Map<string, string>;
  /** What `memory` was last told (or held at the start). */
  private saved: Map<string, string>;

  /** Throws Error when `opts.serviceCIDR` is not a valid service CIDR (allocate.ts parseServiceCIDR). */
  constructor(opts: DecoderOptions) {
    parseServiceCIDR(opts.serviceCIDR);
    this.serviceCIDR = opts.serviceCIDR;
    this.nodeName = opts.nodeName;
    this.nodePortRange = opts.nodePortRange;
    this.patch = opts.patch ?? true;
    this.memory = opts.allocations;
    this.remembered = new Map(opts.allocations?.initial ?? []);
    this.saved = new Map(this.remembered);
  }

  /** The Snapshot of the last apply (empty before the first). */
  get current(): Snapshot {
    return this.snapshot;
  }

  /**
   * Validate one raw object (parse.ts parseObject). The result is cached for
   * as long as the transport hands out the same `o` (by reference), so an
   * unchanged object is not validated again. Never throws.
   */
  parse(o: ManifestObject): ParseResult {
    let r = this.parsed.get(o);
    if (r === undefined) this.parsed.set(o, (r = parseObject(o)));
    return r;
  }

  /**
   * Apply `changes` and rebuild the Snapshot. Marking service ports costs
   * what the changed groups hold (their objects before and after; for each
   * Pod among them, the Services with a selector in its namespace; for each
   * Node, every Service with a selector), plus the cross-object errors and the allocated ClusterIPs of this apply and the
   * previous one, and a pass over the changed groups; the rebuild itself is
   * a patch of the last snapshot for the changes the module comment names
   * (a copy of its maps), else normalise.ts's buildSnapshot over every
   * object (cheap for the Services it can reuse, see BuildMemo), and
   * indexing its service ports by Service.
   * Never throws (the service CIDR was checked by the constructor); every
   * problem with the objects is in `errors`.
   */
  apply(changes: DecoderChanges): DecodeResult {
    // How many more or fewer places each object is held in; an object held before and again (the same reference) is unchanged.
    const delta = new Map<ParsedObject, number>();
    const bump = (o: ParsedObject, by: number) => delta.set(o, (delta.get(o) ?? 0) + by);
    for (const key of changes.remove) {
      for (const o of this.groups.get(key) ?? []) bump(o, -1);
      if (this.groups.delete(key)) this.keys.delete(key);
    }
    for (const [key, objects] of changes.upsert) {
      for (const o of this.groups.get(key) ?? []) bump(o, -1);
      for (const o of objects) {
        bump(o, 1);
        this.groupOf.set(o, key);
      }
      if (objects.length === 0) {
        if (this.groups.delete(key)) this.keys.delete(key);
      } else {
        if (!this.groups.has(key)) this.keys.add(key);
        this.groups.set(key, objects);
      }
    }
    // Objects no longer held anywhere, and objects held for the first time; a changed object held in two places (the same reference twice) is left to a whole build.
    const gone: ParsedObject[] = [];
    const added: ParsedObject[] = [];
    let shared = false;
    for (const [o, by] of delta) {
      const before = this.places.get(o) ?? 0;
      const after = before + by;
      if (by !== 0 && (before > 1 || after > 1)) shared = true;
      if (after > 0) this.places.set(o, after);
      else {
        this.places.delete(o);
        this.groupOf.delete(o);
      }
      if (before > 0 && after === 0) gone.push(o);
      else if (before === 0 && after > 0) added.push(o);
    }
    // Services that stop or start selecting a Pod are marked by their own change, so the index after it is enough.
    this.selectors.update(gone, added);
    for (const o of gone) this.unindex(o);
    for (const o of added) this.index(o);
    // At the first apply everything is new, and nothing is marked.
    const marked = this.first ? new Set<string>() : this.mark(gone, added);

    const patched = this.patch && !this.first && !shared ? (this.patchEndpoints(gone, added) ?? this.patchServices(gone, added)) : undefined;
    if (patched !== undefined) return patched;

    // Everything below is O(all objects).
    const objects: ParsedObject[] = [];
    for (const k of this.keys.sorted()) for (const o of this.groups.get(k)!) objects.push(o);
    const before = this.snapshot;
    const built = buildSnapshot(objects, {
      serviceCIDR: this.serviceCIDR,
      previous: before,
      remembered: this.remembered,
      memo: this.memo,
      ...(this.nodeName !== undefined ? { nodeName: this.nodeName } : {}),
      ...(this.nodePortRange !== undefined ? { nodePortRange: this.nodePortRange } : {}),
    });
    const portsOf = new Map<string, string[]>();
    for (const sp of built.snapshot.services.values()) {
      const service = `${sp.namespace}/${sp.name}`;
      const list = portsOf.get(service);
      if (list) list.push(sp.key);
      else portsOf.set(service, [sp.key]);
    }
    // The IPv6 views' keys (family.ts) that the IPv4 view lacks: single-stack IPv6 Services.
    for (const sp of built.snapshot.ipv6Services?.values() ?? []) {
      if (built.snapshot.services.has(sp.key)) continue;
      const service = `${sp.namespace}/${sp.name}`;
      const list = portsOf.get(service);
      if (list) list.push(sp.key);
      else portsOf.set(service, [sp.key]);
    }
    const crossErrors = new Set([...built.errors, ...built.refusals].filter((e) => e.kind === 'Service' && e.object !== '').map((e) => e.object));
    const refusedBefore = new Set(this.lastBuild?.refusals.map((e) => e.message));
    const newRefusals = built.refusals.filter((e) => !refusedBefore.has(e.message));
    const allocated = new Map(built.allocations.map((a) => [a.key, a.clusterIP]));

    let changed: Set<string> | undefined;
    if (!this.first) {
      // Services moved by cross-object rules without a change of their own objects.
      for (const s of [...this.crossErrors, ...crossErrors]) marked.add(s);
      for (const [s, ip] of allocated) if (this.allocated.get(s) !== ip) marked.add(s);
      for (const s of this.allocated.keys()) if (!allocated.has(s)) marked.add(s);
      changed = new Set();
      for (const service of marked) {
        for (const key of [...(this.portsOf.get(service) ?? []), ...(portsOf.get(service) ?? [])]) {
          if (!isDeepStrictEqual(portsOfKey(before, key), portsOfKey(built.snapshot, key))) changed.add(key);
        }
      }
    }
    this.first = false;
    this.lastBuild = { errors: built.errors, warnings: built.warnings, refusals: built.refusals, allocations: built.allocations, notes: built.notes };
    this.snapshot = built.snapshot;
    this.portsOf = portsOf;
    this.crossErrors = crossErrors;
    this.allocated = allocated;
    this.remember(allocated);
    return { ...built, changed, newRefusals };
  }

  /**
   * The Services whose objects changed: those `gone` and `added` affect,
   * and those every other copy of their identities affects (another copy
   * may be the one that counts now: the first by group key wins). Called
   * after `copies` holds the change.
   */
  private mark(gone: readonly ParsedObject[], added: readonly ParsedObject[]): Set<string> {
    const marked = new Set<string>();
    for (const o of [...gone, ...added]) for (const s of this.affected(o)) marked.add(s);
    for (const identity of new Set([...gone, ...added].map((o) => o.identity))) {
      for (const o of this.copiesOf(identity)) for (const s of this.affected(o)) marked.add(s);
    }
    return marked;
  }

  /** The objects of `identity` among `groups`. */
  private copiesOf(identity: string): readonly ParsedObject[] {
    const held = this.copies.get(identity);
    return held === undefined ? [] : Array.isArray(held) ? held : [held];
  }

  private index(o: ParsedObject): void {
    const held = this.copies.get(o.identity);
    if (held === undefined) this.copies.set(o.identity, o);
    else if (!Array.isArray(held)) {
      if (held !== o) this.copies.set(o.identity, [held, o]);
    } else if (!held.includes(o)) held.push(o);
    if (o.kind === 'Pod') this.pods++;
    if (o.kind === 'Service') for (const c of claimsOf(o)) this.claims.set(c, (this.claims.get(c) ?? 0) + 1);
    if (o.kind === 'EndpointSlice' || o.kind === 'Endpoints') {
      const service = serviceOf(o);
      const objects = this.endpointObjects.get(service);
      if (objects) objects.add(o);
      else this.endpointObjects.set(service, new Set([o]));
    }
  }

  private unindex(o: ParsedObject): void {
    const held = this.copies.get(o.identity);
    if (held === o) this.copies.delete(o.identity);
    else if (Array.isArray(held)) {
      const i = held.indexOf(o);
      if (i >= 0) held.splice(i, 1);
      if (held.length === 1) this.copies.set(o.identity, held[0]!);
    }
    if (o.kind === 'Pod') this.pods--;
    if (o.kind === 'Service') {
      for (const c of claimsOf(o)) {
        const n = this.claims.get(c)! - 1;
        if (n > 0) this.claims.set(c, n);
        else this.claims.delete(c);
      }
    }
    if (o.kind === 'EndpointSlice' || o.kind === 'Endpoints') {
      const service = serviceOf(o);
      const objects = this.endpointObjects.get(service);
      objects?.delete(o);
      if (objects?.size === 0) this.endpointObjects.delete(service);
    }
  }

  /**
   * The result of a change of endpoint objects alone, patched into the last
   * snapshot (see the module comment), or undefined when the change is not
   * one of those and needs a whole build. Changes nothing but the memo when
   * it returns undefined. Costs what the touched Services hold, plus a copy
   * of the snapshot's map and a pass over the last warnings.
   */
  private patchEndpoints(gone: readonly ParsedObject[], added: readonly ParsedObject[]): DecodeResult | undefined {
    const last = this.lastBuild;
    if (last === undefined || this.pods > 0) return undefined;
    // The Service of each changed endpoint object; an identity that moves between Services is left to a whole build.
    const serviceOfIdentity = new Map<string, string>();
    // Copies of each changed identity before the change (the index holds those after it): one at most, before and after.
    const copiesBefore = new Map<string, number>();
    for (const o of gone) copiesBefore.set(o.identity, (copiesBefore.get(o.identity) ?? this.copiesOf(o.identity).length) + 1);
    for (const o of added) copiesBefore.set(o.identity, (copiesBefore.get(o.identity) ?? this.copiesOf(o.identity).length) - 1);
    for (const n of copiesBefore.values()) if (n > 1) return undefined;
    for (const o of [...gone, ...added]) {
      if (o.kind !== 'EndpointSlice' && o.kind !== 'Endpoints') return undefined;
      if (this.copiesOf(o.identity).length > 1) return undefined;
      const service = serviceOf(o);
      if ((serviceOfIdentity.get(o.identity) ?? service) !== service) return undefined;
      serviceOfIdentity.set(o.identity, service);
    }
    const before = this.snapshot;
    const updates: ServicePort[] = [];
    const updates6: ServicePort[] = [];
    let warnings = last.warnings;
    for (const service of new Set(serviceOfIdentity.values())) {
      const keys = this.portsOf.get(service);
      if (keys === undefined) return undefined; // not served: skipped by a cross-object rule, or no ports
      if (this.crossErrors.has(service)) return undefined; // served without a refused frontend: claims.ts decides again
      const svc = this.onlyCopy(`Service/${service}`);
      // A Service of either family or both: its IPv4 view at `clusterIP`, its IPv6 view at its IPv6 ClusterIP (family.ts, normalise.ts).
      if (svc?.kind !== 'Service' || svc.source !== 'kubernetes') return undefined;
      const ip6 = svc.clusterIPs.find((c) => c.family === 'IPv6')?.ip;
      if (svc.clusterIP === undefined && ip6 === undefined) return undefined;
      const objects = [...(this.endpointObjects.get(service) ?? [])].sort((a, b) => compareStrings(a.name, b.name));
      if (objects.some((o) => this.onlyCopy(o.identity) !== o)) return undefined;
      const { groups, warnings: serviceWarnings, notes } = groupsOf(svc, service, objects);
      if (notes.length > 0) return undefined;
      const keySet = new Set(keys);
      // Each family's service ports must be those the last build served, in that family's view.
      const built = (ip: string | undefined, view: ReadonlyMap<string, ServicePort> | undefined): readonly ServicePort[] | undefined => {
        if (ip === undefined) return [];
        const ports = servicePorts(svc, ip, groups, this.memo);
        return ports.length === keys.length && ports.every((p) => keySet.has(p.key) && view?.has(p.key) === true) ? ports : undefined;
      };
      const ports4 = built(svc.clusterIP, before.services);
      const ports6 = built(ip6, before.ipv6Services);
      if (ports4 === undefined || ports6 === undefined) return undefined;
      // This Service's warnings, on its endpoint objects before and after the change, stand together: replace them in place.
      const identities = new Set(objects.map((o) => o.identity));
      for (const [identity, s] of serviceOfIdentity) if (s === service) identities.add(identity);
      const replaced = replaceRun(warnings, (w) => identities.has(`${w.kind}/${w.object}`), serviceWarnings);
      if (replaced === undefined) return undefined;
      warnings = replaced;
      for (const sp of ports4) updates.push(sp);
      for (const sp of ports6) updates6.push(sp);
    }

    const changed = new Set<string>();
    const patched = (view: ReadonlyMap<string, ServicePort>, ports: readonly ServicePort[], always = false): ReadonlyMap<string, ServicePort> => {
      if (ports.length === 0 && !always) return view;
      const out = new Map(view);
      for (const sp of ports) {
        if (!isDeepStrictEqual(view.get(sp.key), sp)) changed.add(sp.key);
        out.set(sp.key, sp);
      }
      return out;
    };
    // The IPv4 map is always a new one; the IPv6 one is new only when it changed.
    const services = patched(before.services, updates, true);
    const ipv6Services = before.ipv6Services === undefined ? undefined : patched(before.ipv6Services, updates6);
    const snapshot: Snapshot = Object.freeze({
      services,
      ...(ipv6Services !== undefined ? { ipv6Services } : {}),
      ...(before.node !== undefined ? { node: before.node } : {}),
      ...(before.dnsOnly !== undefined ? { dnsOnly: before.dnsOnly } : {}),
    });
    this.snapshot = snapshot;
    this.lastBuild = { ...last, warnings };
    this.patches++;
    return { snapshot, errors: last.errors, warnings, refusals: last.refusals, allocations: last.allocations, notes: last.notes, changed, newRefusals: [] };
  }

  /**
   * The result of a change of Services alone, patched into the last
   * snapshot, or undefined when the change is not one of those and needs a
   * whole build. Only a change that cannot move anything across Services
   * is patched: the last build had no errors, refusals, allocations or
   * notes, and no Pod is held (so every Service held was served whole,
   * none allocated, and claims.ts found no clash); each changed Service,
   * before and after, is a proxied Kubernetes Service with a ClusterIP of
   * its own, one copy of it held, served by the last build (before) and
   * claiming no frontend another Service held claims, with its NodePorts
   * in range (after: then claims.ts keeps it whole and it takes nothing
   * from another); and none of its endpoint objects gets a warning after
   * the change (their warnings before are dropped). Changes nothing when
   * it returns undefined. Costs what the changed Services hold, plus a copy
   * of the snapshot's maps and a pass over the last warnings.
   */
  private patchServices(gone: readonly ParsedObject[], added: readonly ParsedObject[]): DecodeResult | undefined {
    const last = this.lastBuild;
    if (last === undefined || this.pods > 0 || last.errors.length > 0 || last.refusals.length > 0 || last.allocations.length > 0 || last.notes.length > 0) return undefined;
    const proxied = (o: ParsedObject | undefined): o is ParsedService =>
      o?.kind === 'Service' && o.source === 'kubernetes' && o.dnsOnly === undefined && o.ports.length > 0 && o.clusterIPs.length > 0 && claimsOf(o).size > 0;
    const services = new Set<string>();
    for (const o of [...gone, ...added]) {
      if (!proxied(o)) return undefined;
      services.add(serviceOf(o));
    }
    // One copy of each changed identity before and after (after: the index; before: the index undone).
    const copiesBefore = new Map<string, number>();
    for (const o of gone) copiesBefore.set(o.identity, (copiesBefore.get(o.identity) ?? this.copiesOf(o.identity).length) + 1);
    for (const o of added) copiesBefore.set(o.identity, (copiesBefore.get(o.identity) ?? this.copiesOf(o.identity).length) - 1);
    for (const n of copiesBefore.values()) if (n > 1) return undefined;
    for (const o of gone) if (o.kind !== 'Service' || !this.portsOf.has(serviceOf(o))) return undefined; // not served whole by the last build
    const range = this.nodePortRange;
    const before = this.snapshot;
    const updates: ServicePort[] = [];
    const updates6: ServicePort[] = [];
    const dropped = new Set<string>();
    const endpointIdentities = new Set<string>();
    const orphaned: Array<ParsedEndpointSlice | ParsedEndpoints> = [];
    for (const service of services) {
      const held = this.copies.get(`Service/${service}`);
      if (Array.isArray(held)) return undefined;
      for (const key of this.portsOf.get(service) ?? []) dropped.add(key);
      const objects = [...(this.endpointObjects.get(service) ?? [])].sort((a, b) => compareStrings(a.name, b.name));
      for (const o of objects) {
        if (this.onlyCopy(o.identity) !== o) return undefined;
        endpointIdentities.add(o.identity);
      }
      if (held === undefined) {
        for (const o of objects) orphaned.push(o);
        continue;
      }
      if (!proxied(held) || !claimsInRange(held, range)) return undefined;
      for (const c of claimsOf(held)) if (this.claims.get(c) !== 1) return undefined;
      const { groups, warnings: serviceWarnings, notes } = groupsOf(held, service, objects);
      if (serviceWarnings.length > 0 || notes.length > 0) return undefined;
      const ip6 = held.clusterIPs.find((c) => c.family === 'IPv6')?.ip;
      if (held.clusterIP !== undefined) for (const sp of servicePorts(held, held.clusterIP, groups, this.memo)) updates.push(sp);
      if (ip6 !== undefined) for (const sp of servicePorts(held, ip6, groups, this.memo)) updates6.push(sp);
    }

    // Each view in key order, as buildSnapshot sorts it: the kept service ports merged with the new ones.
    const merged = (view: ReadonlyMap<string, ServicePort> | undefined, ports: ServicePort[]): Map<string, ServicePort> => {
      ports.sort((a, b) => compareStrings(a.key, b.key));
      const out = new Map<string, ServicePort>();
      let i = 0;
      for (const [key, sp] of view ?? []) {
        if (dropped.has(key)) continue;
        for (; i < ports.length && compareStrings(ports[i]!.key, key) < 0; i++) out.set(ports[i]!.key, ports[i]!);
        out.set(key, sp);
      }
      for (; i < ports.length; i++) out.set(ports[i]!.key, ports[i]!);
      return out;
    };
    const services4 = merged(before.services, updates);
    const services6 = merged(before.ipv6Services, updates6);
    const snapshot: Snapshot = Object.freeze({
      services: services4,
      ...(services6.size > 0 ? { ipv6Services: services6 } : {}),
      ...(before.node !== undefined ? { node: before.node } : {}),
      ...(before.dnsOnly !== undefined ? { dnsOnly: before.dnsOnly } : {}),
    });
    let warnings = last.warnings.some((w) => endpointIdentities.has(`${w.kind}/${w.object}`)) ? last.warnings.filter((w) => !endpointIdentities.has(`${w.kind}/${w.object}`)) : last.warnings;
    if (orphaned.length > 0) {
      const placed = this.placeOrphans(warnings, orphaned);
      if (placed === undefined) return undefined;
      warnings = placed;
    }

    // The changed services' keys, as a whole build indexes them: IPv4 ones in key order, then IPv6-only ones.
    const changed = new Set<string>();
    for (const service of services) {
      const keys: string[] = [];
      for (const sp of updates) if (`${sp.namespace}/${sp.name}` === service) keys.push(sp.key);
      for (const sp of updates6) if (`${sp.namespace}/${sp.name}` === service && !services4.has(sp.key)) keys.push(sp.key);
      for (const key of [...(this.portsOf.get(service) ?? []), ...keys]) {
        if (!isDeepStrictEqual(portsOfKey(before, key), portsOfKey(snapshot, key))) changed.add(key);
      }
      if (keys.length > 0) this.portsOf.set(service, keys);
      else this.portsOf.delete(service);
    }
    this.snapshot = snapshot;
    this.lastBuild = { ...last, warnings };
    this.patches++;
    return { snapshot, errors: last.errors, warnings, refusals: last.refusals, allocations: last.allocations, notes: last.notes, changed, newRefusals: [] };
  }

  /**
   * `warnings` (of a build without errors) with the warnings of endpoint
   * objects whose Service is gone (`orphaned`; `warnings` has none of
   * theirs) placed as buildSnapshot places them: first come the warnings of every
   * endpoint object whose Service is not held (or is a Shepherd one), in
   * the order of the objects (EndpointSlices before Endpoints, then by
   * group key, then by place in the group: endpoints.ts orphanWarnings);
   * undefined when a warning's object is not found.
   */
  private placeOrphans(warnings: readonly ManifestError[], orphaned: readonly (ParsedEndpointSlice | ParsedEndpoints)[]): ManifestError[] | undefined {
    type Placed = { readonly w: ManifestError; readonly o: ParsedEndpointSlice | ParsedEndpoints };
    const at = (o: ParsedEndpointSlice | ParsedEndpoints): [number, GroupKey, number] | undefined => {
      const group = this.groupOf.get(o);
      const index = group === undefined ? -1 : (this.groups.get(group)?.indexOf(o) ?? -1);
      return group === undefined || index < 0 ? undefined : [o.kind === 'EndpointSlice' ? 0 : 1, group, index];
    };
    const before = (a: [number, GroupKey, number], b: [number, GroupKey, number]) => a[0] - b[0] || compareStrings(a[1], b[1]) || a[2] - b[2];
    // The run of orphan warnings that starts the list.
    const run: Array<Placed & { readonly at: [number, GroupKey, number] }> = [];
    for (const w of warnings) {
      if (w.kind !== 'EndpointSlice' && w.kind !== 'Endpoints') break;
      const o = this.onlyCopy(`${w.kind}/${w.object}`);
      if (o?.kind !== 'EndpointSlice' && o?.kind !== 'Endpoints') return undefined;
      const svc = this.copies.get(`Service/${serviceOf(o)}`);
      if (Array.isArray(svc)) return undefined;
      if (svc?.kind === 'Service' && svc.source === 'kubernetes') break; // its Service's endpoint-port warnings
      const where = at(o);
      if (where === undefined) return undefined;
      run.push({ w, o, at: where });
    }
    const added = orphanWarnings(new Map(), orphaned);
    for (const [i, o] of orphaned.entries()) {
      const where = at(o);
      if (where === undefined) return undefined;
      const j = run.findIndex((r) => before(where, r.at) < 0);
      run.splice(j < 0 ? run.length : j, 0, { w: added[i]!, o, at: where });
    }
    return [...run.map((r) => r.w), ...warnings.slice(run.length - orphaned.length)];
  }

  /** The one object of `identity` among `groups`' objects, or undefined when there is none or more than one. */
  private onlyCopy(identity: string): ParsedObject | undefined {
    const held = this.copies.get(identity);
    return Array.isArray(held) ? undefined : held;
  }

  /** The Services whose service ports a change of `o` may move (see the module comment). */
  private affected(o: ParsedObject): readonly string[] {
    switch (o.kind) {
      case 'Pod':
        return this.selectors.servicesOf(o);
      case 'Node':
        return this.selectors.all();
      default:
        return [serviceOf(o)];
    }
  }

  /**
   * Forget the remembered allocations of services the last apply did not
   * build, and save what changed: to call after a load that read the
   * whole source, which says those services are gone. (Until then their
   * addresses are kept from other services, normalise.ts `remembered`.)
   */
  forgetAbsent(): void {
    if (this.memory === undefined || this.remembered.size === 0) return;
    this.remembered.clear();
    this.remember(this.allocated);
  }

  /** Forget the remembered allocations that `allocated` supersedes, and save what changed. */
  private remember(allocated: ReadonlyMap<string, string>): void {
    if (this.memory === undefined) return;
    const taken = new Set(allocated.values());
    for (const [key, ip] of this.remembered) if (allocated.has(key) || taken.has(ip)) this.remembered.delete(key);
    const now = new Map([...allocated, ...this.remembered].sort(([a], [b]) => compareStrings(a, b)));
    if (isDeepStrictEqual(now, this.saved)) return;
    this.saved = now;
    this.memory.save(now);
  }
}

/** The frontends each Service object claims (claims.ts frontendClaims), made once per object; none for a Service without a ClusterIP given or without ports. */
const claimsMemo = new WeakMap<ParsedService, ReadonlySet<string>>();
function claimsOf(svc: ParsedService): ReadonlySet<string> {
  let claims = claimsMemo.get(svc);
  if (claims === undefined) {
    const ip6 = svc.clusterIPs.find((c) => c.family === 'IPv6')?.ip;
    const given = svc.clusterIPs.length > 0 && svc.ports.length > 0 && (svc.clusterIP !== undefined || ip6 !== undefined);
    claims = given ? frontendClaims({ svc, key: serviceOf(svc), ip: svc.clusterIP, ip6 }) : new Set();
    claimsMemo.set(svc, claims);
  }
  return claims;
}

/** No Pods and no zones, for endpointGroups when no Pod is held. */
const NO_PODS = new Map<string, never[]>();
const NO_ZONES = new Map<string, string>();

/**
 * The endpoint groups Service `svc` ("namespace/name" `service`) takes
 * from its endpoint `objects` (sorted by name) while no Pod is held, with
 * the warnings and notes they bring, as buildSnapshot makes them
 * (normalise.ts endpointGroups).
 */
function groupsOf(
  svc: ParsedService,
  service: string,
  objects: readonly (ParsedEndpointSlice | ParsedEndpoints)[],
): { groups: ReturnType<typeof endpointGroups>; warnings: ManifestError[]; notes: string[] } {
  const slices = objects.filter((o): o is ParsedEndpointSlice => o.kind === 'EndpointSlice');
  const legacy = objects.filter((o): o is ParsedEndpoints => o.kind === 'Endpoints');
  const warnings: ManifestError[] = [];
  const notes: string[] = [];
  const groups = endpointGroups(
    svc,
    service,
    slices.length > 0 ? new Map([[service, slices]]) : new Map(),
    legacy.length > 0 ? new Map([[service, legacy]]) : new Map(),
    NO_PODS,
    NO_ZONES,
    warnings,
    notes,
  );
  return { groups, warnings, notes };
}

/**
 * `list` with its run of items matching `belongs` replaced by `items`;
 * undefined when the matching items do not stand together, or there are
 * none and `items` is not empty (where they would go is not known).
 */
function replaceRun<T>(list: T[], belongs: (item: T) => boolean, items: readonly T[]): T[] | undefined {
  const at = list.findIndex(belongs);
  if (at < 0) return items.length === 0 ? list : undefined;
  let end = at;
  while (end < list.length && belongs(list[end]!)) end++;
  for (let i = end; i < list.length; i++) if (belongs(list[i]!)) return undefined;
  return [...list.slice(0, at), ...items, ...list.slice(end)];
}

/**
 * A set of group keys that stays sorted by compareStrings: adding or
 * deleting one costs a binary search and a move of the keys after it, not a
 * sort of them all. Many changes at once (the first apply, a relist) are
 * sorted together instead.
 */
export class SortedKeys {
  private list: string[] = [];
  /** Keys added since the list was last sorted, not in `list` yet. */
  private pending: string[] = [];

  /** Add `key`, which must not be held. */
  add(key: string): void {
    this.pending.push(key);
  }

  /** Delete `key`, which must be held. */
  delete(key: string): void {
    const p = this.pending.indexOf(key);
    if (p >= 0) {
      this.pending.splice(p, 1);
      return;
    }
    const at = this.search(key);
    if (this.list[at] === key) this.list.splice(at, 1);
  }

  /** Every key held, sorted by compareStrings; valid until the next change. */
  sorted(): readonly string[] {
    if (this.pending.length > 0) {
      if (this.pending.length > 8) this.list = [...this.list, ...this.pending].sort(compareStrings);
      else for (const key of this.pending) this.list.splice(this.search(key), 0, key);
      this.pending = [];
    }
    return this.list;
  }

  /** The first index of `list` whose key is not before `key`. */
  private search(key: string): number {
    let lo = 0;
    let hi = this.list.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compareStrings(this.list[mid]!, key) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
