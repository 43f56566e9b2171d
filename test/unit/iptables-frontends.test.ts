/**
 * The external frontends in iptables mode: NodePort, external IPs,
 * LoadBalancer IPs with source ranges, externalTrafficPolicy Local and the
 * health check node port, rendered exactly as kube-proxy's
 * syncProxyRules writes them (pkg/proxy/iptables/proxier.go), and kept
 * right by partial syncs.
 */
import test from 'ava';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { FakeIptables } from '../../src/kernel/iptables/fake.ts';
import { renderServicePort } from '../../src/modes/iptables/render.ts';
import type { ServiceRules } from '../../src/modes/shared/kube-chains/service-rules.ts';
import { ipv4Frontends, type Frontends, type NodeInfo, type ServicePort } from '../../src/model/types.ts';
import { silentLogger } from '../../src/util/log.ts';
import { loadStaticRules } from '../../src/modes/shared/kube-chains/static.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

const render = { clusterCIDR: '10.0.0.0/8', masqueradeAll: false };
const NODE: NodeInfo = { name: 'n1', addresses: [{ type: 'InternalIP', address: '10.1.0.5' }] };
const FRONTENDS: Frontends = {
  ...ipv4Frontends('172.30.0.41', 3001),
  externalIPs: [
    { family: 'IPv4', ip: '192.168.99.11' },
    { family: 'IPv6', ip: '2001:db8::11' },
  ],
  loadBalancerIngress: [
    { family: 'IPv4', ip: '1.2.3.4', ipMode: 'VIP' },
    { family: 'IPv4', ip: '5.6.7.8', ipMode: 'Proxy' },
  ],
  loadBalancerSourceRanges: ['203.0.113.0/25', '10.1.2.3/16', '2001:db8::/32'],
};
const lb = (extra: Partial<ServicePort> = {}, frontends: Partial<Frontends> = {}) =>
  sp('ns1/svc1:p80', '172.30.0.41', 80, [ep('10.180.0.1:80', { nodeName: 'n1' }), ep('10.180.0.2:80', { nodeName: 'n2' })], {
    type: 'LoadBalancer',
    frontends: { ...FRONTENDS, ...frontends },
    ...extra,
  });

/** A rendering as `table -A CHAIN rule` lines: shared rules, then chains. */
function lines(r: ServiceRules): string[] {
  return [...r.shared.map((s) => `${s.table} -A ${s.chain} ${s.rule}`), ...[...r.chains].flatMap(([c, rules]) => rules.map((x) => `nat -A ${c} ${x}`))];
}

const SEPS = [
  'nat -A KUBE-SEP-SXIVWICOYRO3J4NJ -s 10.180.0.1/32 -m comment --comment "ns1/svc1:p80" -j KUBE-MARK-MASQ',
  'nat -A KUBE-SEP-SXIVWICOYRO3J4NJ -p tcp -m comment --comment "ns1/svc1:p80" -m tcp -j DNAT --to-destination 10.180.0.1:80',
  'nat -A KUBE-SEP-LXVODXWDISEETFEF -s 10.180.0.2/32 -m comment --comment "ns1/svc1:p80" -j KUBE-MARK-MASQ',
  'nat -A KUBE-SEP-LXVODXWDISEETFEF -p tcp -m comment --comment "ns1/svc1:p80" -m tcp -j DNAT --to-destination 10.180.0.2:80',
];
const SVC = [
  'nat -A KUBE-SVC-XPGD46QRK7WJZT7O ! -s 10.0.0.0/8 -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ',
  'nat -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-SXIVWICOYRO3J4NJ',
  'nat -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.2:80" -j KUBE-SEP-LXVODXWDISEETFEF',
];
const ENTRIES = [
  'nat -A KUBE-SERVICES -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O',
  'nat -A KUBE-SERVICES -d 192.168.99.11/32 -p tcp -m comment --comment "ns1/svc1:p80 external IP" -m tcp --dport 80 -j KUBE-EXT-XPGD46QRK7WJZT7O',
  'nat -A KUBE-SERVICES -d 1.2.3.4/32 -p tcp -m comment --comment "ns1/svc1:p80 loadbalancer IP" -m tcp --dport 80 -j KUBE-FW-XPGD46QRK7WJZT7O',
  'nat -A KUBE-NODEPORTS -p tcp -m comment --comment "ns1/svc1:p80" -m tcp --dport 3001 -j KUBE-EXT-XPGD46QRK7WJZT7O',
  'filter -A KUBE-PROXY-FIREWALL -d 1.2.3.4/32 -p tcp -m comment --comment "ns1/svc1:p80 traffic not accepted by KUBE-FW-XPGD46QRK7WJZT7O" -m tcp --dport 80 -j DROP',
];
const FW = [
  'nat -A KUBE-FW-XPGD46QRK7WJZT7O -s 203.0.113.0/25 -m comment --comment "ns1/svc1:p80 loadbalancer IP" -j KUBE-EXT-XPGD46QRK7WJZT7O',
  'nat -A KUBE-FW-XPGD46QRK7WJZT7O -s 10.1.0.0/16 -m comment --comment "ns1/svc1:p80 loadbalancer IP" -j KUBE-EXT-XPGD46QRK7WJZT7O',
  'nat -A KUBE-FW-XPGD46QRK7WJZT7O -s 1.2.3.4/32 -m comment --comment "ns1/svc1:p80 loadbalancer IP" -j KUBE-EXT-XPGD46QRK7WJZT7O',
  'nat -A KUBE-FW-XPGD46QRK7WJZT7O -m comment --comment "other traffic to ns1/svc1:p80 will be dropped by KUBE-PROXY-FIREWALL"',
];

test('externalTrafficPolicy Cluster: NodePort, external IP and source-ranged LoadBalancer IP go through KUBE-EXT, masqueraded; IPv6 and Proxy-mode frontends are left out', (t) => {
  t.deepEqual(lines(renderServicePort(lb(), render, NODE)), [
    ...ENTRIES,
    'nat -A KUBE-EXT-XPGD46QRK7WJZT7O -m comment --comment "masquerade traffic for ns1/svc1:p80 external destinations" -j KUBE-MARK-MASQ',
    'nat -A KUBE-EXT-XPGD46QRK7WJZT7O -j KUBE-SVC-XPGD46QRK7WJZT7O',
    ...FW,
    ...SVC,
    ...SEPS,
  ]);
});

test('externalTrafficPolicy Local: pods and the node short-circuit to KUBE-SVC, the rest goes to KUBE-SVL with the local endpoint; the health check port is accepted', (t) => {
  const r = renderServicePort(lb({ externalTrafficPolicy: 'Local' }, { healthCheckNodePort: 30999 }), render, NODE);
  t.deepEqual(lines(r), [
    ...ENTRIES,
    'filter -A KUBE-NODEPORTS -p tcp -m comment --comment "ns1/svc1:p80 health check node port" -m tcp --dport 30999 -j ACCEPT',
    'nat -A KUBE-EXT-XPGD46QRK7WJZT7O -s 10.0.0.0/8 -m comment --comment "pod traffic for ns1/svc1:p80 external destinations" -j KUBE-SVC-XPGD46QRK7WJZT7O',
    'nat -A KUBE-EXT-XPGD46QRK7WJZT7O -m comment --comment "masquerade LOCAL traffic for ns1/svc1:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ',
    'nat -A KUBE-EXT-XPGD46QRK7WJZT7O -m comment --comment "route LOCAL traffic for ns1/svc1:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-SVC-XPGD46QRK7WJZT7O',
    'nat -A KUBE-EXT-XPGD46QRK7WJZT7O -j KUBE-SVL-XPGD46QRK7WJZT7O',
    ...FW,
    ...SVC,
    'nat -A KUBE-SVL-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ',
    ...SEPS,
  ]);
});

test('externalTrafficPolicy Local with no local endpoint: external traffic is dropped in KUBE-EXTERNAL-SERVICES, the short-circuits stay, the ClusterIP serves', (t) => {
  const r = renderServicePort(lb({ externalTrafficPolicy: 'Local' }, { loadBalancerSourceRanges: [] }), render, { name: 'n3', addresses: [] });
  t.deepEqual(lines(r), [
    ENTRIES[0],
    ENTRIES[1],
    'nat -A KUBE-SERVICES -d 1.2.3.4/32 -p tcp -m comment --comment "ns1/svc1:p80 loadbalancer IP" -m tcp --dport 80 -j KUBE-EXT-XPGD46QRK7WJZT7O',
    ENTRIES[3],
    'filter -A KUBE-EXTERNAL-SERVICES -d 192.168.99.11/32 -p tcp -m comment --comment "ns1/svc1:p80 has no local endpoints" -m tcp --dport 80 -j DROP',
    'filter -A KUBE-EXTERNAL-SERVICES -d 1.2.3.4/32 -p tcp -m comment --comment "ns1/svc1:p80 has no local endpoints" -m tcp --dport 80 -j DROP',
    'filter -A KUBE-EXTERNAL-SERVICES -p tcp -m comment --comment "ns1/svc1:p80 has no local endpoints" -m addrtype --dst-type LOCAL -m tcp --dport 3001 -j DROP',
    'nat -A KUBE-EXT-XPGD46QRK7WJZT7O -s 10.0.0.0/8 -m comment --comment "pod traffic for ns1/svc1:p80 external destinations" -j KUBE-SVC-XPGD46QRK7WJZT7O',
    'nat -A KUBE-EXT-XPGD46QRK7WJZT7O -m comment --comment "masquerade LOCAL traffic for ns1/svc1:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ',
    'nat -A KUBE-EXT-XPGD46QRK7WJZT7O -m comment --comment "route LOCAL traffic for ns1/svc1:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-SVC-XPGD46QRK7WJZT7O',
    ...SVC,
    ...SEPS,
  ]);
});

test('no endpoints: every frontend is rejected, in filter KUBE-SERVICES and KUBE-EXTERNAL-SERVICES, and no nat chain is written', (t) => {
  const r = renderServicePort({ ...lb(), endpoints: [] }, render, NODE);
  const reject = '-j REJECT --reject-with icmp-port-unreachable';
  t.deepEqual(lines(r), [
    `filter -A KUBE-SERVICES -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 has no endpoints" -m tcp --dport 80 ${reject}`,
    `filter -A KUBE-EXTERNAL-SERVICES -d 192.168.99.11/32 -p tcp -m comment --comment "ns1/svc1:p80 has no endpoints" -m tcp --dport 80 ${reject}`,
    `filter -A KUBE-EXTERNAL-SERVICES -d 1.2.3.4/32 -p tcp -m comment --comment "ns1/svc1:p80 has no endpoints" -m tcp --dport 80 ${reject}`,
    `filter -A KUBE-EXTERNAL-SERVICES -p tcp -m comment --comment "ns1/svc1:p80 has no endpoints" -m addrtype --dst-type LOCAL -m tcp --dport 3001 ${reject}`,
  ]);
});

test('only IPv6 source ranges, or 0.0.0.0/0 among them: the IPv4 LoadBalancer IP takes every client, with no KUBE-FW, as kube-proxy', (t) => {
  for (const ranges of [['2001:db8::/32'], ['203.0.113.0/25', '0.0.0.0/0']]) {
    const r = renderServicePort(lb({}, { loadBalancerSourceRanges: ranges }), render, NODE);
    t.false(r.chains.has('KUBE-FW-XPGD46QRK7WJZT7O'), ranges.join(','));
    t.true(r.shared.some((x) => x.rule.includes('-d 1.2.3.4/32') && x.rule.endsWith('-j KUBE-EXT-XPGD46QRK7WJZT7O')), ranges.join(','));
    t.false(r.shared.some((x) => x.chain === 'KUBE-PROXY-FIREWALL'), ranges.join(','));
  }
});

test('the health check node port is accepted only for a LoadBalancer Service with externalTrafficPolicy Local', (t) => {
  const accepts = (s: ServicePort) => renderServicePort(s, render, NODE).shared.some((x) => x.chain === 'KUBE-NODEPORTS' && x.table === 'filter');
  t.true(accepts(lb({ externalTrafficPolicy: 'Local' }, { healthCheckNodePort: 30999 })));
  t.false(accepts(lb({ externalTrafficPolicy: 'Cluster' }, { healthCheckNodePort: 30999 })));
  t.false(accepts(lb({ type: 'NodePort', externalTrafficPolicy: 'Local' }, { healthCheckNodePort: 30999 })));
});

test('IPv6 external frontends alone make no KUBE-EXT: nothing external reaches the IPv4 rules', (t) => {
  const r = renderServicePort(
    sp('ns1/svc1:p80', '172.30.0.41', 80, [ep('10.180.0.1:80', { nodeName: 'n1' }), ep('10.180.0.2:80', { nodeName: 'n2' })], {
      internalTrafficPolicy: 'Local',
      frontends: { ...ipv4Frontends('172.30.0.41'), externalIPs: [{ family: 'IPv6', ip: '2001:db8::1' }] },
    }),
    render,
    NODE,
  );
  t.deepEqual([...r.chains.keys()], ['KUBE-SVL-XPGD46QRK7WJZT7O', 'KUBE-SEP-SXIVWICOYRO3J4NJ']);
});

test('a source range holding the node address also lets the LoadBalancer IPs in as sources (a VIP looping back from the node)', (t) => {
  const without = renderServicePort(lb({}, { loadBalancerSourceRanges: ['203.0.113.0/25'] }), render, NODE);
  t.false(without.chains.get('KUBE-FW-XPGD46QRK7WJZT7O')!.some((r) => r.startsWith('-s 1.2.3.4/32')));
  const noNode = renderServicePort(lb(), render, undefined);
  t.false(noNode.chains.get('KUBE-FW-XPGD46QRK7WJZT7O')!.some((r) => r.startsWith('-s 1.2.3.4/32')), 'without a node address, no loop-back rule');
});

test('switched between policies and frontends by partial syncs, each step leaves the kernel as a full sync of it would; cleanup leaves nothing', async (t) => {
  const fake = new FakeIptables();
  const backend = new IptablesBackend({ exec: fake, render, logger: silentLogger() });
  const states = [
    sp('ns1/svc1:p80', '172.30.0.41', 80, [ep('10.180.0.1:80', { nodeName: 'n1' })]),
    lb(),
    lb({ externalTrafficPolicy: 'Local' }, { healthCheckNodePort: 30999 }),
    lb({ externalTrafficPolicy: 'Local', endpoints: [ep('10.180.0.2:80', { nodeName: 'n2' })] }),
    { ...lb(), endpoints: [] },
    lb({}, { loadBalancerSourceRanges: [], externalIPs: [] }),
    lb({}, { loadBalancerSourceRanges: ['2001:db8::/32'] }),
    sp('ns1/svc1:p80', '172.30.0.41', 80, [ep('10.180.0.1:80', { nodeName: 'n1' })]),
  ];
  const tables = (f: FakeIptables) => ({ nat: f.dump('nat').split('\n').sort(), filter: f.dump('filter').split('\n').sort() });
  for (const [i, state] of states.entries()) {
    const s = { ...snap(state), node: NODE };
    await backend.sync(s, i === 0 ? { full: true, changed: new Set() } : { full: false, changed: new Set(['ns1/svc1:p80']) });
    const fresh = new FakeIptables();
    await new IptablesBackend({ exec: fresh, render, logger: silentLogger() }).sync(s, { full: true, changed: new Set() });
    t.deepEqual(tables(fake), tables(fresh), `step ${i}`);
    t.like(await backend.sync(s, { full: true, changed: new Set() }), { written: { chain: 0, rule: 0 } }, `step ${i}, then a full sync`);
  }
  await backend.cleanup();
  t.notRegex(`${fake.dump('nat')}${fake.dump('filter')}`, /KUBE-/);
});

test('incomplete source: a known service port that loses its NodePort and endpoints loses its KUBE-EXT, KUBE-SVC and KUBE-SEP too', async (t) => {
  const fake = new FakeIptables();
  const backend = new IptablesBackend({ exec: fake, render, logger: silentLogger() });
  const nodePort = sp('ns1/svc1:p80', '172.30.0.41', 80, [ep('10.180.0.1:80')], { type: 'NodePort', frontends: ipv4Frontends('172.30.0.41', 30080) });
  await backend.sync(snap(nodePort), { full: true, changed: new Set() });
  t.regex(fake.dump('nat'), /:KUBE-EXT-XPGD46QRK7WJZT7O/);
  await backend.sync(snap(sp('ns1/svc1:p80', '172.30.0.41', 80, [])), { full: true, changed: new Set(), incomplete: true });
  t.notRegex(fake.dump('nat'), /KUBE-(EXT|SVC|SEP)-/);
  t.regex(fake.dump('filter'), /ns1\/svc1:p80 has no endpoints/);
  // Only the NodePort goes: the stale KUBE-EXT is still deleted.
  await backend.sync(snap(nodePort), { full: true, changed: new Set() });
  await backend.sync(snap({ ...nodePort, type: 'ClusterIP', frontends: ipv4Frontends('172.30.0.41') }), { full: true, changed: new Set(), incomplete: true });
  t.notRegex(fake.dump('nat'), /KUBE-EXT-/);
});

test("a node whose hooks lack the nodeports jump gets all of a chain's hooks back in file order, the nodeports one after KUBE-SERVICES", async (t) => {
  const fake = new FakeIptables();
  // The hooks an older drover (or kube-proxy) left: the jump to KUBE-SERVICES alone.
  fake.setChain('nat', 'KUBE-SERVICES', []);
  fake.chain('nat', 'PREROUTING')!.push('-m comment --comment "kubernetes service portals" -j KUBE-SERVICES', '-j DOCKER-ISH');
  const backend = new IptablesBackend({ exec: fake, render, logger: silentLogger() });
  await backend.sync(snap(), { full: true, changed: new Set() });
  t.deepEqual(fake.chain('nat', 'PREROUTING'), [
    '-m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '! -d 127.0.0.0/8 -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS',
    '-j DOCKER-ISH',
  ]);
  t.like(await backend.sync(snap(), { full: true, changed: new Set() }), { written: { chain: 0, rule: 0 }, deleted: { chain: 0, rule: 0 } });
});

test('--nodeport-addresses matching no address of the node removes every nodeports hook: no NodePort answers', async (t) => {
  const fake = new FakeIptables();
  await new IptablesBackend({ exec: fake, render, logger: silentLogger() }).sync(snap(), { full: true, changed: new Set() });
  t.true(fake.chain('nat', 'PREROUTING')!.some((r) => r.endsWith('-j KUBE-NODEPORTS')));
  const none = new IptablesBackend({ exec: fake, render, logger: silentLogger(), statics: loadStaticRules([]) });
  await none.sync(snap(), { full: true, changed: new Set() });
  t.false([...fake.chain('nat', 'PREROUTING')!, ...fake.chain('nat', 'OUTPUT')!].some((r) => r.endsWith('-j KUBE-NODEPORTS')));
  t.like(await none.sync(snap(), { full: true, changed: new Set() }), { written: { chain: 0, rule: 0 }, deleted: { chain: 0, rule: 0 } });
  await none.cleanup();
  t.notRegex(`${fake.dump('nat')}${fake.dump('filter')}`, /KUBE-/);
});
