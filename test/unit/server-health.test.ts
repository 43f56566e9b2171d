/** The proxy health rule of kube-proxy's healthz server (pkg/proxy/healthcheck/proxy_health.go), on a hand-moved clock. */
import test from 'ava';
import { ProxyHealth } from '../../src/server/health.ts';
import { countChanges } from '../../src/proxier/changes.ts';
import { parseBindAddress } from '../../src/model/addr.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

test('healthy until a queued sync has waited the timeout; the oldest queued one counts; a success clears it', (t) => {
  let now = Date.UTC(2026, 0, 1);
  const h = new ProxyHealth(60_000, () => now);
  t.deepEqual(h.healthz(), { status: 200, body: '{"lastUpdated": "2026-01-01T00:00:00.000Z","currentTime": "2026-01-01T00:00:00.000Z", "nodeEligible": true}' });
  h.queued();
  now += 59_999;
  h.queued(); // a later one does not restart the wait
  t.is(h.healthz().status, 200);
  now += 1;
  t.deepEqual(h.healthz(), { status: 503, body: '{"lastUpdated": "0001-01-01T00:00:00Z","currentTime": "2026-01-01T00:01:00.000Z", "nodeEligible": true}' });
  t.deepEqual(h.livez(), { status: 503, body: '{"lastUpdated": "0001-01-01T00:00:00Z","currentTime": "2026-01-01T00:01:00.000Z"}' });
  h.updated();
  const at = now;
  t.is(h.healthz().status, 200);
  h.queued();
  now += 120_000;
  t.is(h.healthz().body, `{"lastUpdated": "${new Date(at).toISOString()}","currentTime": "${new Date(now).toISOString()}", "nodeEligible": true}`);
});

test('a node that is not eligible fails /healthz but not /livez', (t) => {
  const h = new ProxyHealth(60_000, () => 0);
  h.setNodeEligible(false);
  t.is(h.healthz().status, 503);
  t.true(h.healthz().body.endsWith('"nodeEligible": false}'));
  t.is(h.livez().status, 200);
});

test('/healthz follows this node\'s Node through the synced snapshots: leaving or gone is not eligible; never described is', (t) => {
  const h = new ProxyHealth(60_000, () => 0);
  const syncs: ((last: { error?: string; snapshot?: object }) => void)[] = [];
  h.listen({ on: ((event: string, fn: (last: { error?: string; snapshot?: object }) => void) => {
    if (event === 'sync') syncs.push(fn);
    return () => {};
  }) as never });
  const sync = (node?: object, error?: string) => syncs.forEach((fn) => fn({ ...(error ? { error } : { snapshot: { services: new Map(), ...(node ? { node } : {}) } }) }));
  sync();
  t.is(h.healthz().status, 200, 'no Node in the source: eligible');
  sync({ name: 'n1', addresses: [] });
  t.is(h.healthz().status, 200);
  sync({ name: 'n1', addresses: [], leaving: 'it has the ToBeDeletedByClusterAutoscaler taint' });
  t.deepEqual([h.healthz().status, h.livez().status], [503, 200]);
  t.true(h.healthz().body.endsWith('"nodeEligible": false}'));
  sync(undefined, 'restore failed');
  t.is(h.healthz().status, 503, 'a failed sync changes nothing');
  sync({ name: 'n1', addresses: [] });
  t.is(h.healthz().status, 200, 'the taint removed');
  sync();
  t.is(h.healthz().status, 503, 'the Node deleted');
  t.is(h.followNode(undefined), 'its Node is gone');
  t.is(h.followNode({ name: 'n1', addresses: [], nameOnly: true }), 'its Node is gone', 'a node known by name alone has no Node object');
  t.is(h.followNode({ name: 'n1', addresses: [] }), undefined);
});

test('countChanges tells service changes from endpoint changes, per service port', (t) => {
  const a1 = sp('ns/a:http', '172.30.0.1', 80, [ep('10.180.0.1:80')]);
  const a2 = sp('ns/a:http', '172.30.0.1', 80, [ep('10.180.0.2:80')]);
  const a3 = sp('ns/a:http', '172.30.0.1', 81, [ep('10.180.0.2:80')]);
  const empty = sp('ns/e:http', '172.30.0.9', 80, []);
  t.deepEqual(countChanges(undefined, snap(a1, empty), ['ns/a:http', 'ns/e:http']), { services: 2, endpoints: 1 });
  t.deepEqual(countChanges(snap(a1), snap(a2), ['ns/a:http']), { services: 0, endpoints: 1 });
  t.deepEqual(countChanges(snap(a2), snap(a3), ['ns/a:http']), { services: 1, endpoints: 0 });
  t.deepEqual(countChanges(snap(a1), snap(a3), ['ns/a:http']), { services: 1, endpoints: 1 });
  t.deepEqual(countChanges(snap(a1), snap(), ['ns/a:http', 'ns/gone:http']), { services: 1, endpoints: 1 });
  t.deepEqual(countChanges(snap(a1), snap(a1), ['ns/a:http']), { services: 0, endpoints: 0 });
});

test('parseBindAddress reads IP:PORT and [IPv6]:PORT, strictly', (t) => {
  t.like(parseBindAddress('127.0.0.1:10249'), { ip: { family: 4, text: '127.0.0.1' }, port: 10249 });
  t.like(parseBindAddress('[::]:10256'), { ip: { family: 6, text: '::' }, port: 10256 });
  t.like(parseBindAddress('0.0.0.0:0'), { port: 0 });
  for (const bad of ['127.0.0.1', ':10249', '::1:10249', '[127.0.0.1]:80', '127.0.0.01:80', '127.0.0.1:65536', 'localhost:80', '[::1]:', '127.0.0.1:80 ']) {
    t.is(parseBindAddress(bad), undefined, bad);
  }
});

test('a change time reported for several ports of one Service is observed once; other Services keep theirs', async (t) => {
  const { changeTimes } = await import('../../src/server/metrics.ts');
  t.deepEqual(
    changeTimes(new Map([['ns/a:http', [1000, 2000]], ['ns/a:metrics', [1000]], ['ns/b', [1000]], ['ns/b2:x', [3000]]])).map((c) => c.at),
    [1000, 2000, 1000, 3000],
  );
  t.deepEqual(changeTimes(undefined), []);
});

test('a change time is observed in the IP family of each view that holds its service port; a removed one counts as IPv4', async (t) => {
  const { changeTimes } = await import('../../src/server/metrics.ts');
  const { dualSnap, sp } = await import('../support/snapshots.ts');
  const snapshot = dualSnap([sp('ns/v4:http', '172.30.0.1', 80, []), sp('ns/both:http', '172.30.0.2', 80, [])], [sp('ns/v6:http', 'fd00:96::1', 80, []), sp('ns/both:http', 'fd00:96::2', 80, [])]);
  const times = new Map([['ns/v4:http', [1000]], ['ns/v6:http', [2000]], ['ns/both:http', [3000]], ['ns/gone:http', [4000]]]);
  t.deepEqual(changeTimes(times, snapshot), [
    { family: 'IPv4', at: 1000 },
    { family: 'IPv6', at: 2000 },
    { family: 'IPv4', at: 3000 },
    { family: 'IPv6', at: 3000 },
    { family: 'IPv4', at: 4000 },
  ]);
});

test('durations longer than a timer can wait are refused', async (t) => {
  const { parseDuration } = await import('../../src/cli/options.ts');
  t.is(parseDuration('24h'), 86_400_000);
  t.is(parseDuration('576h'), 24 * 86_400_000);
  t.throws(() => parseDuration('577h'), { message: '"577h" is longer than the longest duration drover takes, 24 days' });
});
