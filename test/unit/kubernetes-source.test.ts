/**
 * The Kubernetes source against the API server double (test/support/kube-api.ts),
 * with the real client library over http://127.0.0.1: first-list gating, a
 * dropped watch, 410 Gone, objects that are not drover's, bad objects and
 * trigger times.
 */
import test, { type ExecutionContext } from 'ava';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Backend, ChangeSet, SyncResult } from '../../src/proxier/backend.ts';
import { Proxier } from '../../src/proxier/proxier.ts';
import { loadKubeConfig } from '../../src/sources/kubernetes/config.ts';
import { createKubernetesSource } from '../../src/sources/kubernetes/create.ts';
import { DNS_SLICE_SELECTOR, KubernetesSource, LABEL_SELECTOR } from '../../src/sources/kubernetes/source.ts';
import { silentLogger, type Logger } from '../../src/util/log.ts';
import { FakeKubeApi, kubeconfigFor } from '../support/kube-api.ts';
import { node, service, slice } from '../support/kube-objects.ts';
import { recordingLogger } from './model-helpers.ts';

const SERVICES = '/api/v1/services';
const SLICES = '/apis/discovery.k8s.io/v1/endpointslices';
const NODES = '/api/v1/nodes';

let dir: string;
test.before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'drover-k8s-'));
});
test.after.always(async () => {
  await rm(dir, { recursive: true, force: true });
});

let n = 0;
/** A source for `server` (a kubeconfig file is written for it), restarting informers after 100 ms. */
async function sourceFor(server: string, extra: { listTimeoutMs?: number; logger?: Logger; backoff?: { initialMs: number; maxMs: number }; headlessEndpoints?: boolean } = {}): Promise<KubernetesSource> {
  const file = join(dir, `kubeconfig-${n++}`);
  await writeFile(file, kubeconfigFor(server));
  const { config } = loadKubeConfig({ kubeconfig: file });
  return new KubernetesSource({
    config,
    server,
    nodeName: 'node-a',
    serviceCIDR: '10.96.0.0/12',
    logger: silentLogger(),
    backoff: { initialMs: 100, maxMs: 400 },
    ...extra,
  });
}

/** The double with Services web (10.96.0.10) and api (10.96.0.11), a slice each, and Nodes node-a and node-b. */
/** A source on `api` (see {@link sourceFor}); both are closed when the test ends. */
async function sourceOn(t: ExecutionContext, api: FakeKubeApi, extra: Parameters<typeof sourceFor>[1] = {}): Promise<KubernetesSource> {
  const src = await sourceFor(api.url, extra);
  t.teardown(async () => {
    await src.close();
    await api.close();
  });
  return src;
}

async function world(): Promise<FakeKubeApi> {
  const api = await FakeKubeApi.start();
  api.apply(service('web', '10.96.0.10'));
  api.apply(slice('web-1', 'web', ['10.244.1.1']));
  api.apply(service('api', '10.96.0.11'));
  api.apply(slice('api-1', 'api', ['10.244.1.2']));
  api.apply(node('node-a', 'zone-a'));
  api.apply(node('node-b', 'zone-b'));
  return api;
}

async function until(what: string, check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Count the source's change notifications (this starts it). */
function notifications(src: KubernetesSource): { count: number } {
  const c = { count: 0 };
  src.watch(() => c.count++);
  return c;
}

/** Wait until the source has notified a change since `mark` (a count of {@link notifications}). */
async function notifiedSince(c: { count: number }, mark: number): Promise<void> {
  await until('a change notification', () => c.count > mark);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const endpointsOf = (r: { snapshot: { services: ReadonlyMap<string, { endpoints: ReadonlyArray<{ ip: string }> }> } }, key: string) =>
  r.snapshot.services.get(key)?.endpoints.map((e) => e.ip);

test.serial('a load waits for every first list; the informers list with kube-proxy\'s selectors and watch from the list with bookmarks', async (t) => {
  const api = await world();
  api.holdLists('endpointslices');
  const src = await sourceOn(t, api);
  let settled = false;
  const loading = src.load().finally(() => (settled = true));
  await until('the Service and Node lists', () => api.lists(SERVICES).length === 1 && api.lists(NODES).length === 1 && api.lists(SLICES).length === 1);
  await sleep(300);
  t.false(settled, 'no load before the EndpointSlices are listed');
  t.false(src.synced);
  api.releaseLists();
  const r = await loading;
  t.deepEqual([...r.snapshot.services.keys()].sort(), ['default/api:http', 'default/web:http']);
  t.deepEqual(endpointsOf(r, 'default/web:http'), ['10.244.1.1']);
  t.is(r.snapshot.node?.name, 'node-a');
  t.is(r.snapshot.node?.zone, 'zone-a');
  t.deepEqual(r.incomplete, []);
  t.is(r.changed, undefined);
  t.is(api.lists(SERVICES)[0]!.query.labelSelector, LABEL_SELECTOR);
  t.is(LABEL_SELECTOR, '!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name');
  t.is(api.lists(SLICES)[0]!.query.labelSelector, LABEL_SELECTOR);
  t.is(api.lists(NODES)[0]!.query.fieldSelector, 'metadata.name=node-a');
  await until('three watches', () => api.openWatches === 3);
  const watch = api.watches(SLICES)[0]!;
  t.is(watch.query.allowWatchBookmarks, 'true');
  t.is(watch.query.labelSelector, LABEL_SELECTOR);
  t.true(Number(watch.query.resourceVersion) >= 1006, 'watch from the list\'s resourceVersion');
});

/** A backend that records each sync. */
class RecordingBackend implements Backend {
  readonly mode = 'iptables' as const;
  readonly calls: Array<{ services: string[]; full: boolean; incomplete: boolean }> = [];
  async sync(s: { services: ReadonlyMap<string, unknown> }, c: ChangeSet): Promise<SyncResult> {
    this.calls.push({ services: [...s.services.keys()].sort(), full: c.full, incomplete: c.incomplete === true });
    return { full: c.full, services: s.services.size, endpoints: 0, written: {}, deleted: {}, bytes: 0, transactions: 0, readMs: 0, applyMs: 0, totalMs: 0 };
  }
  async cleanup() {
    return { removed: {}, kept: [] };
  }
}

/** A free port on 127.0.0.1, with nothing listening on it once returned. */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

test.serial('drover started before the API server answers syncs nothing (so deletes nothing) until every list is in, then one full sync of everything', async (t) => {
  const port = await freePort();
  const src = await sourceFor(`http://127.0.0.1:${port}`);
  const backend = new RecordingBackend();
  const proxier = new Proxier({ source: src, backend, logger: silentLogger(), minSyncPeriodMs: 0, syncPeriodMs: 3_600_000 });
  let api: FakeKubeApi | undefined;
  t.teardown(async () => {
    await proxier.stop();
    await api?.close();
  });
  await proxier.start();
  await sleep(700); // connection refused, retried with backoff
  t.deepEqual(backend.calls, []);
  api = await FakeKubeApi.start(port);
  api.holdLists('nodes');
  api.apply(service('web', '10.96.0.10'));
  api.apply(slice('web-1', 'web', ['10.244.1.1']));
  api.apply(node('node-a', 'zone-a'));
  await until('the Service and EndpointSlice lists', () => api!.lists(SERVICES).length > 0 && api!.lists(SLICES).length > 0);
  await sleep(300);
  t.deepEqual(backend.calls, [], 'no sync while the Node is not listed');
  api.releaseLists();
  await until('a sync', () => backend.calls.length > 0);
  t.deepEqual(backend.calls[0], { services: ['default/web:http'], full: true, incomplete: false });
});

test.serial('a dropped watch is watched again from the last resourceVersion: a change made while it was down is seen exactly once', async (t) => {
  const api = await world();
  const src = await sourceOn(t, api);
  let changes = 0;
  src.watch(() => changes++);
  await src.load();
  await until('three watches', () => api.openWatches === 3);
  changes = 0; // the first lists may have notified
  const rv = api.watches(SLICES)[0]!.query.resourceVersion;
  api.dropWatches();
  api.apply(slice('web-1', 'web', ['10.244.1.1', '10.244.1.9']));
  await until('the change', () => changes > 0);
  const r = await src.load();
  t.deepEqual([...r.changed!], ['default/web:http']);
  t.deepEqual(endpointsOf(r, 'default/web:http'), ['10.244.1.1', '10.244.1.9']);
  await until('three watches again', () => api.openWatches === 3);
  t.is(api.lists(SLICES).length, 1, 'no relist');
  t.is(api.watches(SLICES)[1]!.query.resourceVersion, rv, 'watched again from the resourceVersion it had');
  api.bookmark();
  await sleep(200);
  const again = await src.load();
  t.deepEqual([...again.changed!], [], 'the change is not reported twice');
});

test.serial('an ERROR event other than 410 is a failure: reported, then watched again from the same resourceVersion after the backoff, with no relist', async (t) => {
  const api = await world();
  const { logger, lines } = recordingLogger();
  const src = await sourceOn(t, api, { logger });
  const seen = notifications(src);
  await src.load();
  await until('three watches', () => api.openWatches === 3);
  const rv = api.watches(SLICES)[0]!.query.resourceVersion;
  api.failWatches();
  await until('the failure logged', () => lines.some((l) => l.resource === 'EndpointSlices' && /etcd is unavailable; retrying in 100 ms/.test(l.msg)));
  await until('three watches again', () => api.openWatches === 3 && api.watches(SLICES).length === 2);
  t.is(api.watches(SLICES)[1]!.query.resourceVersion, rv, 'watched again from the resourceVersion it had');
  t.is(api.lists(SLICES).length, 1, 'no relist');
  const mark = seen.count;
  api.apply(slice('api-1', 'api', ['10.244.1.7']));
  await notifiedSince(seen, mark);
  t.deepEqual([...(await src.load()).changed!], ['default/api:http']);
});

test.serial('a 410 ERROR event on a watch relists, and reports no change that did not happen', async (t) => {
  const api = await world();
  const src = await sourceOn(t, api);
  const seen = notifications(src);
  await src.load();
  await until('three watches', () => api.openWatches === 3);
  api.expire();
  await until('a relist of each', () => api.lists(SERVICES).length === 2 && api.lists(SLICES).length === 2 && api.lists(NODES).length === 2);
  await until('three watches again', () => api.openWatches === 3);
  const r = await src.load();
  t.deepEqual([...r.changed!], []);
  const mark = seen.count;
  api.apply(slice('api-1', 'api', ['10.244.1.7']));
  await notifiedSince(seen, mark);
  t.deepEqual([...(await src.load()).changed!], ['default/api:http']);
});

test.serial('a watch gone too long (410 on the rewatch) relists: deletions, changes and additions made meanwhile are each seen once', async (t) => {
  const api = await world();
  const src = await sourceOn(t, api);
  await src.load();
  await until('three watches', () => api.openWatches === 3);
  api.dropWatches();
  api.delete('Service', 'default', 'api');
  api.delete('EndpointSlice', 'default', 'api-1');
  api.apply(slice('web-1', 'web', ['10.244.1.5']));
  api.apply(service('db', '10.96.0.12'));
  api.expire(); // the history is compacted: the rewatch gets 410
  await until('relists', () => api.lists(SERVICES).length === 2 && api.lists(SLICES).length === 2);
  await until('three watches again', () => api.openWatches === 3);
  const r = await src.load();
  t.deepEqual([...r.changed!].sort(), ['default/api:http', 'default/db:http', 'default/web:http']);
  t.deepEqual([...r.snapshot.services.keys()].sort(), ['default/db:http', 'default/web:http']);
  t.deepEqual(endpointsOf(r, 'default/web:http'), ['10.244.1.5']);
  t.deepEqual([...(await src.load()).changed!], []);
});

test.serial('Services of another proxy and the slices of headless Services are not drover\'s; a Service that gains the label is removed', async (t) => {
  const api = await world();
  api.apply(service('other', '10.96.0.20', { labels: { 'service.kubernetes.io/service-proxy-name': 'other-proxy' } }));
  // The EndpointSlice controller copies a Service's labels to its slices.
  api.apply(slice('other-1', 'other', ['10.244.2.1'], { labels: { 'service.kubernetes.io/service-proxy-name': 'other-proxy' } }));
  api.apply(service('hl', 'None'));
  api.apply(slice('hl-1', 'hl', ['10.244.2.2'], { labels: { 'service.kubernetes.io/headless': '' } }));
  const src = await sourceOn(t, api);
  const seen = notifications(src);
  const r = await src.load();
  t.deepEqual([...r.snapshot.services.keys()].sort(), ['default/api:http', 'default/web:http']);
  t.deepEqual(r.warnings.map((w) => w.message), [], 'the slice of the other proxy\'s Service is not even seen');
  await until('three watches', () => api.openWatches === 3);
  const mark = seen.count;
  api.apply(service('web', '10.96.0.10', { labels: { 'service.kubernetes.io/service-proxy-name': 'other-proxy' } }));
  await notifiedSince(seen, mark);
  const after = await src.load();
  t.deepEqual([...after.changed!], ['default/web:http']);
  t.deepEqual([...after.snapshot.services.keys()], ['default/api:http']);
});

test.serial('for the node DNS, the slices of headless Services are received too, and reach only the DNS-only part of the snapshot', async (t) => {
  const api = await world();
  api.apply(service('hl', 'None'));
  api.apply(slice('hl-1', 'hl', ['10.244.2.2', '10.244.2.3'], { labels: { 'service.kubernetes.io/headless': '' }, notReady: ['10.244.2.3'] }));
  api.apply(service('other', '10.96.0.20', { labels: { 'service.kubernetes.io/service-proxy-name': 'other-proxy' } }));
  api.apply(slice('other-1', 'other', ['10.244.2.1'], { labels: { 'service.kubernetes.io/service-proxy-name': 'other-proxy' } }));
  const src = await sourceOn(t, api, { headlessEndpoints: true });
  const seen = notifications(src);
  const r = await src.load();
  t.is(api.lists(SLICES)[0]!.query.labelSelector, DNS_SLICE_SELECTOR);
  t.is(DNS_SLICE_SELECTOR, '!service.kubernetes.io/service-proxy-name');
  t.is(api.lists(SERVICES)[0]!.query.labelSelector, LABEL_SELECTOR);
  t.deepEqual([...r.snapshot.services.keys()].sort(), ['default/api:http', 'default/web:http']);
  const addresses = (snapshot: typeof r.snapshot) => {
    const hl = snapshot.dnsOnly?.get('default/hl');
    return hl?.kind === 'headless' ? hl.groups.flatMap((g) => g.addresses.map((a) => [a.ip, a.ready])) : hl;
  };
  t.deepEqual(addresses(r.snapshot), [['10.244.2.2', true], ['10.244.2.3', false]]);
  // A change of the headless slice alone changes no service port.
  await until('three watches', () => api.openWatches === 3);
  const mark = seen.count;
  api.apply(slice('hl-1', 'hl', ['10.244.2.3'], { labels: { 'service.kubernetes.io/headless': '' } }));
  await notifiedSince(seen, mark);
  const after = await src.load();
  t.deepEqual([...after.changed!], []);
  t.deepEqual(addresses(after.snapshot), [['10.244.2.3', true]]);
});

test.serial('the source the flags make selects the slices of headless Services with --dns-address, and not without', async (t) => {
  for (const [dnsAddress, selector] of [['169.254.20.10', DNS_SLICE_SELECTOR], [undefined, LABEL_SELECTOR]] as const) {
    const api = await world();
    const kubeconfig = join(dir, `kubeconfig-flags-${n++}`);
    await writeFile(kubeconfig, kubeconfigFor(api.url));
    const flags = { kubeconfig, hostnameOverride: 'node-a', serviceCidr: '10.96.0.0/12', ...(dnsAddress !== undefined ? { dnsAddress } : {}) };
    const src = createKubernetesSource(flags as Parameters<typeof createKubernetesSource>[0], silentLogger());
    try {
      await src.load();
      t.is(api.lists(SLICES)[0]!.query.labelSelector, selector);
    } finally {
      await src.close();
      await api.close();
    }
  }
});

test.serial('a bad object is skipped with one error naming it, the rest is served, and the read is incomplete; a later valid version clears it', async (t) => {
  const api = await world();
  api.apply(service('bad', '10.96.0.30'));
  api.apply(slice('bad-1', 'bad', ['10.244.3.1'], { port: 70000 }));
  const src = await sourceOn(t, api);
  const seen = notifications(src);
  const r = await src.load();
  t.deepEqual(r.errors.map((e) => e.message), ['kubernetes: EndpointSlice default/bad-1: ports[0].port: 70000 is out of range 1-65535']);
  t.deepEqual(r.incomplete, ['kubernetes: EndpointSlice default/bad-1: ports[0].port: 70000 is out of range 1-65535']);
  t.deepEqual(endpointsOf(r, 'default/web:http'), ['10.244.1.1']);
  t.deepEqual(endpointsOf(r, 'default/bad:http'), []);
  await until('three watches', () => api.openWatches === 3);
  let mark = seen.count;
  api.apply(slice('web-1', 'web', ['10.244.1.1'], { port: 'x' }));
  await notifiedSince(seen, mark);
  const kept = await src.load();
  t.deepEqual(endpointsOf(kept, 'default/web:http'), ['10.244.1.1'], 'the last valid version is kept');
  t.true(kept.errors.some((e) => e.message.startsWith('kubernetes: EndpointSlice default/web-1: ports[0].port: ') && e.message.endsWith('keeping the last valid version')));
  mark = seen.count;
  api.apply(slice('web-1', 'web', ['10.244.1.1']));
  api.apply(slice('bad-1', 'bad', ['10.244.3.1']));
  await until('both changes', () => seen.count >= mark + 2);
  const whole = await src.load();
  t.deepEqual(whole.incomplete, []);
  t.deepEqual(endpointsOf(whole, 'default/bad:http'), ['10.244.3.1']);
});

test.serial('an object that was only ever invalid, once deleted, asks for a sync: the read is whole again and held deletions can go', async (t) => {
  const api = await world();
  const src = await sourceOn(t, api);
  const seen = notifications(src);
  await src.load();
  await until('three watches', () => api.openWatches === 3);
  let mark = seen.count;
  api.apply(slice('bad-1', 'web', ['10.244.3.1'], { port: 70000 }));
  await notifiedSince(seen, mark);
  t.is((await src.load()).incomplete.length, 1);
  mark = seen.count;
  api.delete('EndpointSlice', 'default', 'bad-1');
  await notifiedSince(seen, mark);
  const whole = await src.load();
  t.deepEqual(whole.incomplete, []);
  t.deepEqual(whole.errors, []);
});

test.serial('a Node update that changes nothing drover reads (a status heartbeat) is no change; its zone label is', async (t) => {
  const api = await world();
  const src = await sourceOn(t, api);
  let changes = 0;
  src.watch(() => changes++);
  await src.load();
  await until('three watches', () => api.openWatches === 3);
  changes = 0; // the first lists may have notified
  api.apply(node('node-a', 'zone-a', '2026-01-01T00:00:10Z'));
  api.apply(node('node-b', 'zone-c'));
  await sleep(300);
  t.is(changes, 0);
  api.apply(node('node-a', 'zone-b'));
  await until('the change', () => changes === 1);
  t.is((await src.load()).snapshot.node?.zone, 'zone-b');
});

test.serial('each EndpointSlice change reports its last-change-trigger-time for the service ports it changed; times from before the start are not', async (t) => {
  const api = await world();
  api.apply(slice('web-1', 'web', ['10.244.1.1'], { annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': '2020-01-01T00:00:00Z' } }));
  const src = await sourceOn(t, api);
  const seen = notifications(src);
  const first = await src.load();
  t.deepEqual([...first.triggerTimes], []);
  await until('three watches', () => api.openWatches === 3);
  const when = new Date(Date.now() + 1000).toISOString();
  const mark = seen.count;
  api.apply(slice('web-1', 'web', ['10.244.1.3'], { annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': when } }));
  await notifiedSince(seen, mark);
  const r = await src.load();
  t.deepEqual([...r.triggerTimes], [['default/web:http', [Date.parse(when)]]]);
  t.deepEqual([...(await src.load()).triggerTimes], []);
});

test.serial('with a list timeout, a load fails with one error naming what was not listed', async (t) => {
  const api = await world();
  api.holdLists();
  const src = await sourceOn(t, api, { listTimeoutMs: 500 });
  const err = await t.throwsAsync(src.load());
  t.is(err.message, `timed out after 0.5 s waiting for the first lists from the Kubernetes API server at ${api.url}: Services not listed yet; EndpointSlices not listed yet; Nodes not listed yet`);
});

test.serial('closing the source rejects a load still waiting for the first lists', async (t) => {
  const port = await freePort();
  const src = await sourceFor(`http://127.0.0.1:${port}`);
  const loading = src.load();
  await sleep(200);
  await src.close();
  const err = await t.throwsAsync(loading);
  t.regex(err.message, /closed before its first lists completed/);
});

/** The double with `count` Services svc-0… (10.96.x.y) and one EndpointSlice each, and Node node-a. */
async function manyServices(count: number): Promise<FakeKubeApi> {
  const api = await FakeKubeApi.start();
  for (let i = 0; i < count; i++) {
    api.apply(service(`svc-${i}`, `10.96.${i >> 8}.${i & 255}`));
    api.apply(slice(`svc-${i}-1`, `svc-${i}`, [`10.244.${i >> 8}.${i & 255}`]));
  }
  api.apply(node('node-a', 'zone-a'));
  return api;
}

const continueOf = (r: { query: Readonly<Record<string, string>> }) => r.query.continue;

test.serial('a list is read in pages of 500 with continue tokens, as client-go\'s pager reads it: every object of every page is served', async (t) => {
  const api = await manyServices(1201);
  const src = await sourceOn(t, api);
  const r = await src.load();
  t.is(r.snapshot.services.size, 1201);
  t.deepEqual(endpointsOf(r, 'default/svc-1200:http'), ['10.244.4.176']);
  const lists = api.lists(SERVICES);
  t.deepEqual(lists.map((l) => l.query.limit), ['500', '500', '500']);
  t.is(continueOf(lists[0]!), undefined);
  t.truthy(continueOf(lists[1]!));
  t.truthy(continueOf(lists[2]!));
  t.is(api.lists(SLICES).length, 3);
  t.is(api.lists(NODES).length, 1);
});

test.serial('a relist whose continue token expired starts again from its first page, and deletes only what the whole list lacks', async (t) => {
  const api = await manyServices(1201);
  const src = await sourceOn(t, api);
  await src.load();
  await until('three watches', () => api.openWatches === 3);
  api.delete('Service', 'default', 'svc-1100');
  api.expireContinues('services');
  const before = api.lists(SERVICES).length;
  api.expire(); // every watch gets 410: relist
  await until('the relist, started again after the 410 on its second page', () => api.lists(SERVICES).length >= before + 5 && api.openWatches === 3);
  const relist = api.lists(SERVICES).slice(before);
  t.deepEqual(relist.map((l) => continueOf(l) === undefined), [true, false, true, false, false], 'first page, its expired continue, then the list again whole');
  const r = await src.load();
  t.is(r.snapshot.services.size, 1200);
  t.false(r.snapshot.services.has('default/svc-1100:http'));
  t.true(r.snapshot.services.has('default/svc-1200:http'));
});

test.serial('a page that fails is a failed list: nothing held is deleted, and the list is retried after the backoff', async (t) => {
  const api = await manyServices(1201);
  const { logger, lines } = recordingLogger();
  // A backoff long enough to look at the state between the failure and the retry.
  const src = await sourceOn(t, api, { logger, backoff: { initialMs: 1500, maxMs: 1500 } });
  await src.load();
  await until('three watches', () => api.openWatches === 3);
  const before = api.lists(SERVICES).length;
  // svc-3 is deleted while no watch runs: only the relist can tell, and its second page fails.
  api.holdLists('services');
  api.expire();
  await until('the relist asked for', () => api.lists(SERVICES).length === before + 1);
  api.delete('Service', 'default', 'svc-3');
  api.failPages('services', 1);
  api.releaseLists();
  await until('the failed page reported', () => lines.some((l) => l.resource === 'Services' && String(l.msg).includes('retrying')));
  const during = await src.load();
  t.is(during.snapshot.services.size, 1201, 'no Service deleted on a list that did not finish');
  t.true(during.snapshot.services.has('default/svc-3:http'));
  t.true(during.snapshot.services.has('default/svc-1200:http'));
  await until('the list retried whole, and watched again', () => api.lists(SERVICES).length >= before + 5 && api.openWatches === 3, 10_000);
  const after = await src.load();
  t.is(after.snapshot.services.size, 1200);
  t.false(after.snapshot.services.has('default/svc-3:http'));
});

test.serial('a list whose later page keeps failing is retried with a growing backoff, as any failing list', async (t) => {
  const api = await manyServices(600);
  const src = await sourceOn(t, api, { backoff: { initialMs: 200, maxMs: 1600 } });
  api.failPages('services', 1000);
  void src.load().catch(() => undefined);
  const firstPages = () => api.lists(SERVICES).filter((l) => continueOf(l) === undefined);
  await until('four tries of the list', () => firstPages().length >= 4, 30_000);
  // Retries after 200, 400 and 800 ms: each try's first page comes at least that long after the one before,
  // however long the pages take (a backoff reset by every first page would retry every 200 ms).
  const at = firstPages().slice(0, 4).map((l) => l.at);
  at.slice(1).forEach((a, i) => t.true(a - at[i]! >= 200 * 2 ** i - 5, `try ${i + 2} came ${a - at[i]!} ms after the one before`));
});
