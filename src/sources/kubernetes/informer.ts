/**
 * One informer of the Kubernetes source: list, then watch from the list's
 * resourceVersion, on one resource (client-go's reflector,
 * tools/cache/reflector.go), over the client library's typed list calls
 * and its Watch stream:
 *
 *   - watch bookmarks (`allowWatchBookmarks=true`) and a server-side watch
 *     timeout of 5-10 minutes, as client-go's reflector asks for, so that a
 *     watch is renewed from a recent resourceVersion instead of hanging on
 *     a half-open connection; a watch the server ends is opened again from
 *     the last resourceVersion seen, after the backoff when it ended
 *     within 1 s with no event (client-go's "very short watch");
 *   - a 410 Gone (the watch request's status, or an ERROR event whose
 *     Status has code 410) lists again; an ERROR event ends its watch
 *     (what the stream sends after it is not read). A 410 that comes less
 *     than {@link QUICK_GONE_MS} after the list it watches from, when the
 *     one before did too, lists again only after the backoff, growing with
 *     each such 410 in a row,
 *     so that a server that answers every watch with 410 is not listed in
 *     a loop (client-go's reflector backs off before every relist);
 *   - a list the server has not answered within {@link LIST_TIMEOUT_MS}
 *     is aborted and counts as a failed list (the API server ends a list
 *     after 60 s itself, --request-timeout; a list with no answer at all is
 *     a connection that died, which would otherwise stop the informer for
 *     good);
 *   - any other failure (a dropped watch connection, another ERROR event, a
 *     failed list, an unreachable server) is reported and retried after a
 *     backoff of 1 s doubling up to 30 s (reset once a list or a watch
 *     event arrives), from the last resourceVersion seen, so no event is
 *     lost;
 *   - a list answer without an `items` list, or with an item that has no
 *     name (`{}` or `[1]` from a proxy in between), is a failed
 *     list, never an empty one: taken as empty, it would delete every
 *     object of the resource;
 *   - a list is read in pages of {@link LIST_PAGE_SIZE} objects (`limit`
 *     and `continue`, as client-go's pager does for its informers), each
 *     page handed over as it arrives ({@link InformerHandlers.listPage}),
 *     so that neither the answer nor its objects are ever held whole (at
 *     10,000 Services and their EndpointSlices a single answer is tens of
 *     megabytes of JSON, and the client library's objects several times
 *     that); the last page tells the source the list is whole, so that it
 *     can compare it with what it holds and see what was deleted while the
 *     watch was gone. A `continue` token the server no longer knows (410
 *     Expired) starts the list again from its first page, once; any other
 *     failure of a page is a failed list (retried after the backoff), and
 *     what earlier pages handed over stays without deleting anything.
 *
 * It keeps no copy of the objects: the source keeps what it normalised.
 *
 * List items carry no `kind` or `apiVersion` (the API server leaves them
 * out); every object handed over has them set from the resource.
 */
import {
  CoreV1Api,
  DiscoveryV1Api,
  Watch,
  type ConfigurationOptions,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';

/** The resources the source watches. */
export type ResourceKind = 'Service' | 'EndpointSlice' | 'Node';

/** What the source needs to know of one resource. */
export interface Resource {
  readonly kind: ResourceKind;
  readonly apiVersion: string;
  /** Collection path, e.g. "/api/v1/services" (all namespaces). */
  readonly path: string;
  /** Plural for messages, e.g. "Services". */
  readonly plural: string;
  /** One list call (one page) with the client library's typed API; `signal` aborts it. */
  list(config: KubeConfig, selector: Selectors, page: Page, signal: AbortSignal): Promise<KubernetesListObject<KubernetesObject>>;
}

/** One page of a list: at most `limit` objects, from the `continue` token of the page before (none: the first page). */
export interface Page {
  readonly limit: number;
  readonly continue?: string;
}

/** Objects per list page: client-go's pager default (tools/pager/pager.go defaultPageSize), which kube-proxy's informers use. */
export const LIST_PAGE_SIZE = 500;

/** The label and field selectors of an informer (Kubernetes selector syntax). */
export interface Selectors {
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
}

/**
 * The only API calls an informer makes on its resource: list, then watch.
 * deploy/kubernetes/drover.yaml grants exactly these on {@link RESOURCES}
 * (a test checks it).
 */
export const INFORMER_VERBS = ['list', 'watch'] as const;

/** The three resources, after kube-proxy's informers (cmd/kube-proxy/app/server.go). */
export const RESOURCES: Readonly<Record<ResourceKind, Resource>> = {
  Service: {
    kind: 'Service',
    apiVersion: 'v1',
    path: '/api/v1/services',
    plural: 'Services',
    list: (config, s, page, signal) => config.makeApiClient(CoreV1Api).listServiceForAllNamespaces({ ...s, ...paging(page) }, abortable(signal)),
  },
  EndpointSlice: {
    kind: 'EndpointSlice',
    apiVersion: 'discovery.k8s.io/v1',
    path: '/apis/discovery.k8s.io/v1/endpointslices',
    plural: 'EndpointSlices',
    list: (config, s, page, signal) => config.makeApiClient(DiscoveryV1Api).listEndpointSliceForAllNamespaces({ ...s, ...paging(page) }, abortable(signal)),
  },
  Node: {
    kind: 'Node',
    apiVersion: 'v1',
    path: '/api/v1/nodes',
    plural: 'Nodes',
    list: (config, s, page, signal) => config.makeApiClient(CoreV1Api).listNode({ ...s, ...paging(page) }, abortable(signal)),
  },
};

/** The typed API's list parameters of `page` (it names `continue` `_continue`). */
function paging(page: Page): { limit: number; _continue?: string } {
  return page.continue !== undefined ? { limit: page.limit, _continue: page.continue } : { limit: page.limit };
}

/**
 * Request options of the typed API that make a call abortable by `signal`
 * (a list the server does not answer would otherwise keep the process
 * alive after the source is closed): a middleware that sets the signal on
 * the request. The typed API expects each middleware step to return its
 * Observable, of which it only calls `toPromise()`.
 */
function abortable(signal: AbortSignal): ConfigurationOptions {
  const observable = <T>(value: T) => ({ toPromise: () => Promise.resolve(value) });
  const middleware = {
    pre: (context: RequestContext) => {
      context.setSignal(signal);
      return observable(context);
    },
    post: (response: ResponseContext) => observable(response),
  };
  return { middleware: [middleware], middlewareMergeStrategy: 'append' } as unknown as ConfigurationOptions;
}

/** An API object as the informer hands it over: `kind`, `apiVersion` and `metadata` are always set. */
export type KubeObject = KubernetesObject & { readonly kind: string; readonly apiVersion: string; readonly metadata: NonNullable<KubernetesObject['metadata']> };

/** What an informer reports. Handlers must not throw. */
export interface InformerHandlers {
  /** An object was added or modified. */
  upsert(o: KubeObject): void;
  /** An object was deleted (or left the selectors). */
  remove(o: KubeObject): void;
  /**
   * One page of a list. `first`: a list starts (again) with it; `last`: the
   * list is whole with it, so that what is held of the resource and was
   * in none of its pages is gone (the informer counts as listed already).
   */
  listPage(items: KubeObject[], first: boolean, last: boolean): void;
  /** The informer failed; it restarts after `retryInMs`. */
  error(err: Error, retryInMs: number): void;
}

/** Backoff of informer restarts, in milliseconds. */
export interface Backoff {
  readonly initialMs: number;
  readonly maxMs: number;
}

/** 1 s doubling to 30 s (client-go's reflector: 800 ms to 30 s). */
export const DEFAULT_BACKOFF: Backoff = { initialMs: 1000, maxMs: 30_000 };

/**
 * The library's Watch, asking for bookmarks and a server-side timeout of
 * 5-10 minutes on every watch, and that can be stopped: the library's
 * ListWatch may start a watch after it was stopped (when stopped during a
 * list), and learns of a watch's abort handle only once the server has
 * answered; {@link abort} ends the current watch and any later one.
 */
class BookmarkWatch extends Watch {
  private current: AbortController | undefined;
  /** Counts the calls of {@link abort}: a watch opened before the last one is aborted as soon as the server answers. */
  private aborts = 0;

  override async watch(...[path, query, callback, done]: Parameters<Watch['watch']>): ReturnType<Watch['watch']> {
    const aborts = this.aborts;
    const timeoutSeconds = 300 + Math.floor(Math.random() * 300);
    const c = await super.watch(path, { ...query, allowWatchBookmarks: true, timeoutSeconds }, callback, done);
    if (aborts !== this.aborts) c.abort();
    else this.current = c;
    return c;
  }

  /** Abort the current watch, and every one being opened now. */
  abort(): void {
    this.aborts++;
    this.current?.abort();
    this.current = undefined;
  }
}

/**
 * Longest wait for the whole answer of one list, ms: kube-apiserver's own
 * limit on a request (--request-timeout, 60 s), with some slack for the
 * transfer of a large list.
 */
export const LIST_TIMEOUT_MS = 90_000;

/** A watch the server ends sooner than this after it was opened, with no event, counts as a failure (client-go's reflector: 1 s). */
const SHORT_WATCH_MS = 1000;

/**
 * A 410 this soon (ms) after the list whose resourceVersion the watch
 * started from counts as one of a row: the relist waits for the backoff.
 * A list's resourceVersion stays watchable for minutes on a sound API
 * server (etcd compacts every 5 minutes by default).
 */
const QUICK_GONE_MS = 10_000;

/** One watch of an informer: when it was opened (performance.now(), ms), the events it sent, and how it ended once it did ('gone': a 410; 'closed': ended with no error; else the failure). */
interface WatchState {
  readonly opened: number;
  events: number;
  ended: 'gone' | 'closed' | Error | undefined;
}

/** True for a 410 Gone: as an error of the watch request, or as the `code` of an ERROR event's Status. */
function isGone(x: unknown): boolean {
  const e = x as { statusCode?: unknown; code?: unknown } | null | undefined;
  return e?.statusCode === 410 || e?.code === 410;
}

/**
 * See the module comment. It keeps no object: what it lists and what the
 * watch sends is handed over and dropped (the source keeps only what it
 * normalised), where the client library's ListWatch would keep every
 * object of the resource, as the library deserialised it, for the life of
 * the process.
 */
export class ResourceInformer {
  /** True once a first list has been handed over. */
  listed = false;
  /** The message of the last failure since the last success, for messages while waiting. */
  lastError: string | undefined;
  private readonly watcher: BookmarkWatch;
  /** Aborts the lists in flight at {@link stop}. */
  private lists = new AbortController();
  /** The resourceVersion to watch from; empty means list first. */
  private resourceVersion = '';
  private failures = 0;
  /** When the last list was handed over (performance.now(), ms). */
  private listedAt = -Infinity;
  /** 410s in a row, each within {@link QUICK_GONE_MS} of its list. */
  private quickGones = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = true;
  /** Counts the starts: what a list or watch of an earlier one reports later is dropped. */
  private generation = 0;

  constructor(
    readonly resource: Resource,
    private readonly config: KubeConfig,
    private readonly selectors: Selectors,
    private readonly handlers: InformerHandlers,
    private readonly backoff: Backoff = DEFAULT_BACKOFF,
    /** Longest wait for one list's answer, ms. */
    private readonly listTimeoutMs: number = LIST_TIMEOUT_MS,
  ) {
    this.watcher = new BookmarkWatch(config);
  }

  /** Start listing and watching; failures are retried until {@link stop}. */
  start(): void {
    this.stopped = false;
    if (this.lists.signal.aborted) this.lists = new AbortController();
    void this.cycle(++this.generation);
  }

  /** Stop watching and retrying (async for the callers that await it; it ends at once). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.generation++;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.lists.abort();
    this.watcher.abort();
  }

  private current(generation: number): boolean {
    return !this.stopped && generation === this.generation;
  }

  /** List when there is no resourceVersion to watch from, then watch. */
  private async cycle(generation: number): Promise<void> {
    if (!this.current(generation)) return;
    try {
      if (this.resourceVersion === '') {
        const version = await this.listAll(generation);
        if (version === undefined) return;
        this.resourceVersion = version;
      }
      const w: WatchState = { opened: performance.now(), events: 0, ended: undefined };
      await this.watcher.watch(
        this.resource.path,
        { resourceVersion: this.resourceVersion, labelSelector: this.selectors.labelSelector, fieldSelector: this.selectors.fieldSelector },
        (phase: string, o: KubernetesObject) => this.event(generation, w, phase, o),
        (err: unknown) => this.ended(generation, w, err),
      );
    } catch (err) {
      if (this.current(generation)) this.failed(err);
    }
  }

  /**
   * List page by page, handing each page over (see the module comment).
   * @returns the list's resourceVersion, or undefined when {@link stop} or
   *   a restart made this cycle stale.
   * @throws the error of a page (after a second 410 on a continue token, that one).
   */
  private async listAll(generation: number): Promise<string | undefined> {
    let token: string | undefined;
    let restarted = false;
    for (;;) {
      let l: KubernetesListObject<KubernetesObject>;
      try {
        l = await this.list(token === undefined ? { limit: LIST_PAGE_SIZE } : { limit: LIST_PAGE_SIZE, continue: token });
      } catch (err) {
        if (token === undefined || !isGone(err) || restarted || !this.current(generation)) throw err;
        restarted = true;
        token = undefined;
        continue;
      }
      if (!this.current(generation)) return undefined;
      const items = listItems(this.resource, l);
      const first = token === undefined;
      token = l.metadata?._continue || undefined;
      if (token === undefined) {
        // Only a whole list resets the backoff: a server that answers the first page and fails a later one is
        // retried ever more slowly, as any failing list.
        this.succeeded();
        this.listed = true;
        this.listedAt = performance.now();
      }
      this.handlers.listPage(
        items.map((o) => this.typed(o)),
        first,
        token === undefined,
      );
      if (token === undefined) return l.metadata?.resourceVersion ?? '';
    }
  }

  /** One list page, aborted by {@link stop} or after {@link listTimeoutMs}. @throws the list's error, or an Error saying it timed out. */
  private async list(page: Page): Promise<KubernetesListObject<KubernetesObject>> {
    const timeout = AbortSignal.timeout(this.listTimeoutMs);
    try {
      return await this.resource.list(this.config, this.selectors, page, AbortSignal.any([this.lists.signal, timeout]));
    } catch (err) {
      if (timeout.aborted && !this.lists.signal.aborted) throw new Error(`list of ${this.resource.plural}: no answer within ${this.listTimeoutMs} ms`);
      throw err;
    }
  }

  /** One watch event: handed over, and its resourceVersion kept to watch from. */
  private event(generation: number, w: WatchState, phase: string, o: KubernetesObject): void {
    if (!this.current(generation) || w.ended !== undefined) return;
    w.events++;
    if (phase === 'ERROR') {
      // A Status ends the watch (client-go's watchHandler): 410 Gone means the
      // resourceVersion is too old, so list again; anything else fails the
      // watch. What the stream sends after it is not read.
      w.ended = isGone(o) ? 'gone' : new Error(`watch of ${this.resource.plural}: ${(o as { message?: unknown }).message ?? 'an ERROR event'}`);
      this.watcher.abort();
      return;
    }
    if (phase === 'ADDED' || phase === 'MODIFIED' || phase === 'DELETED') {
      this.succeeded();
      if (phase === 'DELETED') this.handlers.remove(this.typed(o));
      else this.handlers.upsert(this.typed(o));
    }
    const version = o.metadata?.resourceVersion;
    if (version) this.resourceVersion = version;
  }

  /**
   * The watch ended: a 410 lists again, a failure retries after the
   * backoff, the server's own end of a watch watches again; one the server
   * ended within {@link SHORT_WATCH_MS} with no event is a failure
   * (client-go's reflector: "very short watch"), so that a server that
   * ends every watch at once is not asked again in a loop.
   */
  private ended(generation: number, w: WatchState, err: unknown): void {
    if (!this.current(generation)) return;
    const outcome = w.ended ?? (isGone(err) ? 'gone' : refusedWatchError(this.resource, err));
    w.ended ??= 'closed';
    if (outcome === 'gone') {
      this.resourceVersion = '';
      const since = performance.now() - this.listedAt;
      if (since >= QUICK_GONE_MS) this.quickGones = 0;
      else if (this.quickGones++ > 0) {
        return this.failed(new Error(`watch of ${this.resource.plural}: 410 Gone ${Math.round(since)} ms after the list it watched from`), this.quickGones - 2);
      }
    } else if (outcome) return this.failed(outcome);
    else if (w.events === 0 && performance.now() - w.opened < SHORT_WATCH_MS) {
      return this.failed(new Error(`watch of ${this.resource.plural} ended after less than ${SHORT_WATCH_MS} ms with no event`));
    }
    void this.cycle(generation);
  }

  private typed(o: KubernetesObject): KubeObject {
    return { ...o, kind: this.resource.kind, apiVersion: this.resource.apiVersion, metadata: o.metadata ?? {} };
  }

  private succeeded(): void {
    this.failures = 0;
    this.lastError = undefined;
  }

  /**
   * Report `err` and start again after the backoff of the `attempt`-th
   * failure in a row (0: the first; by default the failures since the last
   * list or watch event).
   */
  private failed(err: unknown, attempt?: number): void {
    if (this.stopped || this.timer) return;
    const e = err instanceof Error ? err : new Error(String(err));
    this.lastError = describeError(e);
    const delay = Math.min(this.backoff.maxMs, this.backoff.initialMs * 2 ** (attempt ?? this.failures));
    if (attempt === undefined) this.failures++;
    this.handlers.error(e, delay);
    const generation = this.generation;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.cycle(generation);
    }, delay);
  }
}

/**
 * The objects of a list answer.
 * @throws Error naming the resource when the answer has no `items` list or
 * an item that is not an object with a `metadata.name` (see the module
 * comment).
 */
function listItems(resource: Resource, l: KubernetesListObject<KubernetesObject> | null | undefined): KubernetesObject[] {
  const items: unknown = l?.items;
  if (!Array.isArray(items)) throw new Error(`list of ${resource.plural}: the answer has no items list (not a ${resource.kind}List)`);
  const bad = items.findIndex((o: KubernetesObject | null) => typeof o?.metadata?.name !== 'string' || o.metadata.name === '');
  if (bad >= 0) throw new Error(`list of ${resource.plural}: items[${bad}] is not an object with a metadata.name`);
  return items as KubernetesObject[];
}

/**
 * One line for an error of the client library: its message, with the HTTP
 * status or error code when it has one. For a failed call of the typed API
 * (the library's ApiException, whose message starts "HTTP-Code: 403") the
 * message is the one of the API server's Status in the body, e.g.
 * `endpointslices.discovery.k8s.io is forbidden: User "…" cannot list
 * resource "endpointslices" in API group "discovery.k8s.io" at the cluster
 * scope`.
 */
export function describeError(e: Error): string {
  const x = e as Error & { code?: unknown; statusCode?: unknown; body?: unknown };
  const status = x.statusCode ?? (typeof x.code === 'number' ? x.code : undefined);
  const code = typeof x.code === 'string' ? x.code : undefined;
  const first = statusMessage(x.body) ?? e.message.split('\n')[0] ?? '';
  return [first, status !== undefined ? `HTTP ${String(status)}` : undefined, code].filter((s) => s !== undefined && s !== '').join(', ');
}

/** The `message` of a Kubernetes Status (an object, or its JSON text), or undefined when `body` is none. */
function statusMessage(body: unknown): string | undefined {
  let o = body;
  if (typeof o === 'string') {
    try {
      o = JSON.parse(o) as unknown;
    } catch {
      return undefined;
    }
  }
  const s = o as { kind?: unknown; message?: unknown } | null | undefined;
  return s?.kind === 'Status' && typeof s.message === 'string' && s.message !== '' ? s.message : undefined;
}

/**
 * The error of a watch request the API server refused with 401 or 403,
 * naming what was refused. The client library's Watch keeps only the
 * status line ("Forbidden") of such an answer, not the Status body that
 * names the verb and resource (as a refused list's does, see
 * {@link describeError}), so the message says it in the API server's words
 * (apiserver's authorization responses, `cannot watch resource "…" in API
 * group "…" at the cluster scope`). Any other error is returned unchanged.
 */
export function refusedWatchError(resource: Resource, err: unknown): unknown {
  const status = (err as { statusCode?: unknown } | null | undefined)?.statusCode;
  if (status !== 401 && status !== 403) return err;
  const [, group = '', name = ''] = /^\/(?:api\/v1|apis\/([^/]+)\/[^/]+)\/([^/]+)$/.exec(resource.path) ?? [];
  const what =
    status === 403
      ? `forbidden: the credentials cannot watch resource "${name}" in API group "${group}" at the cluster scope (drover needs list and watch on services, endpointslices.discovery.k8s.io and nodes: deploy/kubernetes/drover.yaml)`
      : 'unauthorized: the API server did not accept the credentials';
  return Object.assign(new Error(`watch of ${resource.plural}: ${what}`), { statusCode: status });
}
