/**
 * The IPv6 ruleset of iptables mode (render.ts with family IPv6, the
 * static6 rules): exact ip6tables-restore input for a dual-stack NodePort
 * Service with endpoints of both families, a single-stack IPv6 one and one
 * without endpoints, as kube-proxy's IPv6 proxier lays them out.
 */
import test from 'ava';
import { familyView } from '../../src/model/family.ts';
import { renderRestore } from '../../src/modes/iptables/snapshot.ts';
import { renderServicePort, UnsafeValueError } from '../../src/modes/iptables/render.ts';
import { loadStatic6Rules } from '../../src/modes/shared/kube-chains/static.ts';
import { iptablesStatics6, nodePortIPs } from '../../src/modes/shared/kube-chains/node-ports.ts';
import { nodePortAddressesArg } from '../../src/cli/options.ts';
import { renderConfig } from '../../src/modes/shared/render-config.ts';
import { buildFrom, recordingLogger } from './model-helpers.ts';

const FIXTURE = 'test/fixtures/dualstack/services.yaml';

test('the IPv6 ruleset of the dual-stack fixture, exactly', async (t) => {
  const r = await buildFrom([FIXTURE]);
  const text = renderRestore(familyView(r.snapshot, 'IPv6'), { masqueradeAll: false, clusterCIDR: 'fd00:10:244::/56', family: 'IPv6' }, [], loadStatic6Rules());
  t.is(
    text,
    [
    `*nat`,
    `:KUBE-SERVICES - [0:0]`,
    `:KUBE-NODEPORTS - [0:0]`,
    `:KUBE-MARK-MASQ - [0:0]`,
    `:KUBE-POSTROUTING - [0:0]`,
    `:KUBE-SVC-WKX6QVXSPBRCFL2N - [0:0]`,
    `:KUBE-SEP-KDP5YBZP6YRC66XH - [0:0]`,
    `:KUBE-EXT-CDGGSHYLG3RE2FKL - [0:0]`,
    `:KUBE-SVC-CDGGSHYLG3RE2FKL - [0:0]`,
    `:KUBE-SEP-C7QP4M2IG43IZ5J2 - [0:0]`,
    `:KUBE-SEP-LQCQRNFEICVQPOSG - [0:0]`,
    `-I PREROUTING 1 ! -d ::1/128 -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`,
    `-I PREROUTING 1 -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
    `-I OUTPUT 1 ! -d ::1/128 -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`,
    `-I OUTPUT 1 -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
    `-I POSTROUTING 1 -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING`,
    `-A KUBE-SERVICES -d fd00:96::20/128 -p tcp -m comment --comment "default/v6only:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-WKX6QVXSPBRCFL2N`,
    `-A KUBE-SERVICES -d fd00:96::10/128 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-CDGGSHYLG3RE2FKL`,
    `-A KUBE-NODEPORTS -p tcp -m comment --comment "default/web:http" -m tcp --dport 30080 -j KUBE-EXT-CDGGSHYLG3RE2FKL`,
    `-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000`,
    `-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN`,
    `-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0`,
    `-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`,
    `-A KUBE-SVC-WKX6QVXSPBRCFL2N ! -s fd00:10:244::/56 -d fd00:96::20/128 -p tcp -m comment --comment "default/v6only:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`,
    `-A KUBE-SVC-WKX6QVXSPBRCFL2N -m comment --comment "default/v6only:http -> [fd00:244:1::4]:8080" -j KUBE-SEP-KDP5YBZP6YRC66XH`,
    `-A KUBE-SEP-KDP5YBZP6YRC66XH -s fd00:244:1::4/128 -m comment --comment "default/v6only:http" -j KUBE-MARK-MASQ`,
    `-A KUBE-SEP-KDP5YBZP6YRC66XH -p tcp -m comment --comment "default/v6only:http" -m tcp -j DNAT --to-destination [fd00:244:1::4]:8080`,
    `-A KUBE-EXT-CDGGSHYLG3RE2FKL -m comment --comment "masquerade traffic for default/web:http external destinations" -j KUBE-MARK-MASQ`,
    `-A KUBE-EXT-CDGGSHYLG3RE2FKL -j KUBE-SVC-CDGGSHYLG3RE2FKL`,
    `-A KUBE-SVC-CDGGSHYLG3RE2FKL ! -s fd00:10:244::/56 -d fd00:96::10/128 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`,
    `-A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment "default/web:http -> [fd00:244:1::2]:8080" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-C7QP4M2IG43IZ5J2`,
    `-A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment "default/web:http -> [fd00:244:1::3]:8080" -j KUBE-SEP-LQCQRNFEICVQPOSG`,
    `-A KUBE-SEP-C7QP4M2IG43IZ5J2 -s fd00:244:1::2/128 -m comment --comment "default/web:http" -j KUBE-MARK-MASQ`,
    `-A KUBE-SEP-C7QP4M2IG43IZ5J2 -p tcp -m comment --comment "default/web:http" -m tcp -j DNAT --to-destination [fd00:244:1::2]:8080`,
    `-A KUBE-SEP-LQCQRNFEICVQPOSG -s fd00:244:1::3/128 -m comment --comment "default/web:http" -j KUBE-MARK-MASQ`,
    `-A KUBE-SEP-LQCQRNFEICVQPOSG -p tcp -m comment --comment "default/web:http" -m tcp -j DNAT --to-destination [fd00:244:1::3]:8080`,
    `COMMIT`,
    `*filter`,
    `:KUBE-SERVICES - [0:0]`,
    `:KUBE-EXTERNAL-SERVICES - [0:0]`,
    `:KUBE-PROXY-FIREWALL - [0:0]`,
    `:KUBE-NODEPORTS - [0:0]`,
    `:KUBE-FORWARD - [0:0]`,
    `-I INPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
    `-I INPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES`,
    `-I INPUT 1 -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS`,
    `-I INPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`,
    `-I FORWARD 1 -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`,
    `-I FORWARD 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES`,
    `-I FORWARD 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
    `-I FORWARD 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`,
    `-I OUTPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
    `-I OUTPUT 1 -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`,
    `-A KUBE-SERVICES -d fd00:96::30/128 -p udp -m comment --comment "default/empty:http has no endpoints" -m udp --dport 80 -j REJECT --reject-with icmp6-port-unreachable`,
    `-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP`,
    `-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT`,
    `-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
    `COMMIT`,
      '',
    ].join('\n'),
  );
});

test('the IPv4 ruleset of the same Services has only IPv4 addresses: the IPv4 ClusterIP and endpoints of the dual-stack Service', async (t) => {
  const r = await buildFrom([FIXTURE]);
  const text = renderRestore(familyView(r.snapshot, 'IPv4'), { masqueradeAll: false, clusterCIDR: '10.244.0.0/16' });
  t.false(text.includes('fd00'));
  t.regex(text, /-A KUBE-SERVICES -d 10\.96\.0\.10\/32 -p tcp -m comment --comment "default\/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-CDGGSHYLG3RE2FKL\n/);
  t.regex(text, /-j DNAT --to-destination 10\.244\.1\.2:8080\n/);
  t.regex(text, /-A KUBE-SERVICES -d 10\.96\.0\.30\/32 -p udp -m comment --comment "default\/empty:http has no endpoints" -m udp --dport 80 -j REJECT --reject-with icmp-port-unreachable\n/);
  t.false(text.includes('v6only'));
});

test('ClientIP affinity in IPv6 uses the 128-bit recent mask', async (t) => {
  const r = await buildFrom([FIXTURE]);
  const sp = familyView(r.snapshot, 'IPv6').services.get('default/v6only:http')!;
  const rules = renderServicePort({ ...sp, sessionAffinity: { timeoutSeconds: 60 } }, { masqueradeAll: false, family: 'IPv6' });
  const sep = [...rules.chains.keys()].find((c) => c.startsWith('KUBE-SEP-'))!;
  t.deepEqual(rules.chains.get(sep), [
    `-s fd00:244:1::4/128 -m comment --comment "default/v6only:http" -j KUBE-MARK-MASQ`,
    `-p tcp -m comment --comment "default/v6only:http" -m recent --set --name ${sep} --mask ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff --rsource -m tcp -j DNAT --to-destination [fd00:244:1::4]:8080`,
  ]);
});

test('an address of the other family never reaches a ruleset', async (t) => {
  const r = await buildFrom([FIXTURE]);
  const v4 = familyView(r.snapshot, 'IPv4').services.get('default/web:http')!;
  // An IPv4 service port rendered as IPv6 (a caller's mistake) is refused, not written.
  t.throws(() => renderServicePort(v4, { masqueradeAll: false, family: 'IPv6' }), { instanceOf: UnsafeValueError });
  const v6 = familyView(r.snapshot, 'IPv6').services.get('default/web:http')!;
  t.throws(() => renderServicePort(v6, { masqueradeAll: false }), { instanceOf: UnsafeValueError });
});

test('--cluster-cidr with one CIDR per family gives each ruleset its own', (t) => {
  const opts = { clusterCidr: '10.244.0.0/16,fd00:10:244::/56', masqueradeAll: false } as Parameters<typeof renderConfig>[0];
  t.deepEqual(renderConfig(opts), { masqueradeAll: false, clusterCIDR: '10.244.0.0/16' });
  t.deepEqual(renderConfig(opts, 'IPv6'), { masqueradeAll: false, clusterCIDR: 'fd00:10:244::/56', family: 'IPv6' });
  t.deepEqual(renderConfig({ ...opts, clusterCidr: '10.244.0.0/16' }, 'IPv6'), { masqueradeAll: false, family: 'IPv6' });
});

test('--nodeport-addresses for IPv6: the IPv6 CIDRs pick this node IPv6 addresses (not ::1), one nodeports hook each, -d IP/128; no IPv6 CIDR or ::/0 means every address', (t) => {
  const cidrs = nodePortAddressesArg('10.0.0.0/8,fd00:100::/64,::1/128');
  const local = ['fd00:100::1', 'fd00:100::7', 'fd00:244::1', '::1', '10.0.0.1'];
  t.deepEqual(nodePortIPs(cidrs, local, 'IPv6'), { ips: ['fd00:100::1', 'fd00:100::7'], loopback: ['::1'] });
  t.deepEqual(nodePortIPs(cidrs, local), { ips: ['10.0.0.1'], loopback: [] }, 'the IPv4 family reads its own CIDRs');
  t.deepEqual(nodePortIPs(nodePortAddressesArg('10.0.0.0/8'), local, 'IPv6'), { loopback: [] });
  t.deepEqual(nodePortIPs(nodePortAddressesArg('fd00:100::/64,::/0'), local, 'IPv6'), { loopback: [] });
  const statics = loadStatic6Rules(['fd00:100::1', 'fd00:100::7']);
  t.deepEqual(
    statics.hooks.filter((h) => h.rule.endsWith('-j KUBE-NODEPORTS') && h.table === 'nat').map((h) => `${h.chain} ${h.rule}`),
    [
      'PREROUTING -d fd00:100::1/128 -m comment --comment "kubernetes service nodeports" -j KUBE-NODEPORTS',
      'PREROUTING -d fd00:100::7/128 -m comment --comment "kubernetes service nodeports" -j KUBE-NODEPORTS',
      'OUTPUT -d fd00:100::1/128 -m comment --comment "kubernetes service nodeports" -j KUBE-NODEPORTS',
      'OUTPUT -d fd00:100::7/128 -m comment --comment "kubernetes service nodeports" -j KUBE-NODEPORTS',
    ],
  );
  t.throws(() => loadStatic6Rules(['10.0.0.1']), { message: 'refusing to render NodePort address "10.0.0.1": not a canonical IPv6 address' });
  t.throws(() => loadStatic6Rules(['FD00::1']), { message: 'refusing to render NodePort address "FD00::1": not a canonical IPv6 address' });
});

test('--nodeport-addresses with an IPv6 CIDR whose addresses cannot be read: IPv6 gets no NodePort hook and a warning; nothing is thrown', async (t) => {
  const { logger, lines } = recordingLogger();
  const statics = await iptablesStatics6(nodePortAddressesArg('fd00:100::/64'), 'drover-test-no-such-netns', logger);
  const nodePortHooks = statics.hooks.filter((h) => h.table === 'nat' && h.rule.includes('KUBE-NODEPORTS'));
  t.deepEqual(nodePortHooks, []);
  t.true(loadStatic6Rules().hooks.some((h) => h.table === 'nat' && h.rule.includes('KUBE-NODEPORTS')), 'the default ruleset has nodeports hooks');
  t.true(lines.some((l) => /IPv6 NodePorts are not served/.test(String(l.msg))));
});
