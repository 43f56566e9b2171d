import test from 'ava';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { FakeIptables } from '../../src/kernel/iptables/fake.ts';
import { parseSave } from '../../src/kernel/iptables/parse.ts';
import { chainLabel, formatChains, selectServicePorts, serviceChains } from '../../src/modes/shared/kube-chains/chains.ts';
import { readTables } from '../../src/kernel/iptables/live.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

/** The kernel after drover synced web (two endpoints, ClientIP affinity) and db (no endpoints). */
async function droverKernel() {
  const fake = new FakeIptables();
  const backend = new IptablesBackend({ exec: fake, render: { clusterCIDR: '10.244.0.0/16', masqueradeAll: false }, logger: silentLogger() });
  await backend.sync(
    snap(
      sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080'), ep('10.244.1.3:8080')], { sessionAffinity: { timeoutSeconds: 600 } }),
      sp('default/web:metrics', '10.96.0.10', 9100, [ep('10.244.1.2:9100')]),
      sp('default/db:pg', '10.96.0.11', 5432, []),
    ),
    { full: true, changed: new Set() },
  );
  return readTables(fake);
}

test('chains prints one service port from drover-written rules, each chain under its label', async (t) => {
  const found = selectServicePorts(serviceChains(await droverKernel()), 'default/web:http');
  t.is(
    formatChains(found),
    `# default/web:http (nat KUBE-SERVICES)
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-CDGGSHYLG3RE2FKL
# default/web:http (nat KUBE-SVC-CDGGSHYLG3RE2FKL)
-A KUBE-SVC-CDGGSHYLG3RE2FKL ! -s 10.244.0.0/16 -d 10.96.0.10/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment "default/web:http -> 10.244.1.2:8080" -m recent --rcheck --seconds 600 --reap --name KUBE-SEP-UIQK3OSOSTRHRPBX --mask 255.255.255.255 --rsource -j KUBE-SEP-UIQK3OSOSTRHRPBX
-A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment "default/web:http -> 10.244.1.3:8080" -m recent --rcheck --seconds 600 --reap --name KUBE-SEP-2AZ33KU3V5PGPQZH --mask 255.255.255.255 --rsource -j KUBE-SEP-2AZ33KU3V5PGPQZH
-A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment "default/web:http -> 10.244.1.2:8080" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-UIQK3OSOSTRHRPBX
-A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment "default/web:http -> 10.244.1.3:8080" -j KUBE-SEP-2AZ33KU3V5PGPQZH
# default/web:http -> 10.244.1.2:8080 (nat KUBE-SEP-UIQK3OSOSTRHRPBX)
-A KUBE-SEP-UIQK3OSOSTRHRPBX -s 10.244.1.2/32 -m comment --comment "default/web:http" -j KUBE-MARK-MASQ
-A KUBE-SEP-UIQK3OSOSTRHRPBX -p tcp -m comment --comment "default/web:http" -m recent --set --name KUBE-SEP-UIQK3OSOSTRHRPBX --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.244.1.2:8080
# default/web:http -> 10.244.1.3:8080 (nat KUBE-SEP-2AZ33KU3V5PGPQZH)
-A KUBE-SEP-2AZ33KU3V5PGPQZH -s 10.244.1.3/32 -m comment --comment "default/web:http" -j KUBE-MARK-MASQ
-A KUBE-SEP-2AZ33KU3V5PGPQZH -p tcp -m comment --comment "default/web:http" -m recent --set --name KUBE-SEP-2AZ33KU3V5PGPQZH --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.244.1.3:8080
`,
  );
});

test('chains NAMESPACE/NAME selects every port; a port with no endpoints shows its filter REJECT', async (t) => {
  const all = serviceChains(await droverKernel());
  t.deepEqual(
    all.map((s) => s.servicePort),
    ['default/db:pg', 'default/web:http', 'default/web:metrics'],
  );
  t.deepEqual(
    selectServicePorts(all, 'default/web').map((s) => s.servicePort),
    ['default/web:http', 'default/web:metrics'],
  );
  t.is(
    formatChains(selectServicePorts(all, 'default/db')),
    `# default/db:pg (filter KUBE-SERVICES)
-A KUBE-SERVICES -d 10.96.0.11/32 -p tcp -m comment --comment "default/db:pg has no endpoints" -m tcp --dport 5432 -j REJECT --reject-with icmp-port-unreachable
`,
  );
});

test('chains --json shape: service port, then table, chain, endpoint and rules per chain', async (t) => {
  const [metrics] = selectServicePorts(serviceChains(await droverKernel()), 'default/web:metrics');
  t.deepEqual(JSON.parse(JSON.stringify(metrics)), {
    servicePort: 'default/web:metrics',
    chains: [
      {
        table: 'nat',
        chain: 'KUBE-SERVICES',
        endpoint: null,
        rules: [
          '-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "default/web:metrics cluster IP" -m tcp --dport 9100 -j KUBE-SVC-I6PCZM52FOLORXOW',
        ],
      },
      {
        table: 'nat',
        chain: 'KUBE-SVC-I6PCZM52FOLORXOW',
        endpoint: null,
        rules: [
          '-A KUBE-SVC-I6PCZM52FOLORXOW ! -s 10.244.0.0/16 -d 10.96.0.10/32 -p tcp -m comment --comment "default/web:metrics cluster IP" -m tcp --dport 9100 -j KUBE-MARK-MASQ',
          '-A KUBE-SVC-I6PCZM52FOLORXOW -m comment --comment "default/web:metrics -> 10.244.1.2:9100" -j KUBE-SEP-VZGA7XWZUVUHHN2X',
        ],
      },
      {
        table: 'nat',
        chain: 'KUBE-SEP-VZGA7XWZUVUHHN2X',
        endpoint: '10.244.1.2:9100',
        rules: [
          '-A KUBE-SEP-VZGA7XWZUVUHHN2X -s 10.244.1.2/32 -m comment --comment "default/web:metrics" -j KUBE-MARK-MASQ',
          '-A KUBE-SEP-VZGA7XWZUVUHHN2X -p tcp -m comment --comment "default/web:metrics" -m tcp -j DNAT --to-destination 10.244.1.2:9100',
        ],
      },
    ],
  });
});

/**
 * iptables-nft-save of a node where kube-proxy (not drover) wrote the rules:
 * kube-proxy 1.29's layout with its canary chains, the NodePort chain
 * KUBE-EXT of default/web, the nodeports rule last in KUBE-SERVICES, a
 * firewall; default/kubernetes:https in the older (pre-1.23) style, whose
 * KUBE-SVC jump comment does not name the endpoint.
 */
const KUBE_PROXY_SAVE = `# Generated by iptables-nft-save v1.8.9 (nf_tables) on Mon Jun  2 10:00:00 2025
*filter
:INPUT ACCEPT [4022:1208437]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [3977:702451]
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-FIREWALL - [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SERVICES - [0:0]
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-A INPUT -j KUBE-FIREWALL
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -j KUBE-FIREWALL
-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A KUBE-SERVICES -d 10.96.200.14/32 -p tcp -m comment --comment "default/db:postgres has no endpoints" -m tcp --dport 5432 -j REJECT --reject-with icmp-port-unreachable
COMMIT
# Completed on Mon Jun  2 10:00:00 2025
# Generated by iptables-nft-save v1.8.9 (nf_tables) on Mon Jun  2 10:00:00 2025
*nat
:PREROUTING ACCEPT [12:720]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [401:24060]
:POSTROUTING ACCEPT [401:24060]
:KUBE-EXT-CDGGSHYLG3RE2FKL - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-SEP-6E7XQMQ4RAYOWTTM - [0:0]
:KUBE-SEP-A4JCWMD6AMIS43DD - [0:0]
:KUBE-SEP-SF3LG62VAE5ALYDV - [0:0]
:KUBE-SEP-V2PECCYPB6X2GSCW - [0:0]
:KUBE-SEP-WXWGHGKZOCNYRYI7 - [0:0]
:KUBE-SEP-ZXMNUKOKXUTL2MK2 - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-CDGGSHYLG3RE2FKL - [0:0]
:KUBE-SVC-ERIFXISQEP7F7OF4 - [0:0]
:KUBE-SVC-NPX46M4PTMTKRN6Y - [0:0]
:KUBE-SVC-TCOU7JCQXEZGVUNU - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-EXT-CDGGSHYLG3RE2FKL -m comment --comment "masquerade traffic for default/web:http external destinations" -j KUBE-MARK-MASQ
-A KUBE-EXT-CDGGSHYLG3RE2FKL -j KUBE-SVC-CDGGSHYLG3RE2FKL
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-NODEPORTS -p tcp -m comment --comment "default/web:http" -m tcp --dport 30080 -j KUBE-EXT-CDGGSHYLG3RE2FKL
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-SEP-6E7XQMQ4RAYOWTTM -s 10.244.0.3/32 -m comment --comment "kube-system/kube-dns:dns" -j KUBE-MARK-MASQ
-A KUBE-SEP-6E7XQMQ4RAYOWTTM -p udp -m comment --comment "kube-system/kube-dns:dns" -m udp -j DNAT --to-destination 10.244.0.3:53
-A KUBE-SEP-A4JCWMD6AMIS43DD -s 10.244.1.7/32 -m comment --comment "default/web:http" -j KUBE-MARK-MASQ
-A KUBE-SEP-A4JCWMD6AMIS43DD -p tcp -m comment --comment "default/web:http" -m tcp -j DNAT --to-destination 10.244.1.7:8080
-A KUBE-SEP-SF3LG62VAE5ALYDV -s 10.244.0.4/32 -m comment --comment "kube-system/kube-dns:dns-tcp" -j KUBE-MARK-MASQ
-A KUBE-SEP-SF3LG62VAE5ALYDV -p tcp -m comment --comment "kube-system/kube-dns:dns-tcp" -m tcp -j DNAT --to-destination 10.244.0.4:53
-A KUBE-SEP-V2PECCYPB6X2GSCW -s 172.18.0.2/32 -m comment --comment "default/kubernetes:https" -j KUBE-MARK-MASQ
-A KUBE-SEP-V2PECCYPB6X2GSCW -p tcp -m comment --comment "default/kubernetes:https" -m tcp -j DNAT --to-destination 172.18.0.2:6443
-A KUBE-SEP-WXWGHGKZOCNYRYI7 -s 10.244.0.4/32 -m comment --comment "kube-system/kube-dns:dns" -j KUBE-MARK-MASQ
-A KUBE-SEP-WXWGHGKZOCNYRYI7 -p udp -m comment --comment "kube-system/kube-dns:dns" -m udp -j DNAT --to-destination 10.244.0.4:53
-A KUBE-SEP-ZXMNUKOKXUTL2MK2 -s 10.244.0.3/32 -m comment --comment "kube-system/kube-dns:dns-tcp" -j KUBE-MARK-MASQ
-A KUBE-SEP-ZXMNUKOKXUTL2MK2 -p tcp -m comment --comment "kube-system/kube-dns:dns-tcp" -m tcp -j DNAT --to-destination 10.244.0.3:53
-A KUBE-SERVICES -d 10.96.0.10/32 -p udp -m comment --comment "kube-system/kube-dns:dns cluster IP" -m udp --dport 53 -j KUBE-SVC-TCOU7JCQXEZGVUNU
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "kube-system/kube-dns:dns-tcp cluster IP" -m tcp --dport 53 -j KUBE-SVC-ERIFXISQEP7F7OF4
-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment "default/kubernetes:https cluster IP" -m tcp --dport 443 -j KUBE-SVC-NPX46M4PTMTKRN6Y
-A KUBE-SERVICES -d 10.96.45.7/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-CDGGSHYLG3RE2FKL
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-SVC-CDGGSHYLG3RE2FKL ! -s 10.244.0.0/16 -d 10.96.45.7/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment "default/web:http -> 10.244.1.7:8080" -j KUBE-SEP-A4JCWMD6AMIS43DD
-A KUBE-SVC-ERIFXISQEP7F7OF4 ! -s 10.244.0.0/16 -d 10.96.0.10/32 -p tcp -m comment --comment "kube-system/kube-dns:dns-tcp cluster IP" -m tcp --dport 53 -j KUBE-MARK-MASQ
-A KUBE-SVC-ERIFXISQEP7F7OF4 -m comment --comment "kube-system/kube-dns:dns-tcp -> 10.244.0.3:53" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-ZXMNUKOKXUTL2MK2
-A KUBE-SVC-ERIFXISQEP7F7OF4 -m comment --comment "kube-system/kube-dns:dns-tcp -> 10.244.0.4:53" -j KUBE-SEP-SF3LG62VAE5ALYDV
-A KUBE-SVC-NPX46M4PTMTKRN6Y ! -s 10.244.0.0/16 -d 10.96.0.1/32 -p tcp -m comment --comment "default/kubernetes:https cluster IP" -m tcp --dport 443 -j KUBE-MARK-MASQ
-A KUBE-SVC-NPX46M4PTMTKRN6Y -m comment --comment "default/kubernetes:https" -j KUBE-SEP-V2PECCYPB6X2GSCW
-A KUBE-SVC-TCOU7JCQXEZGVUNU ! -s 10.244.0.0/16 -d 10.96.0.10/32 -p udp -m comment --comment "kube-system/kube-dns:dns cluster IP" -m udp --dport 53 -j KUBE-MARK-MASQ
-A KUBE-SVC-TCOU7JCQXEZGVUNU -m comment --comment "kube-system/kube-dns:dns -> 10.244.0.3:53" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-6E7XQMQ4RAYOWTTM
-A KUBE-SVC-TCOU7JCQXEZGVUNU -m comment --comment "kube-system/kube-dns:dns -> 10.244.0.4:53" -j KUBE-SEP-WXWGHGKZOCNYRYI7
COMMIT
# Completed on Mon Jun  2 10:00:00 2025
`;

test('chains reads a ruleset written by kube-proxy: NodePort entries and KUBE-EXT chains included, endpoints come from the DNAT', (t) => {
  const all = serviceChains(parseSave(KUBE_PROXY_SAVE));
  t.is(
    formatChains(all),
    `# default/db:postgres (filter KUBE-SERVICES)
-A KUBE-SERVICES -d 10.96.200.14/32 -p tcp -m comment --comment "default/db:postgres has no endpoints" -m tcp --dport 5432 -j REJECT --reject-with icmp-port-unreachable

# default/kubernetes:https (nat KUBE-SERVICES)
-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment "default/kubernetes:https cluster IP" -m tcp --dport 443 -j KUBE-SVC-NPX46M4PTMTKRN6Y
# default/kubernetes:https (nat KUBE-SVC-NPX46M4PTMTKRN6Y)
-A KUBE-SVC-NPX46M4PTMTKRN6Y ! -s 10.244.0.0/16 -d 10.96.0.1/32 -p tcp -m comment --comment "default/kubernetes:https cluster IP" -m tcp --dport 443 -j KUBE-MARK-MASQ
-A KUBE-SVC-NPX46M4PTMTKRN6Y -m comment --comment "default/kubernetes:https" -j KUBE-SEP-V2PECCYPB6X2GSCW
# default/kubernetes:https -> 172.18.0.2:6443 (nat KUBE-SEP-V2PECCYPB6X2GSCW)
-A KUBE-SEP-V2PECCYPB6X2GSCW -s 172.18.0.2/32 -m comment --comment "default/kubernetes:https" -j KUBE-MARK-MASQ
-A KUBE-SEP-V2PECCYPB6X2GSCW -p tcp -m comment --comment "default/kubernetes:https" -m tcp -j DNAT --to-destination 172.18.0.2:6443

# default/web:http (nat KUBE-SERVICES)
-A KUBE-SERVICES -d 10.96.45.7/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-CDGGSHYLG3RE2FKL
# default/web:http (nat KUBE-NODEPORTS)
-A KUBE-NODEPORTS -p tcp -m comment --comment "default/web:http" -m tcp --dport 30080 -j KUBE-EXT-CDGGSHYLG3RE2FKL
# default/web:http (nat KUBE-SVC-CDGGSHYLG3RE2FKL)
-A KUBE-SVC-CDGGSHYLG3RE2FKL ! -s 10.244.0.0/16 -d 10.96.45.7/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment "default/web:http -> 10.244.1.7:8080" -j KUBE-SEP-A4JCWMD6AMIS43DD
# default/web:http -> 10.244.1.7:8080 (nat KUBE-SEP-A4JCWMD6AMIS43DD)
-A KUBE-SEP-A4JCWMD6AMIS43DD -s 10.244.1.7/32 -m comment --comment "default/web:http" -j KUBE-MARK-MASQ
-A KUBE-SEP-A4JCWMD6AMIS43DD -p tcp -m comment --comment "default/web:http" -m tcp -j DNAT --to-destination 10.244.1.7:8080
# default/web:http (nat KUBE-EXT-CDGGSHYLG3RE2FKL)
-A KUBE-EXT-CDGGSHYLG3RE2FKL -m comment --comment "masquerade traffic for default/web:http external destinations" -j KUBE-MARK-MASQ
-A KUBE-EXT-CDGGSHYLG3RE2FKL -j KUBE-SVC-CDGGSHYLG3RE2FKL

# kube-system/kube-dns:dns (nat KUBE-SERVICES)
-A KUBE-SERVICES -d 10.96.0.10/32 -p udp -m comment --comment "kube-system/kube-dns:dns cluster IP" -m udp --dport 53 -j KUBE-SVC-TCOU7JCQXEZGVUNU
# kube-system/kube-dns:dns (nat KUBE-SVC-TCOU7JCQXEZGVUNU)
-A KUBE-SVC-TCOU7JCQXEZGVUNU ! -s 10.244.0.0/16 -d 10.96.0.10/32 -p udp -m comment --comment "kube-system/kube-dns:dns cluster IP" -m udp --dport 53 -j KUBE-MARK-MASQ
-A KUBE-SVC-TCOU7JCQXEZGVUNU -m comment --comment "kube-system/kube-dns:dns -> 10.244.0.3:53" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-6E7XQMQ4RAYOWTTM
-A KUBE-SVC-TCOU7JCQXEZGVUNU -m comment --comment "kube-system/kube-dns:dns -> 10.244.0.4:53" -j KUBE-SEP-WXWGHGKZOCNYRYI7
# kube-system/kube-dns:dns -> 10.244.0.3:53 (nat KUBE-SEP-6E7XQMQ4RAYOWTTM)
-A KUBE-SEP-6E7XQMQ4RAYOWTTM -s 10.244.0.3/32 -m comment --comment "kube-system/kube-dns:dns" -j KUBE-MARK-MASQ
-A KUBE-SEP-6E7XQMQ4RAYOWTTM -p udp -m comment --comment "kube-system/kube-dns:dns" -m udp -j DNAT --to-destination 10.244.0.3:53
# kube-system/kube-dns:dns -> 10.244.0.4:53 (nat KUBE-SEP-WXWGHGKZOCNYRYI7)
-A KUBE-SEP-WXWGHGKZOCNYRYI7 -s 10.244.0.4/32 -m comment --comment "kube-system/kube-dns:dns" -j KUBE-MARK-MASQ
-A KUBE-SEP-WXWGHGKZOCNYRYI7 -p udp -m comment --comment "kube-system/kube-dns:dns" -m udp -j DNAT --to-destination 10.244.0.4:53

# kube-system/kube-dns:dns-tcp (nat KUBE-SERVICES)
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "kube-system/kube-dns:dns-tcp cluster IP" -m tcp --dport 53 -j KUBE-SVC-ERIFXISQEP7F7OF4
# kube-system/kube-dns:dns-tcp (nat KUBE-SVC-ERIFXISQEP7F7OF4)
-A KUBE-SVC-ERIFXISQEP7F7OF4 ! -s 10.244.0.0/16 -d 10.96.0.10/32 -p tcp -m comment --comment "kube-system/kube-dns:dns-tcp cluster IP" -m tcp --dport 53 -j KUBE-MARK-MASQ
-A KUBE-SVC-ERIFXISQEP7F7OF4 -m comment --comment "kube-system/kube-dns:dns-tcp -> 10.244.0.3:53" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-ZXMNUKOKXUTL2MK2
-A KUBE-SVC-ERIFXISQEP7F7OF4 -m comment --comment "kube-system/kube-dns:dns-tcp -> 10.244.0.4:53" -j KUBE-SEP-SF3LG62VAE5ALYDV
# kube-system/kube-dns:dns-tcp -> 10.244.0.3:53 (nat KUBE-SEP-ZXMNUKOKXUTL2MK2)
-A KUBE-SEP-ZXMNUKOKXUTL2MK2 -s 10.244.0.3/32 -m comment --comment "kube-system/kube-dns:dns-tcp" -j KUBE-MARK-MASQ
-A KUBE-SEP-ZXMNUKOKXUTL2MK2 -p tcp -m comment --comment "kube-system/kube-dns:dns-tcp" -m tcp -j DNAT --to-destination 10.244.0.3:53
# kube-system/kube-dns:dns-tcp -> 10.244.0.4:53 (nat KUBE-SEP-SF3LG62VAE5ALYDV)
-A KUBE-SEP-SF3LG62VAE5ALYDV -s 10.244.0.4/32 -m comment --comment "kube-system/kube-dns:dns-tcp" -j KUBE-MARK-MASQ
-A KUBE-SEP-SF3LG62VAE5ALYDV -p tcp -m comment --comment "kube-system/kube-dns:dns-tcp" -m tcp -j DNAT --to-destination 10.244.0.4:53
`,
  );
  t.deepEqual(
    selectServicePorts(all, 'kube-system/kube-dns').map((s) => s.servicePort),
    ['kube-system/kube-dns:dns', 'kube-system/kube-dns:dns-tcp'],
  );
});

test('an unknown or malformed service is one clear error', (t) => {
  const all = serviceChains(parseSave(KUBE_PROXY_SAVE));
  t.throws(() => selectServicePorts(all, 'default/nope'), {
    message: "no rules for service default/nope in the kernel's KUBE-SERVICES chains",
  });
  t.throws(() => selectServicePorts(all, 'default/web:grpc'), {
    message: "no rules for service default/web:grpc in the kernel's KUBE-SERVICES chains",
  });
  t.throws(() => selectServicePorts(all, 'web'), { message: '"web" is not NAMESPACE/NAME or NAMESPACE/NAME:PORT' });
});

test('an empty kernel prints one line', (t) => {
  t.is(formatChains(serviceChains(new Map())), 'no service rules in the kernel\n');
});

test('chainLabel names the service port, and the endpoint of a DNAT chain', (t) => {
  t.is(
    chainLabel([
      '-s 10.244.1.2/32 -m comment --comment "default/web:http" -j KUBE-MARK-MASQ',
      '-p tcp -m comment --comment "default/web:http" -m tcp -j DNAT --to-destination 10.244.1.2:8080',
    ]),
    'default/web:http -> 10.244.1.2:8080',
  );
  t.is(chainLabel(['-m comment --comment "default/web:http -> 10.244.1.2:8080" -j KUBE-SEP-UIQK3OSOSTRHRPBX']), 'default/web:http');
  t.is(chainLabel(['-m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT']), undefined);
});

test('chains follows a KUBE-SVL chain of internalTrafficPolicy Local, and shows the DROP of a port with no local endpoints', async (t) => {
  const fake = new FakeIptables();
  const backend = new IptablesBackend({ exec: fake, render: { clusterCIDR: '10.244.0.0/16', masqueradeAll: false }, logger: silentLogger() });
  const local = { internalTrafficPolicy: 'Local' as const };
  await backend.sync(
    {
      ...snap(
        sp('default/here:http', '10.96.0.12', 80, [ep('10.244.1.2:8080', { nodeName: 'n1' }), ep('10.244.1.3:8080', { nodeName: 'n2' })], local),
        sp('default/away:http', '10.96.0.13', 80, [ep('10.244.1.4:8080', { nodeName: 'n2' })], local),
      ),
      node: { name: 'n1', addresses: [] },
    },
    { full: true, changed: new Set() },
  );
  const all = serviceChains(await readTables(fake));
  t.is(
    formatChains(all),
    `# default/away:http (filter KUBE-SERVICES)
-A KUBE-SERVICES -d 10.96.0.13/32 -p tcp -m comment --comment "default/away:http has no local endpoints" -m tcp --dport 80 -j DROP

# default/here:http (nat KUBE-SERVICES)
-A KUBE-SERVICES -d 10.96.0.12/32 -p tcp -m comment --comment "default/here:http cluster IP" -m tcp --dport 80 -j KUBE-SVL-REL6HL75SFIAEQB5
# default/here:http (nat KUBE-SVL-REL6HL75SFIAEQB5)
-A KUBE-SVL-REL6HL75SFIAEQB5 ! -s 10.244.0.0/16 -d 10.96.0.12/32 -p tcp -m comment --comment "default/here:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVL-REL6HL75SFIAEQB5 -m comment --comment "default/here:http -> 10.244.1.2:8080" -j KUBE-SEP-ZN7QG6Z3LRNPXDE3
# default/here:http -> 10.244.1.2:8080 (nat KUBE-SEP-ZN7QG6Z3LRNPXDE3)
-A KUBE-SEP-ZN7QG6Z3LRNPXDE3 -s 10.244.1.2/32 -m comment --comment "default/here:http" -j KUBE-MARK-MASQ
-A KUBE-SEP-ZN7QG6Z3LRNPXDE3 -p tcp -m comment --comment "default/here:http" -m tcp -j DNAT --to-destination 10.244.1.2:8080
`,
  );
});
