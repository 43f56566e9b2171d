/**
 * The Kubernetes source (`--source kubernetes`): desired state from the API
 * server, through three informers (informer.ts) as kube-proxy has them
 * (cmd/kube-proxy/app/server.go): Services and EndpointSlices of every
 * namespace with the label selector
 * `!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name`
 * (objects of another service proxy, and the endpoints of headless
 * Services, are not drover's), and this node's own Node
 * (`metadata.name=<node name>`), whose labels give its zone. With
 * `headlessEndpoints` (`run --dns-address`) the EndpointSlices of headless
 * Services are listed and watched too ({@link DNS_SLICE_SELECTOR}), for
 * their DNS names only (model/types.ts Snapshot.dnsOnly): no mode sees them.
 *
 * It is a transport over decoder.ts, like the file source: each object is
 * validated on arrival (parse.ts, with the model's schemas) and held under
 * its "Kind/namespace/name"; each {@link KubernetesSource.load} hands the
 * Decoder one group per object that really changed since the previous load
 * (a modification whose parsed form is the same, such as a Node's status
 * heartbeat, is no change), so the change tracking costs what the changed
 * objects cost (the Snapshot rebuild is still O(all objects), decoder.ts).
 *
 * - **No sync on a partial view.** `load()` resolves only once every
 *   informer has completed its first list: `drover run` waits as long as it
 *   takes (retrying with backoff, logging each failure), a one-shot command
 *   fails after `listTimeoutMs` with an error naming what is missing.
 * - **Nothing lost, nothing twice.** A dropped watch is watched again from
 *   the last resourceVersion seen; a 410 Gone makes the informer list again,
 *   and each list is compared with what is held, so an object deleted while
 *   the watch was gone is seen as deleted, and one that did not change is
 *   not reported. The same event seen twice is one change.
 * - **Bad objects.** An object that fails validation is skipped with one
 *   error naming it (`kubernetes: EndpointSlice ns/name: field: detail`);
 *   when it was valid before, its last valid version is kept. While any
 *   object is invalid, the read is reported incomplete, so the proxier
 *   deletes nothing (proxier.ts), as for the file source.
 * - **Trigger times.** Each load reports, per changed service port, the
 *   `endpoints.kubernetes.io/last-change-trigger-time` annotations of the
 *   EndpointSlice changes behind it (kube-proxy's EndpointsChangeTracker,
 *   pkg/proxy/endpointschangetracker.go: times from before the source
 *   started are ignored, and a removed slice drops its Service's times),
 *   for the network programming latency.
 */
import { isDeepStrictEqual } from 'node:util';
import type { KubeConfig } from '@kubernetes/client-node';
import { DroverError } from '../../errors.ts';
import type { NodePortRange } from '../../model/claims.ts';
import type { ManifestError } from '../../model/errors.ts';
import { HEADLESS_LABEL, notOursReason, SERVICE_PROXY_NAME_LABEL } from '../../model/kubernetes.ts';
import type { ParsedObject } from '../../model/parsed.ts';
import type { Logger } from '../../util/log.ts';
import { Decoder, type GroupKey } from '../decoder.ts';
import { loadResult, type LoadResult } from '../file.ts';
import { KEEP_NOTE } from '../last-good.ts';
import { describeError, RESOURCES, ResourceInformer, type Backoff, type KubeObject, type ResourceKind } from './informer.ts';

/** kube-proxy's label selector of the Service and EndpointSlice informers. */
export const LABEL_SELECTOR = `!${HEADLESS_LABEL},!${SERVICE_PROXY_NAME_LABEL}`;
/**
 * The EndpointSlice informer's label selector when the node DNS serves
 * headless Services: {@link LABEL_SELECTOR} without `!service.kubernetes.io/headless`.
 */
export const DNS_SLICE_SELECTOR = `!${SERVICE_PROXY_NAME_LABEL}`;
/** The EndpointSlice annotation with the time of the change that caused the slice's last update (RFC 3339). */
export const LAST_CHANGE_TRIGGER_TIME = 'endpoints.kubernetes.io/last-change-trigger-time';
/** What error messages name as the origin of an API object. */
export const KUBERNETES_ORIGIN = 'kubernetes';

/** Options of {@link KubernetesSource}. */
export interface KubernetesSourceOptions {
  readonly config: KubeConfig;
  /** The API server's URL, for messages. */
  readonly server: string;
  /** This node's name (`--hostname-override`): its Node is the one watched. */
  readonly nodeName: string;
  /** Service CIDR for ClusterIP allocation, e.g. "10.96.0.0/12". */
  readonly serviceCIDR: string;
  /** NodePorts allowed (`--service-node-port-range`); default model/claims.ts DEFAULT_NODE_PORT_RANGE, 30000-32767. */
  readonly nodePortRange?: NodePortRange | undefined;
  readonly logger: Logger;
  /** When set, a load rejects when the first lists have not all completed this long (ms) after the source started; else it waits. */
  readonly listTimeoutMs?: number | undefined;
  /** Backoff of informer restarts (informer.ts DEFAULT_BACKOFF). */
  readonly backoff?: Backoff;
  /**
   * Receive the EndpointSlices of headless Services too ({@link DNS_SLICE_SELECTOR}),
   * for the node DNS's names of headless Services (`run --dns-address`); default false, as kube-proxy.
   */
  readonly headlessEndpoints?: boolean;
  /** Milliseconds since the epoch, for tests. */
  readonly now?: () => number;
}

/** A {@link LoadResult} with the trigger times of the changes. */
export interface KubernetesLoadResult extends LoadResult {
  /**
   * ServicePortName ("namespace/name:port") → the last-change-trigger-time
   * annotations (ms since the epoch) of the EndpointSlice changes applied
   * by this load to that service port, oldest first; only service ports in
   * `changed` (every service port at the first load) that have any.
   */
  readonly triggerTimes: ReadonlyMap<string, readonly number[]>;
}

/** What is held of one object: its last valid parsed form (when any), its current error and warnings. */
interface Held {
  readonly kind: ResourceKind;
  readonly object: ParsedObject | undefined;
  readonly error: ManifestError | undefined;
  readonly warnings: readonly ManifestError[];
}

/** See the module comment. */
export class KubernetesSource {
  private readonly opts: KubernetesSourceOptions;
  private readonly decoder: Decoder;
  private readonly informers: ResourceInformer[];
  private readonly now: () => number;
  /** Identity ("Kind/namespace/name") → what is held of it. */
  private readonly held = new Map<GroupKey, Held>();
  /** Objects changed since the last load: the parsed form to serve, or null when removed. */
  private pending = new Map<GroupKey, ParsedObject | null>();
  /** The identities each list in progress has handed over so far, per resource. */
  private readonly listing = new Map<ResourceKind, Set<GroupKey>>();
  /** "namespace/name" of a Service → trigger times of its EndpointSlice changes since the last load. */
  private triggers = new Map<string, number[]>();
  private startedAt: number | undefined;
  private onChange: (() => void) | undefined;
  private waiters: Array<{ resolve: () => void; reject: (err: Error) => void }> = [];
  private closed = false;
  private queue: Promise<unknown> = Promise.resolve();

  /** Throws Error when `opts.serviceCIDR` is not a valid service CIDR. Starts nothing until {@link load} or {@link watch}. */
  constructor(opts: KubernetesSourceOptions) {
    this.opts = opts;
    this.decoder = new Decoder({ serviceCIDR: opts.serviceCIDR, nodeName: opts.nodeName, ...(opts.nodePortRange !== undefined ? { nodePortRange: opts.nodePortRange } : {}) });
    this.now = opts.now ?? Date.now;
    const informer = (kind: ResourceKind, selectors: { labelSelector?: string; fieldSelector?: string }) =>
      new ResourceInformer(
        RESOURCES[kind],
        opts.config,
        selectors,
        {
          upsert: (o) => this.upsert(o),
          remove: (o) => this.removeKey(identityOf(o)),
          listPage: (items, first, last) => this.listPage(kind, items, first, last),
          error: (err, retryInMs) =>
            opts.logger.warn(
              { resource: RESOURCES[kind].plural, err: describeError(err), retryInMs },
              `Kubernetes ${RESOURCES[kind].plural} from ${opts.server}: ${describeError(err)}; retrying in ${retryInMs} ms`,
            ),
        },
        opts.backoff,
      );
    this.informers = [
      informer('Service', { labelSelector: LABEL_SELECTOR }),
      informer('EndpointSlice', { labelSelector: opts.headlessEndpoints === true ? DNS_SLICE_SELECTOR : LABEL_SELECTOR }),
      informer('Node', { fieldSelector: `metadata.name=${opts.nodeName}` }),
    ];
  }

  /** True once every informer has completed its first list. */
  get synced(): boolean {
    return this.informers.every((i) => i.listed);
  }

  /**
   * The desired state: waits for the first lists (see the module comment),
   * then applies what changed since the previous load. Calls are
   * serialised. Rejects with DroverError when `listTimeoutMs` passes first,
   * or when the source is closed while waiting.
   */
  load(): Promise<KubernetesLoadResult> {
    const run = this.queue.then(async () => {
      await this.untilSynced();
      return this.loadNow();
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Call `onChange` after every real change of desired state; starts the informers when not started. */
  watch(onChange: () => void): void {
    this.onChange = onChange;
    this.start();
  }

  /** Stop the informers; a load still waiting for the first lists rejects. Safe to call more than once. */
  async close(): Promise<void> {
    this.closed = true;
    this.onChange = undefined;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w.reject(new DroverError('the Kubernetes source was closed before its first lists completed'));
    await Promise.all(this.informers.map((i) => i.stop()));
  }

  private start(): void {
    if (this.startedAt !== undefined || this.closed) return;
    this.startedAt = this.now();
    this.opts.logger.info({ server: this.opts.server, node: this.opts.nodeName }, `watching Services, EndpointSlices and Node ${this.opts.nodeName} at ${this.opts.server}`);
    for (const i of this.informers) i.start();
  }

  private untilSynced(): Promise<void> {
    if (this.closed) return Promise.reject(new DroverError('the Kubernetes source is closed'));
    this.start();
    if (this.synced) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const waiter = { resolve, reject };
      this.waiters.push(waiter);
      const timeout = this.opts.listTimeoutMs;
      if (timeout === undefined) return;
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new DroverError(`timed out after ${timeout / 1000} s waiting for the first lists from the Kubernetes API server at ${this.opts.server}: ${this.missing()}`));
      }, Math.max(0, this.startedAt! + timeout - this.now()));
      waiter.resolve = () => {
        clearTimeout(timer);
        resolve();
      };
      waiter.reject = (err) => {
        clearTimeout(timer);
        reject(err);
      };
    });
  }

  /** What has not been listed yet, and why, e.g. "EndpointSlices not listed yet (connect ECONNREFUSED 127.0.0.1:6443)". */
  private missing(): string {
    return this.informers
      .filter((i) => !i.listed)
      .map((i) => `${i.resource.plural} not listed yet${i.lastError !== undefined ? ` (${i.lastError})` : ''}`)
      .join('; ');
  }

  private loadNow(): KubernetesLoadResult {
    const pending = this.pending;
    const triggers = this.triggers;
    this.pending = new Map();
    this.triggers = new Map();
    const upsert: Array<[GroupKey, readonly ParsedObject[]]> = [];
    const remove: GroupKey[] = [];
    for (const [key, o] of pending) {
      if (o === null) remove.push(key);
      else upsert.push([key, [o]]);
    }
    const built = this.decoder.apply({ upsert, remove });
    for (const e of built.newRefusals) this.opts.logger.warn({ object: `${e.kind}/${e.object}`, field: e.field }, e.message);
    const errors: ManifestError[] = [];
    const warnings: ManifestError[] = [];
    for (const h of this.held.values()) {
      if (h.error) errors.push(h.error);
      for (const w of h.warnings) warnings.push(w);
    }
    return { ...loadResult(built, errors, warnings), triggerTimes: triggerTimesByPort(built.snapshot.services, built.changed, triggers) };
  }

  /** An object added or modified (see the module comment for invalid and ignored ones). */
  private upsert(o: KubeObject): void {
    const key = identityOf(o);
    const kind = o.kind as ResourceKind;
    if (!this.isOurs(o)) {
      this.removeKey(key);
      return;
    }
    const r = this.decoder.parse({ file: KUBERNETES_ORIGIN, index: 0, raw: o });
    const before = this.held.get(key);
    if (r.status === 'ignored') {
      this.opts.logger.debug({ object: key, reason: r.reason }, `ignored ${key}: ${r.reason}`);
      this.removeKey(key);
      return;
    }
    if (r.status === 'error') {
      const error = before?.object ? r.error.withNote(KEEP_NOTE) : r.error;
      this.held.set(key, { kind, object: before?.object, error, warnings: before?.warnings ?? [] });
      if (before?.error?.message === error.message) return;
      this.opts.logger.warn({ object: key }, error.message);
      this.notify(); // the read is incomplete now
      return;
    }
    this.held.set(key, { kind, object: r.object, error: undefined, warnings: r.warnings });
    if (before?.object !== undefined && isDeepStrictEqual(before.object, r.object)) {
      if (before.error !== undefined) this.notify(); // valid again: the read may be whole
      return;
    }
    for (const w of r.warnings) this.opts.logger.warn({ object: key }, w.message);
    this.pending.set(key, r.object);
    if (r.object.kind === 'EndpointSlice') this.recordTrigger(`${r.object.namespace}/${r.object.serviceName}`, o);
    this.notify();
  }

  /** An object that is gone (deleted, left the selectors, or no longer readable by drover). */
  private removeKey(key: GroupKey): void {
    const before = this.held.get(key);
    if (before === undefined) return;
    this.held.delete(key);
    if (before.object !== undefined) {
      this.pending.set(key, null);
      if (before.object.kind === 'EndpointSlice') this.triggers.delete(`${before.object.namespace}/${before.object.serviceName}`);
    }
    // Also for an object that was only ever invalid: its error is gone, so the read may be whole again.
    this.notify();
  }

  /** Tell the watcher about a change, once every first list is in (before that, no load can run). */
  private notify(): void {
    if (this.synced) this.onChange?.();
  }

  /**
   * One page of a list of `kind`: upsert each item; with the last page,
   * remove what is held of that kind and was in none of the list's pages.
   */
  private listPage(kind: ResourceKind, items: readonly KubeObject[], first: boolean, last: boolean): void {
    let listed = this.listing.get(kind);
    if (first || listed === undefined) this.listing.set(kind, (listed = new Set()));
    for (const o of items) {
      listed.add(identityOf(o));
      this.upsert(o);
    }
    if (!last) return;
    this.listing.delete(kind);
    for (const [key, h] of [...this.held]) if (h.kind === kind && !listed.has(key)) this.removeKey(key);
    if (this.synced) {
      const waiters = this.waiters;
      this.waiters = [];
      for (const w of waiters) w.resolve();
    }
  }

  /**
   * Whether drover serves `o`: the informers' label selectors, and only this
   * node's Node (also checked here, whatever the server filtered). With
   * `headlessEndpoints`, an EndpointSlice labelled headless is served (to DNS alone).
   */
  private isOurs(o: KubeObject): boolean {
    if (o.kind === 'Node') return o.metadata.name === this.opts.nodeName;
    if (o.kind === 'EndpointSlice' && this.opts.headlessEndpoints === true) return o.metadata.labels?.[SERVICE_PROXY_NAME_LABEL] === undefined;
    return notOursReason(o.metadata.labels) === undefined;
  }

  /** Note the trigger time of a change to one of `service`'s EndpointSlices, when it is set, valid and after the start. */
  private recordTrigger(service: string, o: KubeObject): void {
    const value = o.metadata.annotations?.[LAST_CHANGE_TRIGGER_TIME];
    const t = value === undefined ? NaN : Date.parse(value);
    if (Number.isNaN(t) || t <= (this.startedAt ?? Infinity)) return;
    const list = this.triggers.get(service);
    if (list) list.push(t);
    else this.triggers.set(service, [t]);
  }
}

/** "Kind/namespace/name" of an API object (a Node has no namespace). */
function identityOf(o: KubeObject): GroupKey {
  const ns = o.kind === 'Node' ? '' : o.metadata.namespace || 'default';
  return `${o.kind}/${ns}/${o.metadata.name ?? ''}`;
}

/** The trigger times of each Service, for each of its service ports in `changed` (all of them when undefined). */
function triggerTimesByPort(
  services: ReadonlyMap<string, { readonly namespace: string; readonly name: string }>,
  changed: ReadonlySet<string> | undefined,
  triggers: ReadonlyMap<string, readonly number[]>,
): Map<string, readonly number[]> {
  const out = new Map<string, readonly number[]>();
  if (triggers.size === 0) return out;
  for (const key of changed ?? services.keys()) {
    const sp = services.get(key);
    const times = sp === undefined ? undefined : triggers.get(`${sp.namespace}/${sp.name}`);
    if (times !== undefined) out.set(key, [...times].sort((a, b) => a - b));
  }
  return out;
}
