import test from 'ava';
import { canonicalRule, savedProbability } from '../../src/kernel/iptables/canonical.ts';
import { renderRestore } from '../../src/modes/iptables/snapshot.ts';
import { probability, renderServicePort, UnsafeValueError } from '../../src/modes/iptables/render.ts';
import { sharedRule } from '../../src/modes/shared/kube-chains/service-rules.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

const render = { clusterCIDR: '10.0.0.0/8', masqueradeAll: false };

/** The filter table of a full render, with `rejects` in KUBE-SERVICES. */
const FILTER = (rejects = '') => `*filter
:KUBE-SERVICES - [0:0]
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-FORWARD - [0:0]
-I INPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-I INPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-I INPUT 1 -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS
-I INPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-I FORWARD 1 -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-I FORWARD 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-I FORWARD 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-I FORWARD 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-I OUTPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-I OUTPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
${rejects}-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
COMMIT
`;
const NAT_HOOKS = `-I PREROUTING 1 ! -d 127.0.0.0/8 -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-I PREROUTING 1 -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-I OUTPUT 1 ! -d 127.0.0.0/8 -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-I OUTPUT 1 -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-I POSTROUTING 1 -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
`;
const NAT_STATIC_RULES = `-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
`;

test('one service with two endpoints: exact ruleset', (t) => {
  const text = renderRestore(snap(sp('ns1/svc1:p80', '172.30.0.41', 80, [ep('10.180.0.1:80'), ep('10.180.0.2:80')])), render);
  t.is(
    text,
    `*nat
:KUBE-SERVICES - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
:KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]
:KUBE-SEP-LXVODXWDISEETFEF - [0:0]
` +
      NAT_HOOKS +
      `-A KUBE-SERVICES -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
` +
      NAT_STATIC_RULES +
      `-A KUBE-SVC-XPGD46QRK7WJZT7O ! -s 10.0.0.0/8 -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-SXIVWICOYRO3J4NJ
-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.2:80" -j KUBE-SEP-LXVODXWDISEETFEF
-A KUBE-SEP-SXIVWICOYRO3J4NJ -s 10.180.0.1/32 -m comment --comment "ns1/svc1:p80" -j KUBE-MARK-MASQ
-A KUBE-SEP-SXIVWICOYRO3J4NJ -p tcp -m comment --comment "ns1/svc1:p80" -m tcp -j DNAT --to-destination 10.180.0.1:80
-A KUBE-SEP-LXVODXWDISEETFEF -s 10.180.0.2/32 -m comment --comment "ns1/svc1:p80" -j KUBE-MARK-MASQ
-A KUBE-SEP-LXVODXWDISEETFEF -p tcp -m comment --comment "ns1/svc1:p80" -m tcp -j DNAT --to-destination 10.180.0.2:80
COMMIT
` + FILTER(),
  );
});

test('a service port with no endpoints gets only a REJECT in filter KUBE-SERVICES', (t) => {
  const text = renderRestore(snap(sp('ns2/svc2:p8080', '172.30.0.42', 8080, [], { protocol: 'UDP' })), render);
  t.is(
    text,
    `*nat
:KUBE-SERVICES - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-POSTROUTING - [0:0]
` +
      NAT_HOOKS +
      NAT_STATIC_RULES +
      'COMMIT\n' +
      FILTER(
        '-A KUBE-SERVICES -d 172.30.0.42/32 -p udp -m comment --comment "ns2/svc2:p8080 has no endpoints" -m udp --dport 8080 -j REJECT --reject-with icmp-port-unreachable\n',
      ),
  );
});

test('endpoints that are not ready do not serve; none ready or serving-terminating means REJECT', (t) => {
  const rules = renderServicePort(
    sp('ns1/svc1:p80', '172.30.0.41', 80, [ep('10.180.0.1:80', { ready: false, serving: false, terminating: true }), ep('10.180.0.2:80', { ready: false, serving: false })]),
    render,
  );
  t.is((sharedRule(rules, 'nat') ?? null), null);
  t.is(rules.chains.size, 0);
  t.regex(sharedRule(rules, 'filter') ?? '', /has no endpoints/);
});

test('with no ready endpoint, the serving-terminating ones serve (kube-proxy, KEP-1669)', (t) => {
  const rules = renderServicePort(
    sp('ns1/svc1:p80', '172.30.0.41', 80, [
      ep('10.180.0.1:80', { ready: false, serving: true, terminating: true }),
      ep('10.180.0.2:80', { ready: false, serving: false, terminating: true }),
    ]),
    render,
  );
  t.is((sharedRule(rules, 'filter') ?? null), null);
  t.regex(sharedRule(rules, 'nat') ?? '', /-j KUBE-SVC-/);
  t.is(rules.chains.size, 2);
  t.true([...rules.chains.values()].flat().some((r) => r.includes('--to-destination 10.180.0.1:80')));
  t.false([...rules.chains.values()].flat().some((r) => r.includes('10.180.0.2')));
});

test('probabilities: rule i of n is 1/(n-i) with 10 decimals, the last unconditional', (t) => {
  const eps = ['10.1.0.1:80', '10.1.0.2:80', '10.1.0.3:80', '10.1.0.4:80'].map((e) => ep(e));
  const svc = renderServicePort(sp('ns/s:p', '10.96.0.1', 80, eps), { masqueradeAll: false });
  const rules = [...svc.chains.values()][0]!;
  t.deepEqual(
    rules.map((r) => /--probability (\S+)/.exec(r)?.[1] ?? 'last'),
    ['0.2500000000', '0.3333333333', '0.5000000000', 'last'],
  );
  t.is(probability(0, 3), '0.3333333333');
});

test('masquerade-all marks every packet; no cluster CIDR and no masquerade-all marks nothing', (t) => {
  const svc = sp('ns/s:p', '10.96.0.1', 80, [ep('10.1.0.1:80')]);
  const all = [...renderServicePort(svc, { masqueradeAll: true }).chains.values()][0]!;
  t.is(all[0], '-d 10.96.0.1/32 -p tcp -m comment --comment "ns/s:p cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ');
  const none = [...renderServicePort(svc, { masqueradeAll: false }).chains.values()][0]!;
  t.deepEqual(none, ['-m comment --comment "ns/s:p -> 10.1.0.1:80" -j KUBE-SEP-' + none[0]!.split('KUBE-SEP-')[1]]);
  t.false(none.some((r) => r.includes('KUBE-MARK-MASQ')));
});

test('ClientIP session affinity uses recent, as kube-proxy', (t) => {
  const svc = sp('ns1/svc1:p80', '172.30.0.41', 80, [ep('10.180.0.1:80')], { sessionAffinity: { timeoutSeconds: 10800 } });
  const r = renderServicePort(svc, render);
  t.deepEqual(r.chains.get('KUBE-SVC-XPGD46QRK7WJZT7O'), [
    '! -s 10.0.0.0/8 -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ',
    '-m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -m recent --rcheck --seconds 10800 --reap --name KUBE-SEP-SXIVWICOYRO3J4NJ --mask 255.255.255.255 --rsource -j KUBE-SEP-SXIVWICOYRO3J4NJ',
    '-m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ',
  ]);
  t.deepEqual(r.chains.get('KUBE-SEP-SXIVWICOYRO3J4NJ'), [
    '-s 10.180.0.1/32 -m comment --comment "ns1/svc1:p80" -j KUBE-MARK-MASQ',
    '-p tcp -m comment --comment "ns1/svc1:p80" -m recent --set --name KUBE-SEP-SXIVWICOYRO3J4NJ --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.180.0.1:80',
  ]);
});

test('the renderer refuses values that could inject options or lines', (t) => {
  const good = sp('ns/s:p', '10.96.0.1', 80, [ep('10.1.0.1:80')]);
  t.throws(() => renderServicePort({ ...good, key: 'ns/s:p" -j ACCEPT' }, render), { instanceOf: UnsafeValueError });
  t.throws(() => renderServicePort({ ...good, clusterIP: '10.96.0.1\n-A INPUT -j ACCEPT' }, render), { instanceOf: UnsafeValueError });
  t.throws(() => renderServicePort({ ...good, endpoints: [ep('10.1.0.1:0')] }, render), { instanceOf: UnsafeValueError });
  t.throws(() => renderServicePort(good, { clusterCIDR: '10.0.0.0/8 -j DROP', masqueradeAll: false }), {
    instanceOf: UnsafeValueError,
  });
});

test('canonical form: probabilities as iptables-save prints them back', (t) => {
  t.is(savedProbability('0.3333333333'), '0.33333333349');
  t.is(savedProbability('0.5000000000'), '0.50000000000');
  t.is(savedProbability('0.1000000000'), '0.10000000009');
  const rule = '-m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-X';
  t.is(canonicalRule(rule), '-m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-X');
  t.is(canonicalRule(canonicalRule(rule)), canonicalRule(rule));
});

test("internalTrafficPolicy Local: ClusterIP traffic goes to this node's endpoints through KUBE-SVL; a DROP when only other nodes have endpoints", (t) => {
  const port = sp('ns1/svc1:p80', '172.30.0.41', 80, [ep('10.180.0.1:80', { nodeName: 'n1' }), ep('10.180.0.2:80', { nodeName: 'n2' })], { internalTrafficPolicy: 'Local' });
  const here = renderServicePort(port, render, { name: 'n1', addresses: [] });
  t.deepEqual(
    [(sharedRule(here, 'nat') ?? null), (sharedRule(here, 'filter') ?? null), [...here.chains]],
    [
      '-d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-SVL-XPGD46QRK7WJZT7O',
      null,
      [
        [
          'KUBE-SVL-XPGD46QRK7WJZT7O',
          [
            '! -s 10.0.0.0/8 -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ',
            '-m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ',
          ],
        ],
        [
          'KUBE-SEP-SXIVWICOYRO3J4NJ',
          ['-s 10.180.0.1/32 -m comment --comment "ns1/svc1:p80" -j KUBE-MARK-MASQ', '-p tcp -m comment --comment "ns1/svc1:p80" -m tcp -j DNAT --to-destination 10.180.0.1:80'],
        ],
      ],
    ],
  );
  const elsewhere = renderServicePort(port, render, { name: 'n3', addresses: [] });
  t.deepEqual(
    [(sharedRule(elsewhere, 'nat') ?? null), (sharedRule(elsewhere, 'filter') ?? null), elsewhere.chains.size],
    [null, '-d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 has no local endpoints" -m tcp --dport 80 -j DROP', 0],
  );
  const none = renderServicePort({ ...port, endpoints: [] }, render, { name: 'n1', addresses: [] });
  t.regex(sharedRule(none, 'filter') ?? '', /has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable$/);
});
