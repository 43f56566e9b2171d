/** IPVS mode's iptables rules: the static file with the masquerade rule substituted, planned with the iptables machinery. */
import test from 'ava';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { FakeIptables } from '../../src/kernel/iptables/fake.ts';
import { parseSave } from '../../src/kernel/iptables/parse.ts';
import { planToRestore } from '../../src/kernel/iptables/plan.ts';
import { ipvsRulesPlan, ipvsStaticRules, substituteMasquerade } from '../../src/modes/ipvs/rules.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';
import { ipv4Frontends } from '../../src/model/types.ts';
import { driftItems } from '../../src/modes/shared/kube-chains/diff.ts';
import { loadStaticRules } from '../../src/modes/shared/kube-chains/static.ts';

const MASQ_COMMENT = '-m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ';

/** The payload for empty tables, with the given KUBE-SERVICES rule lines; `clusterCIDR` leaves this node's pods out of the KUBE-EXTERNAL-NO-LOCAL drop. */
function firstPayload(services: string[], clusterCIDR?: string): string {
  return [
    '*nat',
    ':KUBE-SERVICES - [0:0]',
    ':KUBE-MARK-MASQ - [0:0]',
    ':KUBE-POSTROUTING - [0:0]',
    ':KUBE-NODE-PORT - [0:0]',
    ':KUBE-LOAD-BALANCER - [0:0]',
    '-I PREROUTING 1 -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-I OUTPUT 1 -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-I POSTROUTING 1 -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
    ...services.map((r) => `-A KUBE-SERVICES ${r}`),
    ...FRONTEND_SERVICES.map((r) => `-A KUBE-SERVICES ${r}`),
    '-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000',
    '-A KUBE-POSTROUTING -m comment --comment "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose" -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE',
    '-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN',
    '-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0',
    '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully',
    ...NAT_FRONTEND_CHAINS,
    'COMMIT',
    '*filter',
    ':KUBE-SERVICES - [0:0]',
    ':KUBE-PROXY-FIREWALL - [0:0]',
    ':KUBE-FORWARD - [0:0]',
    ':KUBE-NODE-PORT - [0:0]',
    ':KUBE-SOURCE-RANGES-FIREWALL - [0:0]',
    ':KUBE-IPVS-FILTER - [0:0]',
    ':KUBE-IPVS-OUT-FILTER - [0:0]',
    '-I INPUT 1 -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT',
    '-I INPUT 1 -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL',
    '-I INPUT 1 -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER',
    '-I OUTPUT 1 -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER',
    '-I FORWARD 1 -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD',
    '-I FORWARD 1 -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL',
    FIREWALL_RULES[0],
    `-A KUBE-PROXY-FIREWALL ${clusterCIDR !== undefined ? `! -s ${clusterCIDR} ` : ''}${EXTERNAL_NO_LOCAL_DROP}`,
    FIREWALL_RULES[1],
    '-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP',
    '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT',
    '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
    HEALTH_CHECK_ACCEPT,
    ...FIREWALL_RULES.slice(2),
    ...IPVS_FILTER,
    IPVS_OUT_FILTER,
    'COMMIT',
    '',
  ].join('\n');
}

/** The frontends' rules in nat KUBE-SERVICES (static.rules), without `-A KUBE-SERVICES`. */
const FRONTEND_SERVICES = [
  '-m comment --comment "Kubernetes service lb portal" -m set --match-set KUBE-LOAD-BALANCER dst,dst -j KUBE-LOAD-BALANCER',
  '-m comment --comment "Kubernetes service external ip + port for masquerade and filter purpose" -m set --match-set KUBE-EXTERNAL-IP dst,dst -j KUBE-MARK-MASQ',
  '-m comment --comment "externalTrafficPolicy Local service ports with no local endpoints, from the node itself" -m set --match-set KUBE-EXTERNAL-NO-LOCAL dst,dst -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ',
  '-m comment --comment "internalTrafficPolicy Local service ports with no local endpoints, from the node itself" -m set --match-set KUBE-INTERNAL-NO-LOCAL dst,dst -m addrtype --src-type LOCAL -j MARK --set-xmark 0x8000/0x8000',
  '-m comment --comment "load balancer ip + port with sourceRange, from the node itself outside the ranges" -m set --match-set KUBE-LOAD-BALANCER-FW dst,dst -m addrtype --src-type LOCAL -m set ! --match-set KUBE-LOAD-BALANCER-SOURCE-CIDR dst,dst,src -m set ! --match-set KUBE-LOAD-BALANCER-SOURCE-IP dst,dst,src -j MARK --set-xmark 0x8000/0x8000',
  '-m addrtype --dst-type LOCAL -j KUBE-NODE-PORT',
];

/** filter KUBE-IPVS-OUT-FILTER: drops the node's own connections nat KUBE-SERVICES marked (the two MARK rules above). */
const IPVS_OUT_FILTER = '-A KUBE-IPVS-OUT-FILTER -m mark --mark 0x8000/0x8000 -m comment --comment "connections from the node itself marked for dropping in nat KUBE-SERVICES" -j DROP';

/** The KUBE-EXTERNAL-NO-LOCAL drop of filter KUBE-PROXY-FIREWALL, after its source match. */
const EXTERNAL_NO_LOCAL_DROP = '-m conntrack --ctstate NEW -m comment --comment "externalTrafficPolicy Local service ports with no local endpoints" -m set --match-set KUBE-EXTERNAL-NO-LOCAL dst,dst -j DROP';

/** filter KUBE-NODE-PORT: the health-check NodePorts (kube-proxy's writeIptablesRules). */
const HEALTH_CHECK_ACCEPT = '-A KUBE-NODE-PORT -m comment --comment "Kubernetes health check node port" -m set --match-set KUBE-HEALTH-CHECK-NODE-PORT dst -j ACCEPT';

/** filter KUBE-IPVS-FILTER, as kube-proxy's writeIptablesRules writes it. */
const IPVS_FILTER = [
  '-A KUBE-IPVS-FILTER -m set --match-set KUBE-LOAD-BALANCER dst,dst -j RETURN',
  '-A KUBE-IPVS-FILTER -m set --match-set KUBE-CLUSTER-IP dst,dst -j RETURN',
  '-A KUBE-IPVS-FILTER -m set --match-set KUBE-EXTERNAL-IP dst,dst -j RETURN',
  '-A KUBE-IPVS-FILTER -m set --match-set KUBE-EXTERNAL-IP-LOCAL dst,dst -j RETURN',
  '-A KUBE-IPVS-FILTER -m set --match-set KUBE-HEALTH-CHECK-NODE-PORT dst -j RETURN',
  '-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT --reject-with icmp-port-unreachable',
];

/** nat KUBE-NODE-PORT and KUBE-LOAD-BALANCER, as the payload appends them. */
const NAT_FRONTEND_CHAINS = [
  '-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port with externalTrafficPolicy=local" -m set --match-set KUBE-NODE-PORT-LOCAL-TCP dst -j RETURN',
  '-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port for masquerade purpose" -m set --match-set KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ',
  '-A KUBE-NODE-PORT -p udp -m comment --comment "Kubernetes nodeport UDP port with externalTrafficPolicy=local" -m set --match-set KUBE-NODE-PORT-LOCAL-UDP dst -j RETURN',
  '-A KUBE-NODE-PORT -p udp -m comment --comment "Kubernetes nodeport UDP port for masquerade purpose" -m set --match-set KUBE-NODE-PORT-UDP dst -j KUBE-MARK-MASQ',
  '-A KUBE-NODE-PORT -p sctp -m comment --comment "Kubernetes nodeport SCTP port with externalTrafficPolicy=local" -m set --match-set KUBE-NODE-PORT-LOCAL-SCTP dst,dst -j RETURN',
  '-A KUBE-NODE-PORT -p sctp -m comment --comment "Kubernetes nodeport SCTP port for masquerade purpose" -m set --match-set KUBE-NODE-PORT-SCTP dst,dst -j KUBE-MARK-MASQ',
  '-A KUBE-LOAD-BALANCER -m comment --comment "Kubernetes service load balancer ip + port with externalTrafficPolicy=local" -m set --match-set KUBE-LOAD-BALANCER-LOCAL dst,dst -j RETURN',
  '-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ',
];

/** filter KUBE-PROXY-FIREWALL (the first two, which go around the KUBE-EXTERNAL-NO-LOCAL drop) and KUBE-SOURCE-RANGES-FIREWALL. */
const FIREWALL_RULES = [
  '-A KUBE-PROXY-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port for load balancer with sourceRange" -m set --match-set KUBE-LOAD-BALANCER-FW dst,dst -j KUBE-SOURCE-RANGES-FIREWALL',
  '-A KUBE-PROXY-FIREWALL -m conntrack --ctstate NEW -m comment --comment "internalTrafficPolicy Local service ports with no local endpoints" -m set --match-set KUBE-INTERNAL-NO-LOCAL dst,dst -j DROP',
  '-A KUBE-SOURCE-RANGES-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port + source cidr for packet filter purpose" -m set --match-set KUBE-LOAD-BALANCER-SOURCE-CIDR dst,dst,src -j RETURN',
  '-A KUBE-SOURCE-RANGES-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port + source IP for packet filter purpose" -m set --match-set KUBE-LOAD-BALANCER-SOURCE-IP dst,dst,src -j RETURN',
  '-A KUBE-SOURCE-RANGES-FIREWALL -j DROP',
];

test('cluster CIDR: traffic from outside it to a ClusterIP is marked for masquerade (exact payload)', (t) => {
  const statics = ipvsStaticRules({ clusterCIDR: '10.244.0.0/16', masqueradeAll: false });
  t.is(planToRestore(ipvsRulesPlan(statics, new Map())), firstPayload([`! -s 10.244.0.0/16 ${MASQ_COMMENT}`], '10.244.0.0/16'));
});

test('masquerade-all: all traffic to a ClusterIP is marked, and wins over the cluster CIDR (as kube-proxy)', (t) => {
  for (const clusterCIDR of [undefined, '10.244.0.0/16']) {
    const statics = ipvsStaticRules({ masqueradeAll: true, ...(clusterCIDR ? { clusterCIDR } : {}) });
    t.is(planToRestore(ipvsRulesPlan(statics, new Map())), firstPayload([MASQ_COMMENT], clusterCIDR));
  }
});

test('neither: no masquerade rule (hairpin masquerade stays)', (t) => {
  const statics = ipvsStaticRules({ masqueradeAll: false });
  t.is(planToRestore(ipvsRulesPlan(statics, new Map())), firstPayload([]));
});

test('a bad cluster CIDR or a broken rules file is refused', (t) => {
  t.throws(() => ipvsStaticRules({ masqueradeAll: false, clusterCIDR: '10.0.0.0/8 -j ACCEPT' }), { message: /not a valid IPv4 CIDR/ });
  t.throws(() => substituteMasquerade('*nat\nCOMMIT\n', { masqueradeAll: true }), { message: /exactly one rule line, found 0/ });
});

test('applied rules read back equal: the next full sync writes nothing', async (t) => {
  const statics = ipvsStaticRules({ clusterCIDR: '10.244.0.0/16', masqueradeAll: false });
  const ipt = new FakeIptables();
  await ipt.restore(planToRestore(ipvsRulesPlan(statics, new Map())));
  const dump = parseSave(`${ipt.dump('filter')}\n${ipt.dump('nat')}`);
  t.is(planToRestore(ipvsRulesPlan(statics, dump)), '');
});

test('switching from iptables mode: service chains, REJECTs, NodePort and firewall chains and the filter hooks are removed', async (t) => {
  const ipt = new FakeIptables();
  const render = { clusterCIDR: '10.244.0.0/16', masqueradeAll: false };
  const iptablesMode = new IptablesBackend({ exec: ipt, render, logger: silentLogger() });
  const lb = sp('default/lb:http', '10.96.0.12', 80, [ep('10.244.1.2:8080', { nodeName: 'n1' })], {
    type: 'LoadBalancer',
    externalTrafficPolicy: 'Local',
    frontends: { ...ipv4Frontends('10.96.0.12', 30080), loadBalancerIngress: [{ family: 'IPv4', ip: '198.51.100.10', ipMode: 'VIP' }], loadBalancerSourceRanges: ['192.168.0.0/16'], healthCheckNodePort: 30999 },
  });
  await iptablesMode.sync({ ...snap(sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080')]), sp('default/empty:http', '10.96.0.11', 80, []), lb), node: { name: 'n1', addresses: [] } }, {
    full: true,
    changed: new Set(),
  });
  const statics = ipvsStaticRules(render);
  // What `drover diff --mode ipvs` reports first: iptables mode's chains as extra, none of them as changed.
  const drift = driftItems(statics, new Map(), parseSave(`${ipt.dump('filter')}\n${ipt.dump('nat')}`), { retired: loadStaticRules() });
  t.deepEqual(drift.filter((i) => i.kind === 'changed chain').map((i) => i.chain), ['KUBE-POSTROUTING'], 'only IPVS mode\'s own hairpin rule differs');
  t.deepEqual(
    drift.filter((i) => i.kind === 'extra chain').map((i) => `${i.table} ${i.chain.replace(/-[A-Z2-7]{16}$/, '-*')}`).sort(),
    // KUBE-PROXY-FIREWALL is IPVS mode's too (its source-range and no-local-endpoint rules): not extra.
    ['filter KUBE-EXTERNAL-SERVICES', 'filter KUBE-NODEPORTS', 'nat KUBE-EXT-*', 'nat KUBE-FW-*', 'nat KUBE-NODEPORTS', 'nat KUBE-SEP-*', 'nat KUBE-SEP-*', 'nat KUBE-SVC-*', 'nat KUBE-SVC-*', 'nat KUBE-SVL-*'],
  );
  // The empty canary chains (canary.ts) stay: they hold no rule, and IPVS mode's drift check uses them too.
  await ipt.restore(planToRestore(ipvsRulesPlan(statics, parseSave(`${ipt.dump('filter')}\n${ipt.dump('nat')}`))));
  t.is(
    ipt.dump('filter'),
    [
      '*filter',
      ':INPUT ACCEPT [0:0]',
      ':FORWARD ACCEPT [0:0]',
      ':OUTPUT ACCEPT [0:0]',
      ':KUBE-FORWARD - [0:0]',
      ':KUBE-IPVS-FILTER - [0:0]',
      ':KUBE-IPVS-OUT-FILTER - [0:0]',
      ':KUBE-NODE-PORT - [0:0]',
      ':KUBE-PROXY-CANARY - [0:0]',
      ':KUBE-PROXY-FIREWALL - [0:0]',
      ':KUBE-SERVICES - [0:0]',
      ':KUBE-SOURCE-RANGES-FIREWALL - [0:0]',
      '-A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER',
      '-A INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL',
      '-A INPUT -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT',
      '-A FORWARD -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL',
      '-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD',
      '-A OUTPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER',
      '-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP',
      '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT',
      '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
      ...IPVS_FILTER,
      IPVS_OUT_FILTER,
      HEALTH_CHECK_ACCEPT,
      FIREWALL_RULES[0],
      `-A KUBE-PROXY-FIREWALL ! -s 10.244.0.0/16 ${EXTERNAL_NO_LOCAL_DROP}`,
      ...FIREWALL_RULES.slice(1),
      'COMMIT',
      '',
    ].join('\n'),
  );
  const nat = ipt.dump('nat');
  t.notRegex(nat, /KUBE-SVC-|KUBE-SEP-|KUBE-SVL-|KUBE-EXT-|KUBE-FW-|KUBE-NODEPORTS/);
  t.regex(nat, /^-A KUBE-SERVICES ! -s 10\.244\.0\.0\/16 -m comment --comment "Kubernetes service cluster ip \+ port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ$/m);
  t.is(nat.split('\n').filter((l) => l.startsWith('-A KUBE-SERVICES')).length, 1 + FRONTEND_SERVICES.length);
  t.is(planToRestore(ipvsRulesPlan(statics, parseSave(`${ipt.dump('filter')}\n${nat}`))), '');
});
