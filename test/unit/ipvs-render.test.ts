/** `drover render --mode ipvs`: the exact text of what a full IPVS-mode sync writes onto an empty node. */
import test from 'ava';
import { desiredIpvsState } from '../../src/modes/ipvs/assemble.ts';
import { ipvsadmSaveLines, renderIpvs } from '../../src/modes/ipvs/render.ts';
import { ipvsStaticRules } from '../../src/modes/ipvs/rules.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

const state = () =>
  desiredIpvsState(
    snap(
      sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.3:8080'), ep('10.244.1.2:8080'), ep('10.244.1.4:8080', { ready: false })]),
      sp('kube-system/dns:dns', '10.96.0.53', 53, [ep('10.244.2.2:53')], { protocol: 'UDP' }),
      sp('default/sticky:https', '10.96.0.20', 443, [ep('10.244.3.2:8443')], { sessionAffinity: { timeoutSeconds: 10800 } }),
      sp('default/sig:s', '10.96.0.30', 3868, [ep('10.244.4.2:3868')], { protocol: 'SCTP' }),
      sp('default/empty:http', '10.96.0.11', 80, []),
    ),
    { scheduler: 'rr' },
  );

test('virtual and real servers in the form ipvsadm -S -n prints: protocol option, scheduler, persistence, masquerade, weight', (t) => {
  t.deepEqual(ipvsadmSaveLines(state()), [
    '-A -t 10.96.0.10:80 -s rr',
    '-a -t 10.96.0.10:80 -r 10.244.1.2:8080 -m -w 1',
    '-a -t 10.96.0.10:80 -r 10.244.1.3:8080 -m -w 1',
    '-A -t 10.96.0.11:80 -s rr',
    '-A -t 10.96.0.20:443 -s rr -p 10800',
    '-a -t 10.96.0.20:443 -r 10.244.3.2:8443 -m -w 1',
    '-A -u 10.96.0.53:53 -s rr',
    '-a -u 10.96.0.53:53 -r 10.244.2.2:53 -m -w 1',
    '-A --sctp-service 10.96.0.30:3868 -s rr',
    '-a --sctp-service 10.96.0.30:3868 -r 10.244.4.2:3868 -m -w 1',
  ]);
});

test('ipvsadm order: protocol number, then addresses and ports as numbers, not as text', (t) => {
  const d = desiredIpvsState(
    snap(
      sp('default/a:p', '10.96.0.10', 80, []),
      sp('default/b:p', '10.96.0.9', 443, [ep('10.244.1.10:8443'), ep('10.244.1.9:8443'), ep('10.244.1.9:900')]),
      sp('default/c:p', '10.96.0.9', 80, []),
    ),
    { scheduler: 'rr' },
  );
  t.deepEqual(ipvsadmSaveLines(d), [
    '-A -t 10.96.0.9:80 -s rr',
    '-A -t 10.96.0.9:443 -s rr',
    '-a -t 10.96.0.9:443 -r 10.244.1.9:900 -m -w 1',
    '-a -t 10.96.0.9:443 -r 10.244.1.9:8443 -m -w 1',
    '-a -t 10.96.0.9:443 -r 10.244.1.10:8443 -m -w 1',
    '-A -t 10.96.0.10:80 -s rr',
  ]);
});

test('render refuses a header line with a line break, so nothing can add a line', (t) => {
  t.throws(() => renderIpvs(state(), ipvsStaticRules({ clusterCIDR: '10.244.0.0/16', masqueradeAll: false }), ['x\n-A -t 1.2.3.4:1 -s rr']), {
    message: 'render header line "x\\n-A -t 1.2.3.4:1 -s rr" holds a line break',
  });
});

test('the whole render: header, sysctls, ipsets, iptables rules, kube-ipvs0, virtual servers', (t) => {
  const text = renderIpvs(state(), ipvsStaticRules({ clusterCIDR: '10.244.0.0/16', masqueradeAll: false }), ['drover render --mode ipvs']);
  t.is(
    text,
    `# drover render --mode ipvs
# sysctls
net.ipv4.vs.conntrack=1
net.ipv4.vs.expire_nodest_conn=1
net.ipv4.vs.expire_quiescent_template=1
net.ipv4.ip_forward=1
# ipset restore -exist
create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536
add KUBE-CLUSTER-IP 10.96.0.10,tcp:80
add KUBE-CLUSTER-IP 10.96.0.11,tcp:80
add KUBE-CLUSTER-IP 10.96.0.20,tcp:443
add KUBE-CLUSTER-IP 10.96.0.30,sctp:3868
add KUBE-CLUSTER-IP 10.96.0.53,udp:53
create KUBE-LOOP-BACK hash:ip,port,ip family inet hashsize 1024 maxelem 65536
add KUBE-LOOP-BACK 10.244.1.2,tcp:8080,10.244.1.2
add KUBE-LOOP-BACK 10.244.1.3,tcp:8080,10.244.1.3
add KUBE-LOOP-BACK 10.244.2.2,udp:53,10.244.2.2
add KUBE-LOOP-BACK 10.244.3.2,tcp:8443,10.244.3.2
add KUBE-LOOP-BACK 10.244.4.2,sctp:3868,10.244.4.2
create KUBE-EXTERNAL-IP hash:ip,port family inet hashsize 1024 maxelem 65536
create KUBE-EXTERNAL-IP-LOCAL hash:ip,port family inet hashsize 1024 maxelem 65536
create KUBE-LOAD-BALANCER hash:ip,port family inet hashsize 1024 maxelem 65536
create KUBE-LOAD-BALANCER-FW hash:ip,port family inet hashsize 1024 maxelem 65536
create KUBE-LOAD-BALANCER-LOCAL hash:ip,port family inet hashsize 1024 maxelem 65536
create KUBE-LOAD-BALANCER-SOURCE-IP hash:ip,port,ip family inet hashsize 1024 maxelem 65536
create KUBE-LOAD-BALANCER-SOURCE-CIDR hash:ip,port,net family inet hashsize 1024 maxelem 65536
create KUBE-NODE-PORT-TCP bitmap:port range 0-65535
create KUBE-NODE-PORT-LOCAL-TCP bitmap:port range 0-65535
create KUBE-NODE-PORT-UDP bitmap:port range 0-65535
create KUBE-NODE-PORT-LOCAL-UDP bitmap:port range 0-65535
create KUBE-NODE-PORT-SCTP hash:ip,port family inet hashsize 1024 maxelem 65536
create KUBE-NODE-PORT-LOCAL-SCTP hash:ip,port family inet hashsize 1024 maxelem 65536
create KUBE-HEALTH-CHECK-NODE-PORT bitmap:port range 0-65535
create KUBE-IPVS-IPS hash:ip family inet hashsize 1024 maxelem 65536
add KUBE-IPVS-IPS 10.96.0.10
add KUBE-IPVS-IPS 10.96.0.11
add KUBE-IPVS-IPS 10.96.0.20
add KUBE-IPVS-IPS 10.96.0.30
add KUBE-IPVS-IPS 10.96.0.53
create KUBE-EXTERNAL-NO-LOCAL hash:ip,port family inet hashsize 1024 maxelem 65536
create KUBE-INTERNAL-NO-LOCAL hash:ip,port family inet hashsize 1024 maxelem 65536
# iptables-restore --noflush
*nat
:KUBE-SERVICES - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-LOAD-BALANCER - [0:0]
-I PREROUTING 1 -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-I OUTPUT 1 -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-I POSTROUTING 1 -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-SERVICES ! -s 10.244.0.0/16 -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m comment --comment "Kubernetes service lb portal" -m set --match-set KUBE-LOAD-BALANCER dst,dst -j KUBE-LOAD-BALANCER
-A KUBE-SERVICES -m comment --comment "Kubernetes service external ip + port for masquerade and filter purpose" -m set --match-set KUBE-EXTERNAL-IP dst,dst -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m comment --comment "externalTrafficPolicy Local service ports with no local endpoints, from the node itself" -m set --match-set KUBE-EXTERNAL-NO-LOCAL dst,dst -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m comment --comment "internalTrafficPolicy Local service ports with no local endpoints, from the node itself" -m set --match-set KUBE-INTERNAL-NO-LOCAL dst,dst -m addrtype --src-type LOCAL -j MARK --set-xmark 0x8000/0x8000
-A KUBE-SERVICES -m comment --comment "load balancer ip + port with sourceRange, from the node itself outside the ranges" -m set --match-set KUBE-LOAD-BALANCER-FW dst,dst -m addrtype --src-type LOCAL -m set ! --match-set KUBE-LOAD-BALANCER-SOURCE-CIDR dst,dst,src -m set ! --match-set KUBE-LOAD-BALANCER-SOURCE-IP dst,dst,src -j MARK --set-xmark 0x8000/0x8000
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-POSTROUTING -m comment --comment "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose" -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port with externalTrafficPolicy=local" -m set --match-set KUBE-NODE-PORT-LOCAL-TCP dst -j RETURN
-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port for masquerade purpose" -m set --match-set KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ
-A KUBE-NODE-PORT -p udp -m comment --comment "Kubernetes nodeport UDP port with externalTrafficPolicy=local" -m set --match-set KUBE-NODE-PORT-LOCAL-UDP dst -j RETURN
-A KUBE-NODE-PORT -p udp -m comment --comment "Kubernetes nodeport UDP port for masquerade purpose" -m set --match-set KUBE-NODE-PORT-UDP dst -j KUBE-MARK-MASQ
-A KUBE-NODE-PORT -p sctp -m comment --comment "Kubernetes nodeport SCTP port with externalTrafficPolicy=local" -m set --match-set KUBE-NODE-PORT-LOCAL-SCTP dst,dst -j RETURN
-A KUBE-NODE-PORT -p sctp -m comment --comment "Kubernetes nodeport SCTP port for masquerade purpose" -m set --match-set KUBE-NODE-PORT-SCTP dst,dst -j KUBE-MARK-MASQ
-A KUBE-LOAD-BALANCER -m comment --comment "Kubernetes service load balancer ip + port with externalTrafficPolicy=local" -m set --match-set KUBE-LOAD-BALANCER-LOCAL dst,dst -j RETURN
-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ
COMMIT
*filter
:KUBE-SERVICES - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-SOURCE-RANGES-FIREWALL - [0:0]
:KUBE-IPVS-FILTER - [0:0]
:KUBE-IPVS-OUT-FILTER - [0:0]
-I INPUT 1 -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT
-I INPUT 1 -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
-I INPUT 1 -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
-I OUTPUT 1 -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER
-I FORWARD 1 -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-I FORWARD 1 -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
-A KUBE-PROXY-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port for load balancer with sourceRange" -m set --match-set KUBE-LOAD-BALANCER-FW dst,dst -j KUBE-SOURCE-RANGES-FIREWALL
-A KUBE-PROXY-FIREWALL ! -s 10.244.0.0/16 -m conntrack --ctstate NEW -m comment --comment "externalTrafficPolicy Local service ports with no local endpoints" -m set --match-set KUBE-EXTERNAL-NO-LOCAL dst,dst -j DROP
-A KUBE-PROXY-FIREWALL -m conntrack --ctstate NEW -m comment --comment "internalTrafficPolicy Local service ports with no local endpoints" -m set --match-set KUBE-INTERNAL-NO-LOCAL dst,dst -j DROP
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A KUBE-NODE-PORT -m comment --comment "Kubernetes health check node port" -m set --match-set KUBE-HEALTH-CHECK-NODE-PORT dst -j ACCEPT
-A KUBE-SOURCE-RANGES-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port + source cidr for packet filter purpose" -m set --match-set KUBE-LOAD-BALANCER-SOURCE-CIDR dst,dst,src -j RETURN
-A KUBE-SOURCE-RANGES-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port + source IP for packet filter purpose" -m set --match-set KUBE-LOAD-BALANCER-SOURCE-IP dst,dst,src -j RETURN
-A KUBE-SOURCE-RANGES-FIREWALL -j DROP
-A KUBE-IPVS-FILTER -m set --match-set KUBE-LOAD-BALANCER dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-CLUSTER-IP dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-EXTERNAL-IP dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-EXTERNAL-IP-LOCAL dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-HEALTH-CHECK-NODE-PORT dst -j RETURN
-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT --reject-with icmp-port-unreachable
-A KUBE-IPVS-OUT-FILTER -m mark --mark 0x8000/0x8000 -m comment --comment "connections from the node itself marked for dropping in nat KUBE-SERVICES" -j DROP
COMMIT
# kube-ipvs0 (dummy, left down): addresses
10.96.0.10/32
10.96.0.11/32
10.96.0.20/32
10.96.0.30/32
10.96.0.53/32
# ipvsadm -R (the form ipvsadm -S -n prints)
-A -t 10.96.0.10:80 -s rr
-a -t 10.96.0.10:80 -r 10.244.1.2:8080 -m -w 1
-a -t 10.96.0.10:80 -r 10.244.1.3:8080 -m -w 1
-A -t 10.96.0.11:80 -s rr
-A -t 10.96.0.20:443 -s rr -p 10800
-a -t 10.96.0.20:443 -r 10.244.3.2:8443 -m -w 1
-A -u 10.96.0.53:53 -s rr
-a -u 10.96.0.53:53 -r 10.244.2.2:53 -m -w 1
-A --sctp-service 10.96.0.30:3868 -s rr
-a --sctp-service 10.96.0.30:3868 -r 10.244.4.2:3868 -m -w 1
`,
  );
});
