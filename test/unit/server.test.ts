/** drover run's metrics and health servers, scraped over HTTP on loopback, fed by a real proxier and iptables or nftables mode on in-memory kernels. */
import test from 'ava';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { RestoreError } from '../../src/kernel/iptables/exec.ts';
import { FakeIptables } from '../../src/kernel/iptables/fake.ts';
import { iptablesMetrics } from '../../src/modes/iptables/metrics.ts';
import { parseBindAddress } from '../../src/model/addr.ts';
import { Proxier } from '../../src/proxier/proxier.ts';
import type { SourceRead } from '../../src/sources/source.ts';
import { startServers } from '../../src/server/daemon.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';
import { configz } from '../../src/cli/configz.ts';
import { goDuration } from '../../src/util/duration.ts';
import { DualStackIptablesBackend } from '../../src/modes/iptables/dual-stack.ts';
import { loadStatic6Rules, loadStaticRules } from '../../src/modes/shared/kube-chains/static.ts';
import { DualStackNftablesBackend } from '../../src/modes/nftables/dual-stack.ts';
import { FakeNft } from '../../src/modes/nftables/fake.ts';
import { nftablesMetrics } from '../../src/modes/nftables/metrics.ts';
import type { Snapshot } from '../../src/model/types.ts';
import { buildFrom } from './model-helpers.ts';
import { until } from '../support/wait.ts';

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
  t.is(sample(text, 'kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"}'), 1);
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_service_changes_total'), 2, 'the first read adds both service ports');
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_endpoint_changes_total'), 2);
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_iptables_total{ip_family="IPv4",table="nat"}'), rulesIn(w.fake, 'nat'));
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_iptables_total{ip_family="IPv4",table="filter"}'), rulesIn(w.fake, 'filter'));
  const firstSync = sample(text, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}')!;
  t.true(Math.abs(firstSync - Date.now() / 1000) < 60);

  // One endpoint added, made at the source 2 s ago.
  w.set({ snapshot: snap(a(['10.180.0.1:80', '10.180.0.2:80']), b), changed: new Set(['ns/a:http']), triggerTimes: new Map([['ns/a:http', [Date.now() - 2000]]]) });
  await w.proxier.syncOnce();
  text = await scrape();
  t.is(sample(text, 'kubeproxy_sync_partial_proxy_rules_duration_seconds_count{ip_family="IPv4"}'), 1);
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_endpoint_changes_total'), 3);
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_service_changes_total'), 2, 'the Service itself did not change');
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_iptables_total{ip_family="IPv4",table="nat"}'), rulesIn(w.fake, 'nat'));
  t.is(sample(text, 'kubeproxy_network_programming_duration_seconds_count{ip_family="IPv4"}'), 1);
  t.true(sample(text, 'kubeproxy_network_programming_duration_seconds_sum{ip_family="IPv4"}')! >= 2);
  t.is(sample(text, 'kubeproxy_network_programming_duration_seconds_bucket{le="1",ip_family="IPv4"}'), 0);

  const secondSync = sample(text, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}')!;
  t.true(secondSync >= firstSync);

  // A partial restore that fails: counted, and the changes stay pending.
  w.fake.failNextRestore(new RestoreError('iptables-restore: line 3 failed', 3, 'x'));
  w.set({ snapshot: snap(a(['10.180.0.1:80']), b), changed: new Set(['ns/a:http']) });
  await t.throwsAsync(() => w.proxier.syncOnce());
  text = await scrape();
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_iptables_restore_failures_total{ip_family="IPv4"}'), 1);
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total{ip_family="IPv4"}'), 1);
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_endpoint_changes_pending'), 1);
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}'), secondSync, 'a failed sync is not a successful one');
  w.set({ snapshot: snap(a(['10.180.0.1:80']), b), changed: new Set() });
  await w.proxier.syncOnce();
  text = await scrape();
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_endpoint_changes_pending'), 0);
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_iptables_total{ip_family="IPv4",table="nat"}'), rulesIn(w.fake, 'nat'));
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
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv4",traffic_policy="internal"}'), 1);
  t.is(sample(text, 'kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv4",traffic_policy="external"}'), 1);
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
  const started = Date.now();
  await w.proxier.start();
  t.teardown(() => w.proxier.stop());
  // The sync queued by start() has waited at most since `started`: not late while that is under 2 s.
  // A machine too busy to answer within 2 s cannot show it, and says so instead of failing.
  const early = await probe('/healthz');
  if (Date.now() - started < 2000) t.is(early.status, 200, 'a queued sync that has waited less than 2 s is not late');
  else t.log(`the first probe answered ${Date.now() - started} ms after start: too late to show the not-late case`);
  // Late stays late until a sync succeeds (the oldest queued sync is kept).
  await until('healthz to turn 503', async () => (await probe('/healthz')).status === 503, 60_000);
  const late = await probe('/healthz');
  t.is(late.status, 503);
  t.is((await probe('/livez')).status, 503);
  t.true(Date.now() - started >= 2000, 'late only once twice the sync period has passed');
  t.not(late.body.lastUpdated, late.body.currentTime, 'lastUpdated is the last successful sync');

  fail = false;
  await until('healthz to turn 200 again', async () => (await probe('/healthz')).status === 200, 60_000, 200);
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

/** `snapshot` without the IPv6-only Service of the dual-stack fixtures: a change to the IPv6 view alone. */
function withoutV6only(snapshot: Snapshot): Snapshot {
  return { ...snapshot, ipv6Services: new Map([...snapshot.ipv6Services!].filter(([key]) => key !== 'default/v6only:http')) };
}

/** Every sample of `name` in a scrape, by its label text (`ip_family="IPv4",table="nat"`; "" without labels). */
function samples(text: string, name: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{([^}]*)\\})? (\\S+)$`, 'gm'))) out[m[1] ?? ''] = Number(m[2]);
  return out;
}

test('metrics: a dual-stack sync is counted under each ip_family, and a failed IPv6 restore under IPv6 alone', async (t) => {
  const fakes = { IPv4: new FakeIptables(), IPv6: new FakeIptables() };
  const backend = new DualStackIptablesBackend({
    IPv4: { exec: fakes.IPv4, render: { clusterCIDR: '10.244.0.0/16', masqueradeAll: false }, statics: loadStaticRules() },
    IPv6: { exec: fakes.IPv6, render: { clusterCIDR: 'fd00:244::/48', masqueradeAll: false, family: 'IPv6' }, statics: loadStatic6Rules() },
    logger: silentLogger(),
  });
  const built = (await buildFrom(['test/fixtures/dualstack/services.yaml'])).snapshot;
  let read: SourceRead = { snapshot: built };
  const proxier = new Proxier({ source: { load: async () => read, watch: () => {}, close: () => {} }, backend, logger: silentLogger(), minSyncPeriodMs: 0, syncPeriodMs: 3_600_000 });
  const servers = await startServers(proxier, { proxyMode: 'iptables', healthCheckAddresses: [], metrics: LOOPBACK, healthz: null, syncPeriodMs: 30_000, modeMetrics: iptablesMetrics, logger: silentLogger() });
  t.teardown(() => servers.close());
  const scrape = async () => (await fetch(`http://127.0.0.1:${servers.ports.metrics}/metrics`)).text();

  await proxier.syncOnce();
  let text = await scrape();
  t.deepEqual(samples(text, 'kubeproxy_sync_full_proxy_rules_duration_seconds_count'), { 'ip_family="IPv4"': 1, 'ip_family="IPv6"': 1 });
  t.deepEqual(samples(text, 'kubeproxy_sync_proxy_rules_iptables_total'), {
    'ip_family="IPv4",table="filter"': rulesIn(fakes.IPv4, 'filter'),
    'ip_family="IPv4",table="nat"': rulesIn(fakes.IPv4, 'nat'),
    'ip_family="IPv6",table="filter"': rulesIn(fakes.IPv6, 'filter'),
    'ip_family="IPv6",table="nat"': rulesIn(fakes.IPv6, 'nat'),
  });
  t.not(rulesIn(fakes.IPv4, 'nat'), rulesIn(fakes.IPv6, 'nat'), 'the families have rulesets of their own (v6only is in IPv6 alone)');
  t.deepEqual(Object.keys(samples(text, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds')), ['ip_family="IPv4"', 'ip_family="IPv6"']);
  t.deepEqual(samples(text, 'kubeproxy_sync_proxy_rules_iptables_restore_failures_total'), { 'ip_family="IPv4"': 0, 'ip_family="IPv6"': 0 });
  t.deepEqual(Object.keys(samples(text, 'kubeproxy_sync_proxy_rules_no_local_endpoints_total')).sort(), [
    'ip_family="IPv4",traffic_policy="external"',
    'ip_family="IPv4",traffic_policy="internal"',
    'ip_family="IPv6",traffic_policy="external"',
    'ip_family="IPv6",traffic_policy="internal"',
  ]);
  t.deepEqual(samples(text, 'kubeproxy_sync_proxy_rules_service_changes_total'), { '': 3 }, 'the change counters have no ip_family, as in kube-proxy');

  // A partial sync whose IPv6 restore fails (the IPv6-only Service goes): IPv6 is counted as failed, IPv4 not.
  fakes.IPv6.failNextRestore(new RestoreError('ip6tables-restore: line 2 failed', 2, 'x'));
  read = { snapshot: withoutV6only(built), changed: new Set(['default/v6only:http']) };
  await t.throwsAsync(() => proxier.syncOnce());
  text = await scrape();
  t.deepEqual(samples(text, 'kubeproxy_sync_proxy_rules_iptables_restore_failures_total'), { 'ip_family="IPv4"': 0, 'ip_family="IPv6"': 1 });
  t.deepEqual(samples(text, 'kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total'), { 'ip_family="IPv4"': 0, 'ip_family="IPv6"': 1 });
  t.deepEqual(samples(text, 'kubeproxy_sync_partial_proxy_rules_duration_seconds_count'), { 'ip_family="IPv4"': 1, 'ip_family="IPv6"': 1 }, 'the failed attempt ran both families: its duration is observed for each');
});

test('metrics: nftables mode counts sync failures and clean-up failures per ip_family, under kube-proxy names', async (t) => {
  const nft = { IPv4: new FakeNft(), IPv6: new FakeNft('IPv6') };
  const generation = async () => nft.IPv4.generationId + nft.IPv6.generationId;
  const backend = new DualStackNftablesBackend({
    IPv4: { nft: nft.IPv4, elements: { ...nft.IPv4.writer(), generation }, render: { clusterCIDR: '10.244.0.0/16', masqueradeAll: false }, frontends: { nodePortIPs: ['192.168.1.1'] } },
    IPv6: { nft: nft.IPv6, elements: { ...nft.IPv6.writer(), generation }, render: { clusterCIDR: 'fd00:244::/48', masqueradeAll: false, family: 'IPv6' }, frontends: { nodePortIPs: ['fd00:1::1'], family: 'IPv6' } },
    logger: silentLogger(),
  });
  const built = (await buildFrom(['test/fixtures/dualstack/services.yaml'])).snapshot;
  const withAffinity = (eps: string[]): Snapshot => ({
    ...built,
    services: new Map([...built.services, ['ns/sticky:http', sp('ns/sticky:http', '10.96.0.50', 80, eps.map((e) => ep(e)), { sessionAffinity: { timeoutSeconds: 60 } })]]),
  });
  let read: SourceRead = { snapshot: withAffinity(['10.244.1.5:80']) };
  const proxier = new Proxier({ source: { load: async () => read, watch: () => {}, close: () => {} }, backend, logger: silentLogger(), minSyncPeriodMs: 0, syncPeriodMs: 3_600_000 });
  const servers = await startServers(proxier, { proxyMode: 'nftables', healthCheckAddresses: [], metrics: LOOPBACK, healthz: null, syncPeriodMs: 30_000, modeMetrics: nftablesMetrics, logger: silentLogger() });
  t.teardown(() => servers.close());
  const scrape = async () => (await fetch(`http://127.0.0.1:${servers.ports.metrics}/metrics`)).text();

  await proxier.syncOnce();
  let text = await scrape();
  t.true(text.includes('# HELP kubeproxy_sync_proxy_rules_nftables_sync_failures_total Cumulative proxy nftables sync failures\n# TYPE kubeproxy_sync_proxy_rules_nftables_sync_failures_total counter\n'));
  t.true(text.includes('# HELP kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total Cumulative proxy nftables cleanup failures\n# TYPE kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total counter\n'));
  t.deepEqual(samples(text, 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total'), { 'ip_family="IPv4"': 0, 'ip_family="IPv6"': 0 });
  t.false(text.includes('kubeproxy_sync_proxy_rules_iptables_'), "iptables mode's metrics are not registered in nftables mode, as in kube-proxy");

  // The IPv6 table's transaction fails (the IPv6-only Service goes): counted for IPv6 alone.
  nft.IPv6.failNext = 'Error: Could not process rule: No such file or directory';
  read = { snapshot: withoutV6only(withAffinity(['10.244.1.5:80'])), changed: new Set(['default/v6only:http']) };
  await t.throwsAsync(() => proxier.syncOnce());
  text = await scrape();
  t.deepEqual(samples(text, 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total'), { 'ip_family="IPv4"': 0, 'ip_family="IPv6"': 1 });
  await proxier.syncOnce();

  // The sticky Service's endpoint changes; the clean-up of its affinity entries cannot read the map (a netlink dump).
  const readElements = nft.IPv4.readElements.bind(nft.IPv4);
  nft.IPv4.readElements = (name) => {
    if (name === 'affinity') throw new Error('netlink: injected failure');
    return readElements(name);
  };
  read = { snapshot: withAffinity(['10.244.1.6:80']), changed: new Set(['ns/sticky:http']) };
  await proxier.syncOnce();
  text = await scrape();
  t.deepEqual(samples(text, 'kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total'), { 'ip_family="IPv4"': 1, 'ip_family="IPv6"': 0 });
  t.deepEqual(samples(text, 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total'), { 'ip_family="IPv4"': 0, 'ip_family="IPv6"': 1 }, 'the sync itself succeeded');
});

test("the metrics server answers /healthz with kube-proxy's `ok` and /configz with the effective configuration", async (t) => {
  const w = world();
  const config = configz({
    kernel: { mode: 'iptables', iptablesBackend: 'auto', logLevel: 'info', logFormat: 'json' },
    render: {
      source: 'kubernetes',
      serviceCidr: '10.96.0.0/12',
      clusterCidr: '10.244.0.0/16',
      hostnameOverride: 'node-a',
      kubeconfig: '/var/lib/kube-proxy/kubeconfig.conf',
      nodeportAddresses: [],
      masqueradeAll: false,
      detectLocalMode: 'NodeCIDR',
      bindAddress: ['192.168.1.10'],
      conntrackTcpBeLiberal: true,
    },
    server: { metricsBindAddress: parseBindAddress('127.0.0.1:10249')!, healthzBindAddress: parseBindAddress('[::]:10256')! },
    sync: { syncPeriod: 90_000, minSyncPeriod: 1000 },
    conntrack: {
      conntrackMaxPerCore: 32768,
      conntrackMin: 131072,
      conntrackTcpTimeoutEstablished: 86_400_000,
      conntrackTcpTimeoutCloseWait: 3_600_000,
      conntrackUdpTimeout: 0,
      conntrackUdpTimeoutStream: 0,
    },
    modes: { iptables: {} },
  });
  const servers = await startServers(w.proxier, { proxyMode: 'iptables', healthCheckAddresses: [], metrics: LOOPBACK, healthz: null, syncPeriodMs: 30_000, configz: config, logger: silentLogger() });
  t.teardown(() => servers.close());
  const get = (path: string) => fetch(`http://127.0.0.1:${servers.ports.metrics}${path}`);
  for (const path of ['/healthz', '/healthz/ping']) {
    const res = await get(path);
    t.is(res.status, 200, path);
    t.is(res.headers.get('content-type'), 'text/plain; charset=utf-8');
    t.is(res.headers.get('x-content-type-options'), 'nosniff');
    t.is(await res.text(), 'ok', `${path}: k8s.io/apiserver's healthz answer, as kube-proxy's metrics server gives it`);
  }
  const res = await get('/configz');
  t.is(res.headers.get('content-type'), 'application/json');
  t.deepEqual(await res.json(), {
    'kubeproxy.config.k8s.io': {
      mode: 'iptables',
      bindAddress: '192.168.1.10',
      detectLocalMode: 'NodeCIDR',
      clusterCIDR: '10.244.0.0/16',
      hostnameOverride: 'node-a',
      clientConnection: { kubeconfig: '/var/lib/kube-proxy/kubeconfig.conf' },
      metricsBindAddress: '127.0.0.1:10249',
      healthzBindAddress: '[::]:10256',
      nodePortAddresses: [],
      syncPeriod: '1m30s',
      minSyncPeriod: '1s',
      iptables: { masqueradeAll: false, localhostNodePorts: false, syncPeriod: '1m30s', minSyncPeriod: '1s' },
      conntrack: { maxPerCore: 32768, min: 131072, tcpEstablishedTimeout: '24h0m0s', tcpCloseWaitTimeout: '1h0m0s', tcpBeLiberal: true, udpTimeout: '0s', udpStreamTimeout: '0s' },
    },
  });
  t.is((await get('/nosuch')).status, 404);
  // A server turned off with `--metrics-bind-address ""`: commander leaves "" as the value.
  const off = configz({
    kernel: { mode: 'nftables', iptablesBackend: 'auto', logLevel: 'info', logFormat: 'json' },
    render: { source: 'kubernetes', serviceCidr: '10.96.0.0/12', masqueradeAll: true },
    server: { metricsBindAddress: '', healthzBindAddress: null },
    sync: { syncPeriod: 30_000, minSyncPeriod: 0 },
    conntrack: {},
    modes: {},
  });
  t.deepEqual(off['kubeproxy.config.k8s.io'], {
    mode: 'nftables',
    bindAddress: '',
    detectLocalMode: 'ClusterCIDR',
    clusterCIDR: '',
    hostnameOverride: '',
    clientConnection: { kubeconfig: '' },
    metricsBindAddress: '',
    healthzBindAddress: '',
    nodePortAddresses: null,
    syncPeriod: '30s',
    minSyncPeriod: '0s',
    iptables: {},
    conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s', tcpBeLiberal: false, udpTimeout: '0s', udpStreamTimeout: '0s' },
    nftables: { masqueradeAll: true, syncPeriod: '30s', minSyncPeriod: '0s' },
  });
});

test('Go duration text, as time.Duration prints it', (t) => {
  for (const [ms, text] of [[0, '0s'], [500, '500ms'], [1000, '1s'], [30_000, '30s'], [60_000, '1m0s'], [90_500, '1m30.5s'], [3_600_000, '1h0m0s'], [3_723_000, '1h2m3s']] as const) {
    t.is(goDuration(ms), text, String(ms));
  }
});
