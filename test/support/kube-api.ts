/**
 * A TEST DOUBLE of the Kubernetes API server, for the Kubernetes source's
 * tests: a plain HTTP server on 127.0.0.1 that serves list and watch of
 * Services, EndpointSlices and Nodes in the API's wire format, so that the
 * real client library talks to it. It is not an API server: no
 * validation, no auth, no other resources.
 *
 * What it does as the API server does:
 *   - lists: `{kind: "ServiceList", apiVersion, metadata: {resourceVersion}, items}`,
 *     items without `kind`/`apiVersion`; with `limit=N`, pages of N items
 *     of one snapshot, `metadata.continue` naming the next page (empty on
 *     the last one), each with the snapshot's resourceVersion; an unknown
 *     `continue` token gets 410 Expired, as the API server answers a token
 *     whose resourceVersion was compacted;
 *   - watches (`?watch=true&resourceVersion=N`): chunked JSON, one event
 *     per line (`{"type":"ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK"|"ERROR","object":…}`),
 *     first every event after N from its history, then live ones;
 *     BOOKMARK events (only `metadata.resourceVersion`) on {@link bookmark}
 *     for watches that asked with `allowWatchBookmarks=true`; a watch from a
 *     resourceVersion older than the history kept gets an ERROR event with
 *     a 410 Expired Status, and the stream ends;
 *   - label selectors (`key`, `!key`, `key=value`, `key!=value`) and the
 *     field selectors `metadata.name=` and `metadata.namespace=`; an object
 *     modified so that it leaves a watch's selector is a DELETED event on
 *     that watch, one that enters it an ADDED event;
 *   - `timeoutSeconds` ends a watch cleanly after that long.
 *
 * Test controls: {@link holdLists} (list requests wait unanswered),
 * {@link dropWatches} (watch connections are cut), {@link expire} (history
 * compacted and a 410 ERROR sent on every open watch), {@link close} then
 * {@link up} (an outage), {@link expireContinues} and {@link failPages}
 * (the next requests with a continue token get 410 Expired, or 500),
 * {@link requests} (what the client asked for).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** An API object as stored by the double (kind and apiVersion included). */
export interface ApiObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string>; resourceVersion?: string };
  [field: string]: unknown;
}

type Collection = 'services' | 'endpointslices' | 'nodes';

const ROUTES: Record<string, { collection: Collection; listKind: string; apiVersion: string }> = {
  '/api/v1/services': { collection: 'services', listKind: 'ServiceList', apiVersion: 'v1' },
  '/apis/discovery.k8s.io/v1/endpointslices': { collection: 'endpointslices', listKind: 'EndpointSliceList', apiVersion: 'discovery.k8s.io/v1' },
  '/api/v1/nodes': { collection: 'nodes', listKind: 'NodeList', apiVersion: 'v1' },
};

const COLLECTION_OF: Record<string, Collection> = { Service: 'services', EndpointSlice: 'endpointslices', Node: 'nodes' };

interface StoredEvent {
  readonly rv: number;
  readonly collection: Collection;
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED';
  readonly object: ApiObject;
  readonly previous: ApiObject | undefined;
}

interface Watcher {
  readonly collection: Collection;
  readonly res: ServerResponse;
  readonly matches: (o: ApiObject) => boolean;
  readonly bookmarks: boolean;
}

/** One request the double received: its path and query, and when it came in (ms since the epoch). */
export interface SeenRequest {
  readonly path: string;
  readonly query: Readonly<Record<string, string>>;
  readonly at: number;
}

const key = (o: ApiObject) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;
const clone = <T>(o: T): T => structuredClone(o);

/** See the module comment. */
export class FakeKubeApi {
  readonly url: string;
  /** Every request, in order. */
  readonly requests: SeenRequest[] = [];
  private rv = 1000;
  private readonly objects: Record<Collection, Map<string, ApiObject>> = { services: new Map(), endpointslices: new Map(), nodes: new Map() };
  private events: StoredEvent[] = [];
  /** A watch from a resourceVersion below this gets 410 Gone. */
  private oldestRV = 0;
  private readonly watchers = new Set<Watcher>();
  private held: Set<Collection> | undefined;
  private readonly waiting: Array<() => void> = [];
  /** Paged lists in progress: token id → the snapshot's items and resourceVersion. */
  private readonly snapshots = new Map<number, { readonly items: readonly object[]; readonly rv: number }>();
  private nextSnapshot = 1;
  /** Requests for a page after the first that still fail, per collection: with 410 Expired, or with 500. */
  private readonly pageExpiries = new Map<Collection, number>();
  private readonly pageFailures = new Map<Collection, number>();

  private constructor(private readonly server: Server) {
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  /** Listen on 127.0.0.1 (`port` 0: any free port). */
  static async start(port = 0): Promise<FakeKubeApi> {
    let api: FakeKubeApi | undefined;
    const server = createServer((req, res) => api!.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    api = new FakeKubeApi(server);
    return api;
  }

  /** A kubeconfig for this server: plain HTTP, so `insecure-skip-tls-verify: true` as the client library requires. */
  kubeconfig(): string {
    return kubeconfigFor(this.url);
  }

  /** Create or replace an object (a new resourceVersion; ADDED or MODIFIED on the watches). */
  apply(object: ApiObject): void {
    const collection = COLLECTION_OF[object.kind];
    if (!collection) throw new Error(`the double serves no ${object.kind}`);
    const o = clone(object);
    o.metadata.resourceVersion = String(++this.rv);
    const previous = this.objects[collection].get(key(o));
    this.objects[collection].set(key(o), o);
    this.emit({ rv: this.rv, collection, type: previous ? 'MODIFIED' : 'ADDED', object: o, previous });
  }

  /** Delete an object (DELETED on the watches); false when there was none. */
  delete(kind: string, namespace: string | undefined, name: string): boolean {
    const collection = COLLECTION_OF[kind]!;
    const k = `${namespace ?? ''}/${name}`;
    const previous = this.objects[collection].get(k);
    if (!previous) return false;
    this.objects[collection].delete(k);
    const o = clone(previous);
    o.metadata.resourceVersion = String(++this.rv);
    this.emit({ rv: this.rv, collection, type: 'DELETED', object: o, previous });
    return true;
  }

  /** Leave list requests of `collections` (default all) unanswered until {@link releaseLists}. */
  holdLists(...collections: Collection[]): void {
    this.held = new Set(collections.length > 0 ? collections : (['services', 'endpointslices', 'nodes'] as const));
  }

  /** Answer the held list requests (with the state of now) and stop holding. */
  releaseLists(): void {
    this.held = undefined;
    for (const answer of this.waiting.splice(0)) answer();
  }

  /** Cut every open watch connection (the client sees a reset or premature close). */
  dropWatches(): void {
    for (const w of this.watchers) w.res.socket?.destroy();
    this.watchers.clear();
  }

  /** Forget the history (a watch from any earlier resourceVersion gets 410) and end every open watch with a 410 ERROR event. */
  expire(): void {
    this.oldestRV = this.rv + 1;
    this.events = [];
    for (const w of this.watchers) {
      w.res.end(line({ type: 'ERROR', object: expiredStatus() }));
    }
    this.watchers.clear();
  }

  /** End every open watch with an ERROR event whose Status has `code` (not 410: a server-side failure, e.g. 500 InternalError). */
  failWatches(code = 500, reason = 'InternalError', message = 'etcd is unavailable'): void {
    for (const w of this.watchers) w.res.end(line({ type: 'ERROR', object: status(code, reason, message) }));
    this.watchers.clear();
  }

  /** Send a BOOKMARK with the current resourceVersion on every watch that allows them. */
  bookmark(): void {
    for (const w of this.watchers) {
      if (!w.bookmarks) continue;
      const [apiVersion, kind] = w.collection === 'endpointslices' ? ['discovery.k8s.io/v1', 'EndpointSlice'] : ['v1', w.collection === 'nodes' ? 'Node' : 'Service'];
      w.res.write(line({ type: 'BOOKMARK', object: { kind, apiVersion, metadata: { resourceVersion: String(this.rv) } } }));
    }
  }

  /** Number of open watches. */
  get openWatches(): number {
    return this.watchers.size;
  }

  /** Requests to `path` that were lists (not watches). */
  lists(path: string): SeenRequest[] {
    return this.requests.filter((r) => r.path === path && r.query.watch !== 'true');
  }

  /** Requests to `path` that were watches. */
  watches(path: string): SeenRequest[] {
    return this.requests.filter((r) => r.path === path && r.query.watch === 'true');
  }

  /**
   * Listen again on the same port after {@link close}, as an API server
   * back from an outage: the objects and their history are kept, and
   * changes made while it was closed are there for the next list or watch.
   */
  async up(): Promise<void> {
    const port = Number(new URL(this.url).port);
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => {
        this.server.off('error', reject);
        resolve();
      });
    });
  }

  /** Stop listening and cut every connection. */
  async close(): Promise<void> {
    for (const answer of this.waiting.splice(0)) answer();
    this.dropWatches();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private emit(e: StoredEvent): void {
    this.events.push(e);
    for (const w of this.watchers) if (w.collection === e.collection) this.send(w, e);
  }

  /** Write `e` to `w` as the watch cache would, given `w`'s selectors. */
  private send(w: Watcher, e: StoredEvent): void {
    const was = e.previous !== undefined && w.matches(e.previous);
    const is = e.type !== 'DELETED' && w.matches(e.object);
    const type = e.type === 'DELETED' ? (was ? 'DELETED' : undefined) : was && is ? 'MODIFIED' : is ? 'ADDED' : was ? 'DELETED' : undefined;
    if (type !== undefined) w.res.write(line({ type, object: e.object }));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://double');
    const query = Object.fromEntries(url.searchParams);
    this.requests.push({ path: url.pathname, query, at: Date.now() });
    const route = ROUTES[url.pathname];
    if (req.method !== 'GET' || !route) {
      res.writeHead(404, { 'Content-Type': 'application/json' }).end(JSON.stringify(status(404, 'NotFound', `the double serves no ${url.pathname}`)));
      return;
    }
    const matches = selectorOf(query.labelSelector, query.fieldSelector);
    if (query.watch === 'true') {
      this.watch(route.collection, query, matches, res);
      return;
    }
    const answer = () => {
      const page = this.page(route.collection, matches, query);
      if ('status' in page) {
        res.writeHead(page.status.code, { 'Content-Type': 'application/json' }).end(JSON.stringify(page.status));
        return;
      }
      const metadata = { resourceVersion: String(page.rv), ...(page.next !== undefined ? { continue: page.next } : {}) };
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ kind: route.listKind, apiVersion: route.apiVersion, metadata, items: page.items }));
    };
    if (this.held?.has(route.collection)) this.waiting.push(answer);
    else answer();
  }

  /**
   * The items of one list request: all of them, or with `limit` one page
   * of a snapshot taken at the first page (`next`: the next page's token,
   * undefined on the last page); a Status for a token that is unknown or
   * expired (410) or for a page that fails ({@link failPages}, 500).
   */
  private page(
    collection: Collection,
    matches: (o: ApiObject) => boolean,
    query: Record<string, string>,
  ): { items: readonly object[]; rv: number; next: string | undefined } | { status: ReturnType<typeof status> } {
    const limit = Number(query.limit ?? '0');
    let snapshot: { readonly items: readonly object[]; readonly rv: number };
    let id: number;
    let offset = 0;
    if (query.continue) {
      const [tokenId, tokenOffset] = query.continue.split(':').map(Number);
      if (take(this.pageExpiries, collection)) this.snapshots.delete(tokenId ?? NaN);
      const found = this.snapshots.get(tokenId ?? NaN);
      if (!found) return { status: status(410, 'Expired', 'The provided continue parameter is too old to display a consistent list result.') };
      if (take(this.pageFailures, collection)) {
        return { status: status(500, 'InternalError', 'the double fails this page') };
      }
      snapshot = found;
      id = tokenId!;
      offset = tokenOffset ?? 0;
    } else {
      snapshot = { items: [...this.objects[collection].values()].filter(matches).map(({ kind: _k, apiVersion: _a, ...rest }) => rest), rv: this.rv };
      if (!(limit > 0)) return { items: snapshot.items, rv: snapshot.rv, next: undefined };
      id = this.nextSnapshot++;
      this.snapshots.set(id, snapshot);
    }
    const end = limit > 0 ? offset + limit : snapshot.items.length;
    const next = end < snapshot.items.length ? `${id}:${end}` : undefined;
    if (next === undefined) this.snapshots.delete(id);
    return { items: snapshot.items.slice(offset, end), rv: snapshot.rv, next };
  }

  /** The next `n` requests of `collection` for a page after the first (with a continue token) get 410 Expired: their token has expired. */
  expireContinues(collection: Collection, n = 1): void {
    this.pageExpiries.set(collection, n);
  }

  /** The next `n` requests of `collection` for a page after the first (with a continue token) fail with 500. */
  failPages(collection: Collection, n = 1): void {
    this.pageFailures.set(collection, n);
  }

  private watch(collection: Collection, query: Record<string, string>, matches: (o: ApiObject) => boolean, res: ServerResponse): void {
    const from = Number(query.resourceVersion ?? '0');
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.flushHeaders();
    if (from !== 0 && from < this.oldestRV - 1) {
      res.end(line({ type: 'ERROR', object: expiredStatus() }));
      return;
    }
    const w: Watcher = { collection, res, matches, bookmarks: query.allowWatchBookmarks === 'true' };
    for (const e of this.events) if (e.rv > from && e.collection === collection) this.send(w, e);
    this.watchers.add(w);
    res.on('close', () => this.watchers.delete(w));
    const timeout = Number(query.timeoutSeconds ?? '0');
    if (timeout > 0) {
      setTimeout(() => {
        if (this.watchers.delete(w)) res.end();
      }, timeout * 1000).unref();
    }
  }
}

/** A kubeconfig for a plain HTTP `server`, with `insecure-skip-tls-verify: true`. */
export function kubeconfigFor(server: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: double',
    '  cluster:',
    `    server: ${server}`,
    '    insecure-skip-tls-verify: true',
    'users:',
    '- name: tester',
    '  user:',
    '    token: not-checked',
    'contexts:',
    '- name: double',
    '  context: {cluster: double, user: tester}',
    'current-context: double',
    '',
  ].join('\n');
}

function line(event: unknown): string {
  return `${JSON.stringify(event)}\n`;
}

function status(code: number, reason: string, message: string) {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

function expiredStatus() {
  return status(410, 'Expired', 'too old resource version');
}

/** Take one from the count of `collection` in `counts`: true when there was one. */
function take(counts: Map<Collection, number>, collection: Collection): boolean {
  const n = counts.get(collection) ?? 0;
  if (n <= 0) return false;
  counts.set(collection, n - 1);
  return true;
}

/** A predicate for a label selector and a field selector (the subset the module comment lists). */
function selectorOf(labelSelector: string | undefined, fieldSelector: string | undefined): (o: ApiObject) => boolean {
  const tests: Array<(o: ApiObject) => boolean> = [];
  for (const req of (labelSelector ?? '').split(',').filter((s) => s !== '')) {
    const m = /^(!)?([^!=]+)(?:(!=|==|=)(.*))?$/.exec(req.trim());
    if (!m) throw new Error(`the double cannot read the label requirement ${req}`);
    const [, not, k, op, v] = m;
    const labels = (o: ApiObject) => o.metadata.labels ?? {};
    if (not) tests.push((o) => !(k! in labels(o)));
    else if (op === undefined) tests.push((o) => k! in labels(o));
    else if (op === '!=') tests.push((o) => labels(o)[k!] !== v);
    else tests.push((o) => labels(o)[k!] === v);
  }
  for (const req of (fieldSelector ?? '').split(',').filter((s) => s !== '')) {
    const [field, value] = req.split('=');
    if (field === 'metadata.name') tests.push((o) => o.metadata.name === value);
    else if (field === 'metadata.namespace') tests.push((o) => (o.metadata.namespace ?? '') === value);
    else throw new Error(`the double cannot read the field selector ${req}`);
  }
  return (o) => tests.every((t) => t(o));
}
