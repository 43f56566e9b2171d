/** drover run's metrics and health servers, scraped over HTTP on loopback, fed by a real proxier and iptables mode on the in-memory iptables. */
import test from 'ava';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { RestoreError } from '../../src/modes/iptables/exec.ts';
import { FakeIptables } from '../../src/modes/iptables/fake.ts';
import { iptablesMetrics } from '../../src/modes/iptables/metrics.ts';
import { parseBindAddress } from '../../src/model/addr.ts';
import { Proxier, type SourceRead } from '../../src/proxier/proxier.ts';
import { startServers } from '../../src/server/daemon.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

const LOOPBACK = parseBindAddress('127.0.0.1:0')!;
const a = (eps: string[]) => sp('ns/a:http', '172.30.0.1', 80, eps.map((e) => ep(e)));
const b = sp('ns/b:http', '172.30.0.2', 80, [ep('10.180.0.9:80')]);

/** The value of the sample `name` (with its labels, as exposed) in a scrape; undefined when absent. */
function sample(text: string, name: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

/** `-A` lines drover's rules put in a table of the in-memory iptables (it holds nothing else). */
function rulesIn(fake: FakeIptables, table: 'filter' | 'nat'): number {
  return fake.dump(table).split('\n').filter((l) => l.startsWith('-A ')).length;
}

function world(syncPeriodMs = 3_600_000) {
  const fake = new FakeIptables();
  const backend = new IptablesBackend({ exec: fake, render: { clusterCIDR: '10.0.0.0/8', masqueradeAll: false }, logger: silentLogger() });
  let read: SourceRead = { snapshot: snap(a(['10.180.0.1:80']), b) };
  const source = { load: async () => read, watch: () => {}, close: () => {} };
  const proxier = new Proxier({ source, backend, logger: silentLogger(), minSyncPeriodMs: 0, syncPeriodMs });
  return { fake, backend, proxier, set: (r: SourceRead) => (read = r) };
}

test("metrics: kube-proxy's names are served, and their values follow the syncs", async (t) => {
  const w = world();
  const servers = await startServers(w.proxier, { proxyMode: 'iptables', healthCheckAddresses: [], metrics: LOOPBACK, healthz: null, syncPeriodMs: 30_000, modeMetrics: iptablesMetrics, logger: silentLogger() });
  t.teardown(() => servers.close());
  const scrape = async () => {
    const res = await fetch(`http://127.0.0.1:${servers.ports.metrics}/metrics`);
    t.is(res.status, 200);
    return res.text();
  };

  const mode = await fetch(`http://127.0.0.1:${servers.ports.metrics}/proxyMode`);
  t.is(mode.headers.get('content-type'), 'text/plain; charset=utf-8');
  t.is(await mode.text(), 'iptables', "/proxyMode answers the mode's name, as kube-proxy's does");

  await w.proxier.syncOnce();
  let text = await scrape();
  for (const name of [
    'sync_proxy_rules_duration_seconds',
    'sync_full_proxy_rules_duration_seconds',
    'sync_partial_proxy_rules_duration_seconds',
    'network_programming_duration_seconds',
    'sync_proxy_rules_last_timestamp_seconds',
    'sync_proxy_rules_last_queued_timestamp_seconds',
    'sync_proxy_rules_endpoint_changes_total',
    'sync_proxy_rules_service_changes_total',
    'sync_proxy_rules_iptables_total',
    'sync_proxy_rules_iptables_restore_failures_total',
    'sync_proxy_rules_no_local_endpoints_total',
  ]) {
    t.true(text.includes(`# TYPE kubeproxy_${name} `), name);
  }
  t.true(text.includes('# TYPE process_resident_memory_bytes gauge'));
  t.is(sample(text, 'kubeproxy_sync_full_proxy_rules_duration_seconds_count'), 1);
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_service_changes_total'), 2, 'the first read adds both service ports');
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_endpoint_changes_total'), 2);
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_iptables_total{table="nat"}'), rulesIn(w.fake, 'nat'));
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_iptables_total{table="filter"}'), rulesIn(w.fake, 'filter'));
  const firstSync = sample(text, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds')!;
  t.true(Math.abs(firstSync - Date.now() / 1000) < 60);

  // One endpoint added, made at the source 2 s ago.
  w.set({ snapshot: snap(a(['10.180.0.1:80', '10.180.0.2:80']), b), changed: new Set(['ns/a:http']), triggerTimes: new Map([['ns/a:http', [Date.now() - 2000]]]) });
  await w.proxier.syncOnce();
  text = await scrape();
  t.is(sample(text, 'kubeproxy_sync_partial_proxy_rules_duration_seconds_count'), 1);
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_endpoint_changes_total'), 3);
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_service_changes_total'), 2, 'the Service itself did not change');
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_iptables_total{table="nat"}'), rulesIn(w.fake, 'nat'));
  t.is(sample(text, 'kubeproxy_network_programming_duration_seconds_count'), 1);
  t.true(sample(text, 'kubeproxy_network_programming_duration_seconds_sum')! >= 2);
  t.is(sample(text, 'kubeproxy_network_programming_duration_seconds_bucket{le="1"}'), 0);

  const secondSync = sample(text, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds')!;
  t.true(secondSync >= firstSync);

  // A partial restore that fails: counted, and the changes stay pending.
  w.fake.failNextRestore(new RestoreError('iptables-restore: line 3 failed', 3, 'x'));
  w.set({ snapshot: snap(a(['10.180.0.1:80']), b), changed: new Set(['ns/a:http']) });
  await t.throwsAsync(() => w.proxier.syncOnce());
  text = await scrape();
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_iptables_restore_failures_total'), 1);
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total'), 1);
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_endpoint_changes_pending'), 1);
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds'), secondSync, 'a failed sync is not a successful one');
  w.set({ snapshot: snap(a(['10.180.0.1:80']), b), changed: new Set() });
  await w.proxier.syncOnce();
  text = await scrape();
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_endpoint_changes_pending'), 0);
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_iptables_total{table="nat"}'), rulesIn(w.fake, 'nat'));
});

test('metrics: Local traffic policies without a local endpoint are counted', async (t) => {
  const w = world();
  const servers = await startServers(w.proxier, { proxyMode: 'iptables', healthCheckAddresses: [], metrics: LOOPBACK, healthz: null, syncPeriodMs: 30_000, logger: silentLogger() });
  t.teardown(() => servers.close());
  const node = { name: 'node-a', addresses: [] };
  const remote = ep('10.180.0.5:80', { nodeName: 'node-b' });
  const local = ep('10.180.0.6:80', { nodeName: 'node-a' });
  w.set({
    snapshot: {
      ...snap(
        sp('ns/itp:http', '172.30.0.5', 80, [remote], { internalTrafficPolicy: 'Local' }),
        sp('ns/itp-ok:http', '172.30.0.6', 80, [local], { internalTrafficPolicy: 'Local' }),
        sp('ns/etp:http', '172.30.0.7', 80, [remote], { externalTrafficPolicy: 'Local', type: 'NodePort', frontends: { ...a([]).frontends, nodePort: 30080 } }),
        // No usable endpoint anywhere: rejected, not dropped, and not counted (as kube-proxy).
        sp('ns/itp-none:http', '172.30.0.8', 80, [], { internalTrafficPolicy: 'Local' }),
        sp('ns/etp-none:http', '172.30.0.9', 80, [], { externalTrafficPolicy: 'Local', type: 'NodePort', frontends: { ...a([]).frontends, nodePort: 30081 } }),
      ),
      node,
    },
  });
  await w.proxier.syncOnce();
  const text = await (await fetch(`http://127.0.0.1:${servers.ports.metrics}/metrics`)).text();
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy="internal"}'), 1);
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy="external"}'), 1);
});

test('healthz and livez: 200 while syncs succeed, 503 once a queued sync has waited twice the sync period, 200 again after a success', async (t) => {
  const w = world(1000);
  const servers = await startServers(w.proxier, { proxyMode: 'iptables', healthCheckAddresses: [], metrics: null, healthz: LOOPBACK, syncPeriodMs: 1000, logger: silentLogger() });
  t.teardown(() => servers.close());
  const probe = async (path: string) => {
    const res = await fetch(`http://127.0.0.1:${servers.ports.healthz}${path}`);
    return { status: res.status, body: JSON.parse(await res.text()) as Record<string, unknown> };
  };
  await w.proxier.syncOnce();
  const ok = await probe('/healthz');
  t.is(ok.status, 200);
  t.deepEqual(Object.keys(ok.body), ['lastUpdated', 'currentTime', 'nodeEligible']);
  t.is(ok.body.nodeEligible, true);

  // Every restore fails from now on; the loop retries with backoff (1 s, 2 s, …), each retry queued.
  const failing = w.backend.sync.bind(w.backend);
  let fail = true;
  w.backend.sync = async (s, c) => {
    if (fail) throw new RestoreError('iptables-restore: injected failure', undefined, undefined);
    return failing(s, c);
  };
  await w.proxier.start();
  t.teardown(() => w.proxier.stop());
  await new Promise((r) => setTimeout(r, 300));
  t.is((await probe('/healthz')).status, 200, 'a queued sync that has waited less than 2 s is not late');
  await new Promise((r) => setTimeout(r, 2200));
  const late = await probe('/healthz');
  t.is(late.status, 503);
  t.is((await probe('/livez')).status, 503);
  t.not(late.body.lastUpdated, late.body.currentTime, 'lastUpdated is the last successful sync');

  fail = false;
  const deadline = Date.now() + 10_000;
  while ((await probe('/healthz')).status !== 200 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  t.is((await probe('/healthz')).status, 200, 'the retry that succeeds makes the proxy healthy again');
  t.is((await probe('/livez')).status, 200);
});

test('a server whose address is taken is retried, and the proxy keeps running', async (t) => {
  const w = world();
  const first = await startServers(w.proxier, { proxyMode: 'iptables', healthCheckAddresses: [], metrics: null, healthz: LOOPBACK, syncPeriodMs: 30_000, logger: silentLogger() });
  t.teardown(() => first.close());
  const taken = parseBindAddress(`127.0.0.1:${first.ports.healthz}`)!;
  const second = await startServers(w.proxier, { proxyMode: 'iptables', healthCheckAddresses: [], metrics: null, healthz: taken, syncPeriodMs: 30_000, logger: silentLogger() });
  t.teardown(() => second.close());
  t.is(second.ports.healthz, undefined);
  await t.notThrowsAsync(() => w.proxier.syncOnce());
});
