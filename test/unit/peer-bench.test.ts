/**
 * The pure pieces of the peer bench (scripts/peers/bench/): kube-proxy's
 * configuration file, CPU seconds from /proc/PID/stat, the PATH its
 * proxies get, and the report's tables and ratios.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import { kubeProxyConfig } from '../../scripts/peers/bench/kube-proxy-config.ts';
import { parseProcCpu } from '../../scripts/peers/bench/proc-stat.ts';
import { systemPath } from '../../scripts/peers/bench/processes.ts';
import { peerTables } from '../../scripts/peers/bench/report.ts';
import { ALL_PROXIES, parseProxyLabel, proxyLabel, type ProxyResult, type ProxySpec } from '../../scripts/peers/bench/run.ts';

const spec = { mode: 'nftables', node: 'kube-proxy-nftables', kubeconfig: '/tmp/x/admin.kubeconfig', clusterCIDR: '10.244.0.0/16' } as const;

test('kube-proxy runs with every conntrack value 0, its servers on loopback, its Node and kubeconfig', (t) => {
  const c = JSON.parse(kubeProxyConfig(spec)) as Record<string, unknown>;
  t.is(c.kind, 'KubeProxyConfiguration');
  t.is(c.mode, 'nftables');
  t.is(c.hostnameOverride, 'kube-proxy-nftables');
  t.deepEqual(c.clientConnection, { kubeconfig: '/tmp/x/admin.kubeconfig' });
  t.deepEqual(c.conntrack, { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s', udpTimeout: '0s', udpStreamTimeout: '0s' });
  t.is(c.healthzBindAddress, '127.0.0.1:10256');
  t.is(c.metricsBindAddress, '127.0.0.1:10249');
  t.false('nftables' in c, 'its default minSyncPeriod unless asked');
  t.deepEqual(JSON.parse(kubeProxyConfig({ ...spec, mode: 'iptables', minSyncPeriodMs: 0 })).iptables, { minSyncPeriod: '0ms' });
});

test('a malformed field of the kube-proxy configuration is refused by name', (t) => {
  t.throws(() => kubeProxyConfig({ ...spec, node: 'Node A' }), { message: /node "Node A"/ });
  t.throws(() => kubeProxyConfig({ ...spec, clusterCIDR: '10.244.0.0' }), { message: /clusterCIDR "10.244.0.0"/ });
  t.throws(() => kubeProxyConfig({ ...spec, kubeconfig: 'admin.kubeconfig' }), { message: /kubeconfig "admin.kubeconfig"/ });
  t.throws(() => kubeProxyConfig({ ...spec, minSyncPeriodMs: -1 }), { message: /minSyncPeriodMs -1/ });
});

test('CPU seconds come from fields 14-17 of /proc/PID/stat, a command name with spaces and parentheses included', (t) => {
  const stat = '4242 (kube (proxy) x) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 75 12 8 20 0 12 0 100 0 0';
  t.deepEqual(parseProcCpu(stat), { self: 3.25, children: 0.2 });
  const own = parseProcCpu(readFileSync('/proc/self/stat', 'utf8'));
  t.true(own.self >= 0 && own.children >= 0);
  t.throws(() => parseProcCpu('garbage'), { message: /not the fields of proc\(5\)/ });
});

test("the proxies' PATH has no node_modules/.bin (whose nft is not nftables')", (t) => {
  t.is(systemPath('/w/node_modules/.bin:/usr/lib/node_modules/npm/node_modules/@npmcli/run-script/lib/node-gyp-bin:/usr/sbin:/w/a/node_modules/.bin/:/bin'), '/usr/lib/node_modules/npm/node_modules/@npmcli/run-script/lib/node-gyp-bin:/usr/sbin:/bin');
});

test('a full run has kube-proxy and drover in each mode, each at its defaults and with a minimum sync period of 0', (t) => {
  t.deepEqual(ALL_PROXIES.map(proxyLabel), [
    'kube-proxy-iptables', 'kube-proxy-iptables-min0', 'drover-iptables', 'drover-iptables-min0',
    'kube-proxy-nftables', 'kube-proxy-nftables-min0', 'drover-nftables', 'drover-nftables-min0',
  ]);
});

test('a label names its proxy, -minN a minimum sync period of N ms; the inverse of proxyLabel', (t) => {
  for (const p of ALL_PROXIES) t.deepEqual(parseProxyLabel(proxyLabel(p)), p);
  t.deepEqual(parseProxyLabel('drover-nftables-min50'), { impl: 'drover', mode: 'nftables', minSyncPeriodMs: 50 });
  t.deepEqual(parseProxyLabel('kube-proxy-iptables-min250'), { impl: 'kube-proxy', mode: 'iptables', minSyncPeriodMs: 250 });
  for (const bad of ['drover-ipvs', 'drover-nftables-min', 'drover-nftables-min05', 'drover-nftables-min-1', 'kube-proxy', 'drover-nftables-min50x']) t.is(parseProxyLabel(bad), undefined, bad);
});

function result(proxy: ProxySpec, latency: number, rssKb: number): ProxyResult {
  return {
    proxy,
    label: proxyLabel(proxy),
    services: 1000,
    fullSyncMs: latency * 10,
    rssSteadyKb: rssKb,
    rssPeakKb: rssKb * 2,
    cpuSelfS: 4,
    cpuChildrenS: 1,
    changes: { 'endpoint swapped': [latency, latency * 3], 'service added': [latency], 'service removed': [latency] },
    churn: { writes: 10, latenciesMs: [latency, latency, latency * 5], superseded: 1, failed: [], writeSpanMs: 1000 },
    load: [2, 3],
    errors: [],
    wallS: 60,
    apiWriteMs: [1, 2, 3, 9],
  };
}

test('the tables give each proxy its p50s and drover over kube-proxy in the same mode; a superseded churn change ranks above every timed one', (t) => {
  const md = peerTables([result({ impl: 'kube-proxy', mode: 'nftables' }, 100, 50 * 1024), result({ impl: 'drover', mode: 'nftables' }, 5, 100 * 1024)]);
  t.regex(md, /^\| kube-proxy-nftables \| 1000 \| 200 \| 100 \| 100 \| 100 \| superseded \| superseded \| 1 \/ 0 of 10 \| 50 \/ 100 \| 4\.0 \+ 1\.0 \| 2\.0–3\.0 \| 2\.00 \/ 9\.00 \|$/m);
  t.regex(md, /^\| drover-nftables \/ kube-proxy-nftables \| 0\.050 \| 0\.050 \| 0\.050 \| 2\.00 \| 2\.00 \| 1\.00 \|$/m);
  t.notRegex(md, /iptables/);
});

test("drover's churn p50 over kube-proxy's is an upper bound when kube-proxy's median change was superseded", (t) => {
  const kube = result({ impl: 'kube-proxy', mode: 'nftables' }, 100, 1024);
  const slow = { ...kube, churn: { ...kube.churn!, latenciesMs: [900], superseded: 3 } };
  const md = peerTables([slow, result({ impl: 'drover', mode: 'nftables' }, 50, 1024)]);
  t.regex(md, /^\| kube-proxy-nftables \| [^\n]* \| superseded \| superseded \| superseded \| 3 \/ 0 of 10 \|/m);
  t.regex(md, /^\| drover-nftables \/ kube-proxy-nftables \| [0-9.]+ \| [0-9.]+ \| < 0\.03 \|/m);
});
