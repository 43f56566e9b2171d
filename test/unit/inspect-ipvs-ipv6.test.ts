/**
 * `drover trace --mode ipvs` and `drover diff --mode ipvs` for the IPv6
 * family on in-memory fakes: a dual-stack IPVS backend syncs a source with
 * IPv6 Services (ClusterIP, NodePort, LoadBalancer IPs with and without
 * source ranges, externalTrafficPolicy and internalTrafficPolicy Local)
 * into FakeIpvs, FakeIpset, FakeLinks and the IPv6 FakeIptables; the trace
 * walks the ip6tables rules read back, the KUBE-6- sets and the IPv6
 * virtual servers; the diff compares the ip6tables rules with
 * rules/ipvs/static6.rules.
 */
import test from 'ava';
import { formatTrace } from '../../src/inspect/trace-format.ts';
import { trace, type Packet } from '../../src/inspect/trace.ts';
import { TABLES } from '../../src/kernel/iptables/parse.ts';
import { ip6tablesStatusLines, ownedRuleCounts } from '../../src/modes/shared/kube-chains/ruleset.ts';
import { desiredIpvsState } from '../../src/modes/ipvs/assemble.ts';
import { formatIpvsDrift, ipvsDrift, ipvsDriftCount } from '../../src/modes/ipvs/diff.ts';
import { DualStackIpvsBackend } from '../../src/modes/ipvs/dual-stack.ts';
import { readIpvsLive, type IpvsLive } from '../../src/modes/ipvs/live.ts';
import { iptablesModeStatics, ipvsStaticRules } from '../../src/modes/ipvs/rules.ts';
import { ipvsTraceContext, ipvsTraceFormat } from '../../src/modes/ipvs/trace.ts';
import { familyView } from '../../src/model/family.ts';
import type { ServicePort, Snapshot } from '../../src/model/types.ts';
import { silentLogger } from '../../src/util/log.ts';
import { World } from '../support/ipvs-world.ts';
import { dualSnap, ep, sp } from '../support/snapshots.ts';

const NODE6 = { nodePortIPs: ['fd00:1::10'], hostAddresses: ['fd00:1::10'] };
const NODE4 = { nodePortIPs: ['192.168.1.10'], hostAddresses: ['192.168.1.10'] };
const RENDER6 = { clusterCIDR: 'fd00:10:244::/56', masqueradeAll: false, family: 'IPv6' as const };
const here = { nodeName: 'here' };
const there = { nodeName: 'there' };

/** IPv6 frontends: the ClusterIP and what `extra` adds. */
const frontends6 = (clusterIP: string, extra: Partial<ServicePort['frontends']> = {}): ServicePort['frontends'] => ({
  clusterIPs: [{ family: 'IPv6', ip: clusterIP }],
  externalIPs: [],
  loadBalancerIngress: [],
  loadBalancerSourceRanges: [],
  ...extra,
});

const web4 = sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080')]);
const web6 = sp('default/web:http', 'fd00:10:96::a', 80, [ep('[fd00:10:244:1::2]:8080', here), ep('[fd00:10:244:2::3]:8080', there)], {
  type: 'NodePort',
  frontends: frontends6('fd00:10:96::a', { nodePort: 30080 }),
});
const lb6 = sp('default/lb:http', 'fd00:10:96::50', 80, [ep('[fd00:10:244:1::4]:8080', here)], {
  type: 'LoadBalancer',
  frontends: frontends6('fd00:10:96::50', { nodePort: 30081, loadBalancerIngress: [{ family: 'IPv6', ip: '2001:db8::10', ipMode: 'VIP' }], loadBalancerSourceRanges: ['2001:db8:1::/48'] }),
});
const open6 = sp('default/open:http', 'fd00:10:96::55', 80, [ep('[fd00:10:244:1::5]:8080', here)], {
  type: 'LoadBalancer',
  frontends: frontends6('fd00:10:96::55', { nodePort: 30082, loadBalancerIngress: [{ family: 'IPv6', ip: '2001:db8::15', ipMode: 'VIP' }], externalIPs: [{ family: 'IPv6', ip: '2001:db8::7' }] }),
});
const etpLocal6 = sp('default/etp:http', 'fd00:10:96::60', 80, [ep('[fd00:10:244:2::6]:8080', there)], {
  type: 'LoadBalancer',
  externalTrafficPolicy: 'Local',
  frontends: frontends6('fd00:10:96::60', { nodePort: 30083, loadBalancerIngress: [{ family: 'IPv6', ip: '2001:db8::20', ipMode: 'VIP' }], healthCheckNodePort: 32000 }),
});
const itpLocal6 = sp('default/itp:http', 'fd00:10:96::70', 80, [ep('[fd00:10:244:1::7]:8080', here), ep('[fd00:10:244:2::7]:8080', there)], {
  internalTrafficPolicy: 'Local',
  frontends: frontends6('fd00:10:96::70'),
});
const itpNone6 = sp('default/itp-none:http', 'fd00:10:96::71', 80, [ep('[fd00:10:244:2::8]:8080', there)], {
  internalTrafficPolicy: 'Local',
  frontends: frontends6('fd00:10:96::71'),
});

const source = (): Snapshot => ({
  ...dualSnap([web4], [web6, lb6, open6, etpLocal6, itpLocal6, itpNone6]),
  node: { name: 'here', addresses: [{ type: 'InternalIP', address: 'fd00:1::10' }] },
});
const desired6 = () => desiredIpvsState(familyView(source(), 'IPv6'), { scheduler: 'rr', nodeAddresses: NODE6 });

/** The dual-stack backend on a World's fakes; the IPv6 family writes the World's ip6tables. */
function dualBackend(w: World): DualStackIpvsBackend {
  return new DualStackIpvsBackend({
    shared: { ipvs: w.ipvs, ipset: w.ipset, links: w.links, sysctls: w.sysctls, scheduler: 'rr', gracefulPeriodMs: 60_000, gracefulCheckIntervalMs: 0, now: () => w.clock },
    IPv4: { iptables: w.iptables, render: { clusterCIDR: '10.244.0.0/16', masqueradeAll: false }, serviceCIDR: '10.96.0.0/12', nodeAddresses: NODE4 },
    IPv6: { iptables: w.iptables6, render: RENDER6, nodeAddresses: NODE6 },
    logger: silentLogger(),
  });
}

/** A node after a full dual-stack sync of `source()`. */
async function synced(): Promise<World> {
  const w = new World();
  await dualBackend(w).sync(source(), { full: true, changed: new Set() });
  return w;
}

/** The IPv6 trace context, as the driver builds it: ip6tables' tables, every set, the node's IPv6 addresses (kube-ipvs0's /128s among them), IPVS. */
const ctx6 = (live: IpvsLive) => ipvsTraceContext(live, new Set([...NODE6.hostAddresses, ...(live.bound6 ?? []).map((a) => a.address)]), 'IPv6');
const pkt = (src: string, dst: string, dport: number): Packet => ({ src, dst, dport, proto: 'tcp' });
const summary = (r: ReturnType<typeof trace>) => r.outcomes.map((o) => ({ p: Number(o.probability.toFixed(6)), verdict: o.verdict, masq: o.masqueraded }));

const RULES6 = { statics: ipvsStaticRules(RENDER6, undefined, 'IPv6'), iptablesStatics: iptablesModeStatics('IPv6') };
const DRIFT6 = { family: 'IPv6' as const, hostAddresses: NODE6.hostAddresses, rules: RULES6 };

test('trace --mode ipvs of an IPv6 ClusterIP from outside: the ip6tables rules with the KUBE-6- sets, IPVS splits round robin, POSTROUTING masquerades', async (t) => {
  const live = await readIpvsLive(await synced(), { tables: true });
  t.is(
    formatTrace(trace(ctx6(live), pkt('2001:db8:9::2', 'fd00:10:96::a', 80)), ipvsTraceFormat),
    `trace 2001:db8:9::2 -> [fd00:10:96::a]:80/tcp, a new connection from outside the node: nat PREROUTING

nat PREROUTING
  line 12   -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
nat KUBE-SERVICES
  line 28   -A KUBE-SERVICES ! -s fd00:10:244::/56 -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-6-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ
nat KUBE-MARK-MASQ
  line 17   -A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
nat KUBE-SERVICES
  line 34   -A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
filter INPUT
  line 13   -A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
filter KUBE-IPVS-FILTER
  line 23   -A KUBE-IPVS-FILTER -m set --match-set KUBE-6-CLUSTER-IP dst,dst -j RETURN
filter INPUT
  line 14   -A INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
  line 15   -A INPUT -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT

then one of 2 branches:
  (50.00%) DNAT to [fd00:10:244:1::2]:8080, masqueraded
    ipvs TCP [fd00:10:96::a]:80 rr
      -> [fd00:10:244:1::2]:8080 Masq weight 1   [taken with probability 0.5000]
  (50.00%) DNAT to [fd00:10:244:2::3]:8080, masqueraded
    ipvs TCP [fd00:10:96::a]:80 rr
      -> [fd00:10:244:2::3]:8080 Masq weight 1   [taken with probability 0.5000]

then, in every branch:
filter OUTPUT
  line 18   -A OUTPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER
nat POSTROUTING
  line 14   -A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
nat KUBE-POSTROUTING
  line 26   -A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
  line 27   -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully

real servers (probability for a new connection):
  [fd00:10:244:1::2]:8080  50.00%  masqueraded
  [fd00:10:244:2::3]:8080  50.00%  masqueraded
verdict: IPVS to one of 2 real servers, masqueraded
`,
  );
  // From the node itself: nat OUTPUT, then IPVS at LOCAL_OUT.
  const fromNode = trace(ctx6(live), pkt('fd00:1::10', 'fd00:10:96::a', 80));
  t.is(fromNode.origin, 'node');
  t.deepEqual(fromNode.outcomes[0]!.steps.map((s) => `${s.table} ${s.chain} ${s.line || s.rule}`), [
    'nat OUTPUT 13',
    'nat KUBE-SERVICES 28',
    'nat KUBE-MARK-MASQ 17',
    'nat KUBE-SERVICES 34',
    'ipvs TCP [fd00:10:96::a]:80 rr -> [fd00:10:244:1::2]:8080 Masq weight 1',
    'filter OUTPUT 18',
    'nat POSTROUTING 14',
    'nat KUBE-POSTROUTING 26',
    'nat KUBE-POSTROUTING 27',
  ]);
  // The IPv4 ClusterIP has no IPv6 virtual server and no entry in the IPv6 sets.
  t.deepEqual(summary(trace(ctx6(live), pkt('2001:db8:9::2', 'fd00:10:96::99', 80))), [{ p: 1, verdict: { kind: 'untouched' }, masq: false }]);
});

test("trace --mode ipvs of a NodePort on the node's IPv6 address: KUBE-6-NODE-PORT-TCP marks it, IPVS takes it at LOCAL_IN", async (t) => {
  const live = await readIpvsLive(await synced(), { tables: true });
  const r = trace(ctx6(live), pkt('2001:db8:9::2', 'fd00:1::10', 30080));
  const text = formatTrace(r, ipvsTraceFormat);
  t.true(
    text.startsWith(`trace 2001:db8:9::2 -> [fd00:1::10]:30080/tcp, a new connection from outside the node: nat PREROUTING

nat PREROUTING
  line 12   -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
nat KUBE-SERVICES
  line 34   -A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
nat KUBE-NODE-PORT
  line 19   -A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port for masquerade purpose" -m set --match-set KUBE-6-NODE-PORT-TCP dst -j KUBE-MARK-MASQ
nat KUBE-MARK-MASQ
  line 17   -A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
filter INPUT
  line 13   -A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
  line 14   -A INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
  line 15   -A INPUT -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT

then one of 2 branches:
  (50.00%) DNAT to [fd00:10:244:1::2]:8080, masqueraded
    ipvs TCP [fd00:1::10]:30080 rr
`),
    text,
  );
  t.deepEqual(summary(r), [
    { p: 0.5, verdict: { kind: 'dnat', ip: 'fd00:10:244:1::2', port: 8080 }, masq: true },
    { p: 0.5, verdict: { kind: 'dnat', ip: 'fd00:10:244:2::3', port: 8080 }, masq: true },
  ]);
  t.true(text.endsWith('verdict: IPVS to one of 2 real servers, masqueraded\n'), text);
});

test('trace --mode ipvs of an IPv6 LoadBalancer IP with loadBalancerSourceRanges: a client in the range reaches IPVS, one outside is dropped; an external IP without ranges reaches IPVS', async (t) => {
  const live = await readIpvsLive(await synced(), { tables: true });
  t.is(
    formatTrace(trace(ctx6(live), pkt('2001:db8:1::2', '2001:db8::10', 80)), ipvsTraceFormat),
    `trace 2001:db8:1::2 -> [2001:db8::10]:80/tcp, a new connection from outside the node: nat PREROUTING

nat PREROUTING
  line 12   -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
nat KUBE-SERVICES
  line 29   -A KUBE-SERVICES -m comment --comment "Kubernetes service lb portal" -m set --match-set KUBE-6-LOAD-BALANCER dst,dst -j KUBE-LOAD-BALANCER
nat KUBE-LOAD-BALANCER
  line 16   -A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ
nat KUBE-MARK-MASQ
  line 17   -A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
nat KUBE-SERVICES
  line 34   -A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
filter INPUT
  line 13   -A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
filter KUBE-IPVS-FILTER
  line 22   -A KUBE-IPVS-FILTER -m set --match-set KUBE-6-LOAD-BALANCER dst,dst -j RETURN
filter INPUT
  line 14   -A INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
filter KUBE-PROXY-FIREWALL
  line 30   -A KUBE-PROXY-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port for load balancer with sourceRange" -m set --match-set KUBE-6-LOAD-BALANCER-FW dst,dst -j KUBE-SOURCE-RANGES-FIREWALL
filter KUBE-SOURCE-RANGES-FIREWALL
  line 33   -A KUBE-SOURCE-RANGES-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port + source cidr for packet filter purpose" -m set --match-set KUBE-6-LOAD-BALANCER-SOURCE-CID dst,dst,src -j RETURN
filter INPUT
  line 15   -A INPUT -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT
ipvs TCP [2001:db8::10]:80 rr
  -> [fd00:10:244:1::4]:8080 Masq weight 1
filter OUTPUT
  line 18   -A OUTPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER
nat POSTROUTING
  line 14   -A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
nat KUBE-POSTROUTING
  line 26   -A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
  line 27   -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully

real servers (probability for a new connection):
  [fd00:10:244:1::4]:8080 100.00%  masqueraded
verdict: IPVS to 1 real server, masqueraded
`,
  );
  const outside = formatTrace(trace(ctx6(live), pkt('2001:db8:9::2', '2001:db8::10', 80)), ipvsTraceFormat);
  t.true(
    outside.endsWith(`filter KUBE-PROXY-FIREWALL
  line 30   -A KUBE-PROXY-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port for load balancer with sourceRange" -m set --match-set KUBE-6-LOAD-BALANCER-FW dst,dst -j KUBE-SOURCE-RANGES-FIREWALL
filter KUBE-SOURCE-RANGES-FIREWALL
  line 35   -A KUBE-SOURCE-RANGES-FIREWALL -j DROP

verdict: DROPped (filter KUBE-SOURCE-RANGES-FIREWALL line 35)
`),
    outside,
  );
  // No ranges: every client reaches IPVS, on the LoadBalancer IP and on the external IP.
  t.deepEqual(summary(trace(ctx6(live), pkt('2001:db8:9::2', '2001:db8::15', 80))), [{ p: 1, verdict: { kind: 'dnat', ip: 'fd00:10:244:1::5', port: 8080 }, masq: true }]);
  t.deepEqual(summary(trace(ctx6(live), pkt('2001:db8:9::2', '2001:db8::7', 80))), [{ p: 1, verdict: { kind: 'dnat', ip: 'fd00:10:244:1::5', port: 8080 }, masq: true }]);
});

test('trace --mode ipvs, IPv6 externalTrafficPolicy Local with no endpoint on this node: dropped from outside; a pod of this node reaches the cluster-wide endpoint', async (t) => {
  const live = await readIpvsLive(await synced(), { tables: true });
  t.is(
    formatTrace(trace(ctx6(live), pkt('2001:db8:9::2', '2001:db8::20', 80)), ipvsTraceFormat),
    `trace 2001:db8:9::2 -> [2001:db8::20]:80/tcp, a new connection from outside the node: nat PREROUTING

nat PREROUTING
  line 12   -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
nat KUBE-SERVICES
  line 29   -A KUBE-SERVICES -m comment --comment "Kubernetes service lb portal" -m set --match-set KUBE-6-LOAD-BALANCER dst,dst -j KUBE-LOAD-BALANCER
nat KUBE-LOAD-BALANCER
  line 15   -A KUBE-LOAD-BALANCER -m comment --comment "Kubernetes service load balancer ip + port with externalTrafficPolicy=local" -m set --match-set KUBE-6-LOAD-BALANCER-LOCAL dst,dst -j RETURN
nat KUBE-SERVICES
  line 34   -A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
filter INPUT
  line 13   -A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
filter KUBE-IPVS-FILTER
  line 22   -A KUBE-IPVS-FILTER -m set --match-set KUBE-6-LOAD-BALANCER dst,dst -j RETURN
filter INPUT
  line 14   -A INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
filter KUBE-PROXY-FIREWALL
  line 31   -A KUBE-PROXY-FIREWALL ! -s fd00:10:244::/56 -m conntrack --ctstate NEW -m comment --comment "externalTrafficPolicy Local service ports with no local endpoints" -m set --match-set KUBE-6-EXTERNAL-NO-LOCAL dst,dst -j DROP

verdict: DROPped (filter KUBE-PROXY-FIREWALL line 31)
`,
  );
  // From a pod of this node: not dropped (the rule leaves the cluster CIDR out), to the endpoint elsewhere, not masqueraded.
  const fromPod = trace(ctx6(live), pkt('fd00:10:244:1::9', '2001:db8::20', 80));
  t.deepEqual(summary(fromPod), [{ p: 1, verdict: { kind: 'dnat', ip: 'fd00:10:244:2::6', port: 8080 }, masq: false }]);
  t.deepEqual(fromPod.outcomes[0]!.steps.map((s) => `${s.table} ${s.chain} ${s.line || s.rule}`), [
    'nat PREROUTING 12',
    'nat KUBE-SERVICES 29',
    'nat KUBE-LOAD-BALANCER 15',
    'nat KUBE-SERVICES 34',
    'filter INPUT 13',
    'filter KUBE-IPVS-FILTER 22',
    'filter INPUT 14',
    'filter INPUT 15',
    'ipvs TCP [2001:db8::20]:80 rr -> [fd00:10:244:2::6]:8080 Masq weight 1',
    'filter OUTPUT 18',
    'nat POSTROUTING 14',
    'nat KUBE-POSTROUTING 25',
  ]);
});

test('trace --mode ipvs, IPv6 internalTrafficPolicy Local: only the endpoint on this node; with none here, KUBE-6-INTERNAL-NO-LOCAL drops it', async (t) => {
  const live = await readIpvsLive(await synced(), { tables: true });
  const local = trace(ctx6(live), pkt('fd00:10:244:1::9', 'fd00:10:96::70', 80));
  t.deepEqual(summary(local), [{ p: 1, verdict: { kind: 'dnat', ip: 'fd00:10:244:1::7', port: 8080 }, masq: false }]);
  t.deepEqual(local.outcomes[0]!.steps.map((s) => `${s.table} ${s.chain} ${s.line || s.rule}`), [
    'nat PREROUTING 12',
    'nat KUBE-SERVICES 34',
    'filter INPUT 13',
    'filter KUBE-IPVS-FILTER 23',
    'filter INPUT 14',
    'filter INPUT 15',
    'ipvs TCP [fd00:10:96::70]:80 rr -> [fd00:10:244:1::7]:8080 Masq weight 1',
    'filter OUTPUT 18',
    'nat POSTROUTING 14',
    'nat KUBE-POSTROUTING 25',
  ]);
  const none = formatTrace(trace(ctx6(live), pkt('fd00:10:244:1::9', 'fd00:10:96::71', 80)), ipvsTraceFormat);
  t.true(
    none.endsWith(`filter KUBE-PROXY-FIREWALL
  line 32   -A KUBE-PROXY-FIREWALL -m conntrack --ctstate NEW -m comment --comment "internalTrafficPolicy Local service ports with no local endpoints" -m set --match-set KUBE-6-INTERNAL-NO-LOCAL dst,dst -j DROP

note: no IPVS virtual server for TCP [fd00:10:96::71]:80
verdict: DROPped (filter KUBE-PROXY-FIREWALL line 32)
`),
    none,
  );
});

test('trace --mode ipvs names IPv6 virtual and real servers in brackets in its notes: quiesced real server, no virtual server', async (t) => {
  const w = await synced();
  await w.ipvs.setDest({ protocol: 'TCP', address: 'fd00:10:96::a', port: 80 }, { address: 'fd00:10:244:2::3', port: 8080, weight: 0, forwarding: 'masq' });
  const live = await readIpvsLive(w, { tables: true });
  const quiesced = trace(ctx6(live), pkt('fd00:10:244:1::9', 'fd00:10:96::a', 80));
  t.deepEqual(summary(quiesced), [{ p: 1, verdict: { kind: 'dnat', ip: 'fd00:10:244:1::2', port: 8080 }, masq: false }]);
  t.deepEqual(quiesced.outcomes[0]!.notes, ['real server [fd00:10:244:2::3]:8080 has weight 0 (quiesced): no new connections']);
  // A destination the KUBE-6- sets do not hold and IPVS has no virtual server for.
  t.deepEqual(trace(ctx6(live), pkt('fd00:10:244:1::9', 'fd00:10:96::99', 81)).outcomes[0]!.notes, ['no IPVS virtual server for TCP [fd00:10:96::99]:81']);
});

test('diff --mode ipvs, the IPv6 side: no differences after a sync; an ip6tables rule deleted by hand and one added by hand are drift, named "(IPv6)"', async (t) => {
  const w = await synced();
  t.is(formatIpvsDrift(ipvsDrift(desired6(), await readIpvsLive(w, { tables: true }), DRIFT6)), 'no differences\n');
  const live0 = await readIpvsLive(w, { tables: true });
  const masqRule = live0.tables6.get('nat')!.get('KUBE-SERVICES')!.rules.find((r) => r.includes('KUBE-6-CLUSTER-IP'))!;
  await w.iptables6.restore(`*nat\n-D KUBE-SERVICES ${masqRule}\nCOMMIT\n`);
  await w.iptables6.restore('*filter\n-A KUBE-FORWARD -s 2001:db8:66::/48 -j ACCEPT\nCOMMIT\n');
  await w.iptables6.restore('*filter\n-D INPUT -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT\nCOMMIT\n');
  const drift = ipvsDrift(desired6(), await readIpvsLive(w, { tables: true }), DRIFT6);
  t.is(
    formatIpvsDrift(drift),
    `missing rule nat (IPv6) KUBE-SERVICES: ${masqRule}
changed chain filter (IPv6) KUBE-FORWARD
  - -s 2001:db8:66::/48 -j ACCEPT
missing hook filter (IPv6) INPUT: -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT
`,
  );
  t.is(ipvsDriftCount(drift), 3);
  // The IPv4 pass compares the IPv4 tables only: none of it shows there.
  const desired4 = desiredIpvsState(familyView(source(), 'IPv4'), { scheduler: 'rr', nodeAddresses: NODE4 });
  const rules4 = { statics: ipvsStaticRules({ clusterCIDR: '10.244.0.0/16', masqueradeAll: false }), iptablesStatics: iptablesModeStatics('IPv4') };
  t.is(formatIpvsDrift(ipvsDrift(desired4, await readIpvsLive(w, { tables: true }), { serviceCIDR: '10.96.0.0/12', hostAddresses: NODE4.hostAddresses, rules: rules4 })), 'no differences\n');
});

test('diff --mode ipvs, the IPv6 side: an empty ip6tables lists every chain and hook of static6.rules as missing; the IPv4 sysctls are not the IPv6 pass\'s', async (t) => {
  const w = await synced();
  const live = await readIpvsLive(w, { tables: true });
  const bare: IpvsLive = { ...live, tables6: new Map() };
  const text = formatIpvsDrift(ipvsDrift(desired6(), bare, DRIFT6));
  // Read off static6.rules, so that the expectation follows the file.
  const expected = TABLES.flatMap((table) => [
    ...[...RULES6.statics.chains.get(table)!.keys()].map((chain) => `missing chain ${table} (IPv6) ${chain}`),
    ...RULES6.statics.hooks.filter((h) => h.table === table).map((h) => `missing hook ${table} (IPv6) ${h.chain}: ${h.rule}`),
  ]);
  t.true(expected.includes('missing chain filter (IPv6) KUBE-IPVS-FILTER'));
  t.deepEqual(text.trimEnd().split('\n').sort(), expected.sort());
  t.false(text.includes('sysctl'));
});

test('readIpvsLive: an ip6tables-save that fails (a kernel without IPv6) leaves the IPv6 tables empty and says why; the IPv4 side is read', async (t) => {
  const w = await synced();
  const failing = Object.assign(Object.create(w.iptables6) as typeof w.iptables6, {
    save: async () => {
      throw new Error('ip6tables-save: Failed to initialize nft: Protocol not supported');
    },
  });
  const live = await readIpvsLive({ ...w, ipvs: w.ipvs, ipset: w.ipset, links: w.links, iptables: w.iptables, sysctls: w.sysctls, iptables6: failing }, { tables: true });
  t.is(live.tables6Error, 'ip6tables-save: Failed to initialize nft: Protocol not supported');
  t.is(live.tables6.size, 0);
  t.true(live.tables.get('nat')!.has('KUBE-SERVICES'));
  t.is((await readIpvsLive(w, { tables: true })).tables6Error, undefined);
});

test('status --mode ipvs: the ip6tables line counts the drover-owned rules of the IPv6 tables; none while they hold none', async (t) => {
  const live = await readIpvsLive(await synced(), { tables: true });
  t.deepEqual(ip6tablesStatusLines(ownedRuleCounts(RULES6.statics, live.tables6)), [['ip6tables', '46 drover-owned rules in the IPv6 tables (filter 23, nat 23)']]);
  t.deepEqual(ip6tablesStatusLines(ownedRuleCounts(RULES6.statics, new Map())), []);
  // An IPv4-only node: the IPv6 tables stay empty.
  const w = new World();
  await dualBackend(w).sync(dualSnap([web4], []), { full: true, changed: new Set() });
  t.deepEqual(ip6tablesStatusLines(ownedRuleCounts(RULES6.statics, (await readIpvsLive(w, { tables: true })).tables6)), []);
});

test('trace --mode ipvs, IPv6 connections from the node itself: to a LoadBalancer IP whose source ranges leave the node out, and to an internalTrafficPolicy Local ClusterIP with no endpoint here, dropped in filter OUTPUT', async (t) => {
  const live = await readIpvsLive(await synced(), { tables: true });
  for (const dst of ['2001:db8::10', 'fd00:10:96::71']) {
    const r = trace(ctx6(live), pkt('fd00:1::10', dst, 80));
    t.is(r.origin, 'node');
    t.deepEqual(r.outcomes.map((o) => o.verdict), [{ kind: 'drop', table: 'filter', chain: 'KUBE-IPVS-OUT-FILTER', line: 28 }], formatTrace(r, ipvsTraceFormat));
  }
  // A LoadBalancer IP without source ranges: the node reaches its endpoint.
  t.deepEqual(summary(trace(ctx6(live), pkt('fd00:1::10', '2001:db8::15', 80))), [{ p: 1, verdict: { kind: 'dnat', ip: 'fd00:10:244:1::5', port: 8080 }, masq: true }]);
});
