/**
 * IPv6 and dual-stack in IPVS mode: the desired state of an IPv6 view
 * (virtual servers, KUBE-6- sets, /128 addresses), `render --mode ipvs` of
 * a dual-stack source, and the dual-stack backend on in-memory fakes
 * (both families programmed, adopted on restart, cleaned up).
 */
import test from 'ava';
import { desiredIpvsState } from '../../src/modes/ipvs/assemble.ts';
import { renderIpvsFamilies } from '../../src/modes/ipvs/operations.ts';
import { DualStackIpvsBackend } from '../../src/modes/ipvs/dual-stack.ts';
import { IpvsCleanupError } from '../../src/modes/ipvs/backend.ts';
import { FakeIptables } from '../../src/kernel/iptables/fake.ts';
import { familySetName, swapSetName } from '../../src/modes/ipvs/ipset.ts';
import { ipvsStaticRules } from '../../src/modes/ipvs/rules.ts';
import { nodeAddresses } from '../../src/modes/ipvs/node-ips.ts';
import { familyView } from '../../src/model/family.ts';
import type { ServicePort } from '../../src/model/types.ts';
import { silentLogger } from '../../src/util/log.ts';
import { dualSnap, ep, sp } from '../support/snapshots.ts';
import { World } from '../support/ipvs-world.ts';
import { readIpvsLive, ipvsCounts } from '../../src/modes/ipvs/live.ts';
import { formatIpvsChains, ipvsServicePortViews } from '../../src/modes/ipvs/chains.ts';
import { ipvsStatusLines } from '../../src/modes/ipvs/operations.ts';
import { endpointPods } from '../../src/model/pods.ts';
import { formatIpvsDrift, ipv6DriftWanted, ipvsDrift } from '../../src/modes/ipvs/diff.ts';

const NODE6 = { nodePortIPs: ['fd00:1::10'], hostAddresses: ['fd00:1::10'] };
const NODE4 = { nodePortIPs: ['192.168.1.10'], hostAddresses: ['192.168.1.10'] };

/** A NodePort service port of either family. */
const nodePort = (clusterIP: string, endpoints: string[]): ServicePort =>
  sp('default/web:http', clusterIP, 80, endpoints.map((e) => ep(e)), { type: 'NodePort', frontends: { ...sp('x/y:z', clusterIP, 80, []).frontends, nodePort: 30080 } });

const web4 = nodePort('10.96.0.10', ['10.244.1.2:8080', '10.244.1.3:8080']);
const web6 = nodePort('fd00:10:96::a', ['[fd00:10:244:1::2]:8080', '[fd00:10:244:1::3]:8080']);
const v6only = sp('default/v6:dns', 'fd00:10:96::35', 53, [ep('[fd00:10:244:2::2]:53')], { protocol: 'UDP', sessionAffinity: { timeoutSeconds: 600 } });
const dual = () => dualSnap([web4], [web6, v6only]);

test('IPv6 names of the sets are kube-proxy\'s: KUBE-6- for KUBE-, cut to 31 characters; scratch sets fit too', (t) => {
  t.is(familySetName('KUBE-CLUSTER-IP', 'IPv6'), 'KUBE-6-CLUSTER-IP');
  t.is(familySetName('KUBE-CLUSTER-IP', 'IPv4'), 'KUBE-CLUSTER-IP');
  t.is(familySetName('KUBE-LOAD-BALANCER-SOURCE-CIDR', 'IPv6'), 'KUBE-6-LOAD-BALANCER-SOURCE-CID');
  t.is(swapSetName('KUBE-6-NODE-PORT-LOCAL-SCTP'), 'KUBE-6-NP-LOCAL-SCTP-SWAP');
  t.is(swapSetName('KUBE-6-LOAD-BALANCER-SOURCE-CID'), 'KUBE-6-LB-SOURCE-CID-SWAP');
  // IPv4 scratch names are unchanged.
  t.is(swapSetName('KUBE-NODE-PORT-LOCAL-SCTP'), 'KUBE-NODE-PORT-LOCAL-SCTP-SWAP');
});

test('desired state of the IPv6 view: ClusterIP and NodePort virtual servers, prefix-length persistence, IPv6 set entries, /128 addresses', (t) => {
  const d = desiredIpvsState(familyView(dual(), 'IPv6'), { scheduler: 'rr', nodeAddresses: NODE6 });
  t.deepEqual([...d.virtualServers.keys()], ['TCP/fd00:10:96::a:80', 'TCP/fd00:1::10:30080', 'UDP/fd00:10:96::35:53']);
  const cluster = d.virtualServers.get('TCP/fd00:10:96::a:80')!;
  t.deepEqual(cluster.vs, { protocol: 'TCP', address: 'fd00:10:96::a', port: 80, scheduler: 'rr', netmask: 128 });
  t.deepEqual([...cluster.reals.keys()], ['fd00:10:244:1::2:8080', 'fd00:10:244:1::3:8080']);
  t.deepEqual(d.virtualServers.get('UDP/fd00:10:96::35:53')!.vs, { protocol: 'UDP', address: 'fd00:10:96::35', port: 53, scheduler: 'rr', persistent: { timeoutSeconds: 600 }, netmask: 128 });
  t.deepEqual(d.addresses, ['fd00:10:96::a', 'fd00:10:96::35']);
  t.deepEqual([...d.clusterIPSet].sort(), ['fd00:10:96::35,udp:53', 'fd00:10:96::a,tcp:80']);
  t.deepEqual([...d.loopBackSet].sort(), ['fd00:10:244:1::2,tcp:8080,fd00:10:244:1::2', 'fd00:10:244:1::3,tcp:8080,fd00:10:244:1::3', 'fd00:10:244:2::2,udp:53,fd00:10:244:2::2']);
  t.deepEqual([...d.sets['KUBE-NODE-PORT-TCP']], ['30080']);
  t.deepEqual([...d.sets['KUBE-IPVS-IPS']].sort(), ['fd00:10:96::35', 'fd00:10:96::a']);
  // The IPv4 view has the IPv4 service port only.
  const d4 = desiredIpvsState(familyView(dual(), 'IPv4'), { scheduler: 'rr', nodeAddresses: NODE4 });
  t.deepEqual([...d4.virtualServers.keys()], ['TCP/10.96.0.10:80', 'TCP/192.168.1.10:30080']);
});

test('node addresses of IPv6: global ones get NodePorts; loopback and link-local do not; kube-ipvs0 is not the host\'s', (t) => {
  const info = (address: string, family: 'IPv4' | 'IPv6') => ({ address, family, netmask: '', mac: '', internal: false, cidr: null, ...(family === 'IPv6' ? { scopeid: 0 } : {}) });
  const interfaces = {
    lo: [info('127.0.0.1', 'IPv4'), info('::1', 'IPv6')],
    eth0: [info('192.168.1.10', 'IPv4'), info('fd00:1::10', 'IPv6'), info('fe80::1', 'IPv6')],
    'kube-ipvs0': [info('fd00:10:96::a', 'IPv6')],
  } as unknown as Parameters<typeof nodeAddresses>[1];
  t.deepEqual(nodeAddresses(undefined, interfaces, 'IPv6'), { nodePortIPs: ['fd00:1::10'], hostAddresses: ['::1', 'fd00:1::10', 'fe80::1'] });
  t.deepEqual(nodeAddresses(undefined, interfaces), { nodePortIPs: ['192.168.1.10'], hostAddresses: ['127.0.0.1', '192.168.1.10'] });
});

test('render --mode ipvs of a dual-stack source: the IPv4 view, then the IPv6 one with its sysctl, KUBE-6- sets of family inet6, ip6tables rules, /128 addresses and [address]:port servers', (t) => {
  const { text, leftOut } = renderIpvsFamilies(dual(), { render: { masqueradeAll: false, clusterCidr: '10.244.0.0/16,fd00:10:244::/56' }, modes: {} }, [], (f) => (f === 'IPv6' ? NODE6 : NODE4));
  t.deepEqual(leftOut, []);
  const at = text.indexOf('# the IPv6 view of the source');
  t.true(at > 0);
  const v4 = text.slice(0, at);
  const v6 = text.slice(at);
  t.true(v4.includes('-A -t 10.96.0.10:80 -s rr\n') && !v4.includes('fd00'), 'the IPv4 part holds the IPv4 view only');
  const section = (title: string): string => {
    const start = v6.indexOf(`# ${title}\n`);
    const end = v6.indexOf('\n# ', start + 1);
    return v6.slice(start, end < 0 ? undefined : end + 1);
  };
  t.is(section('sysctls'), '# sysctls\n', 'IPv6 forwarding is left to the node, as kube-proxy leaves it');
  const sets = section('ipset restore -exist');
  t.true(sets.includes('create KUBE-6-CLUSTER-IP hash:ip,port family inet6 hashsize 1024 maxelem 65536\n'));
  t.true(sets.includes('create KUBE-6-NODE-PORT-TCP bitmap:port range 0-65535\n'));
  t.true(sets.includes('add KUBE-6-CLUSTER-IP fd00:10:96::a,tcp:80\nadd KUBE-6-CLUSTER-IP fd00:10:96::35,udp:53\n') || sets.includes('add KUBE-6-CLUSTER-IP fd00:10:96::35,udp:53\nadd KUBE-6-CLUSTER-IP fd00:10:96::a,tcp:80\n'));
  t.true(sets.includes('add KUBE-6-LOOP-BACK fd00:10:244:1::2,tcp:8080,fd00:10:244:1::2\n'));
  t.true(sets.includes('add KUBE-6-NODE-PORT-TCP 30080\n'));
  t.false(/ KUBE-(?!6-)/.test(sets), 'no IPv4 set name in the IPv6 part');
  const rules = v6.slice(v6.indexOf('# ip6tables-restore --noflush\n'), v6.indexOf('# kube-ipvs0'));
  t.true(rules.includes('-A KUBE-SERVICES ! -s fd00:10:244::/56 -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-6-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ\n'), rules);
  t.true(rules.includes('--match-set KUBE-6-IPVS-IPS dst -j REJECT --reject-with icmp6-port-unreachable\n'));
  t.is(section('kube-ipvs0 (dummy, left down): addresses'), '# kube-ipvs0 (dummy, left down): addresses\nfd00:10:96::a/128\nfd00:10:96::35/128\n');
  t.is(
    section('ipvsadm -R (the form ipvsadm -S -n prints)'),
    [
      '# ipvsadm -R (the form ipvsadm -S -n prints)',
      '-A -t [fd00:1::10]:30080 -s rr',
      '-a -t [fd00:1::10]:30080 -r [fd00:10:244:1::2]:8080 -m -w 1',
      '-a -t [fd00:1::10]:30080 -r [fd00:10:244:1::3]:8080 -m -w 1',
      '-A -t [fd00:10:96::a]:80 -s rr',
      '-a -t [fd00:10:96::a]:80 -r [fd00:10:244:1::2]:8080 -m -w 1',
      '-a -t [fd00:10:96::a]:80 -r [fd00:10:244:1::3]:8080 -m -w 1',
      '-A -u [fd00:10:96::35]:53 -s rr -p 600',
      '-a -u [fd00:10:96::35]:53 -r [fd00:10:244:2::2]:53 -m -w 1',
      '',
    ].join('\n'),
  );
  // An IPv4-only source renders no IPv6 part.
  t.false(renderIpvsFamilies(dualSnap([web4], []), { render: { masqueradeAll: false }, modes: {} }, [], () => NODE4).text.includes('IPv6 view'));
});

test('the IPv6 rules refuse an IPv4 cluster CIDR, and the IPv4 rules an IPv6 one', (t) => {
  t.throws(() => ipvsStaticRules({ masqueradeAll: false, clusterCIDR: '10.244.0.0/16' }, undefined, 'IPv6'), { message: /not a valid IPv6 CIDR/ });
  t.throws(() => ipvsStaticRules({ masqueradeAll: false, clusterCIDR: 'fd00:10:244::/56' }), { message: /not a valid IPv4 CIDR/ });
});

/** The dual-stack backend on a World's fakes, with an ip6tables fake of its own. */
function dualBackend(w: World, ip6tables: FakeIptables): DualStackIpvsBackend {
  return new DualStackIpvsBackend({
    shared: { ipvs: w.ipvs, ipset: w.ipset, links: w.links, sysctls: w.sysctls, scheduler: 'rr', gracefulPeriodMs: 60_000, gracefulCheckIntervalMs: 0, now: () => w.clock },
    IPv4: { iptables: w.iptables, render: { clusterCIDR: '10.244.0.0/16', masqueradeAll: false }, serviceCIDR: '10.96.0.0/12', nodeAddresses: NODE4 },
    IPv6: { iptables: ip6tables, render: { clusterCIDR: 'fd00:10:244::/56', masqueradeAll: false, family: 'IPv6' }, nodeAddresses: NODE6 },
    logger: silentLogger(),
  });
}

test('dual-stack backend: both families programmed side by side, a restart writes nothing, cleanup removes both and then kube-ipvs0', async (t) => {
  const w = new World();
  const ip6tables = new FakeIptables();
  const backend = dualBackend(w, ip6tables);
  const r = await backend.sync(dual(), { full: true, changed: new Set() });
  t.is(r.services, 2);
  const dump = (await w.ipvs.dumpServices()).entries.map((s) => `${s.protocol}/${s.address}:${s.port}`).sort();
  t.deepEqual(dump, ['TCP/10.96.0.10:80', 'TCP/192.168.1.10:30080', 'TCP/fd00:10:96::a:80', 'TCP/fd00:1::10:30080', 'UDP/fd00:10:96::35:53']);
  t.deepEqual((await w.ipvs.dumpDests({ protocol: 'TCP', address: 'fd00:10:96::a', port: 80 })).entries.map((d) => `${d.address}:${d.port} w${d.weight} ${d.forwarding}`), [
    'fd00:10:244:1::2:8080 w1 masq',
    'fd00:10:244:1::3:8080 w1 masq',
  ]);
  t.deepEqual(w.links.addressesOf('kube-ipvs0'), ['10.96.0.10/32', 'fd00:10:96::35/128', 'fd00:10:96::a/128']);
  t.deepEqual(w.ipset.entries('KUBE-CLUSTER-IP'), ['10.96.0.10,tcp:80']);
  t.deepEqual(w.ipset.entries('KUBE-6-CLUSTER-IP'), ['fd00:10:96::35,udp:53', 'fd00:10:96::a,tcp:80']);
  t.deepEqual(w.ipset.entries('KUBE-6-NODE-PORT-TCP'), ['30080']);
  t.true((await w.ipset.save()).includes('create KUBE-6-CLUSTER-IP hash:ip,port family inet6'));
  t.true(ip6tables.restores.join('').includes('--match-set KUBE-6-CLUSTER-IP dst,dst'));
  t.false(w.iptables.restores.join('').includes('KUBE-6-'));
  t.is(w.sysctls.values.get('net.ipv6.conf.all.forwarding'), '0', 'IPv6 forwarding is left to the node (accept_ra=1 would stop taking router advertisements)');

  // A restart adopts both families: nothing is written.
  const before = [...w.writes(), ip6tables.restores.length];
  const again = dualBackend(w, ip6tables);
  await again.sync(dual(), { full: true, changed: new Set() });
  t.deepEqual([...w.writes(), ip6tables.restores.length], before);
  t.is(await again.driftCheck(), undefined);

  // The IPv6 service port goes: only its virtual server, entries and address go.
  await again.sync(dualSnap([web4], [web6]), { full: false, changed: new Set(['default/v6:dns']) });
  t.deepEqual(w.links.addressesOf('kube-ipvs0'), ['10.96.0.10/32', 'fd00:10:96::a/128']);
  t.deepEqual(w.ipset.entries('KUBE-6-CLUSTER-IP'), ['fd00:10:96::a,tcp:80']);
  t.is(await w.ipvs.getService({ protocol: 'UDP', address: 'fd00:10:96::35', port: 53 }), undefined);

  const c = await again.cleanup();
  t.is(c.removed['virtual server'], 4);
  t.is(c.removed.link, 1);
  t.deepEqual((await w.ipvs.dumpServices()).entries, []);
  t.is(w.links.addressesOf('kube-ipvs0'), undefined);
  t.is(w.ipset.entries('KUBE-6-CLUSTER-IP'), undefined);
  t.is(w.ipset.entries('KUBE-CLUSTER-IP'), undefined);
});

test('dual-stack backend: an IPv4-only source never touches the IPv6 side', async (t) => {
  const w = new World();
  const ip6tables = new FakeIptables();
  await dualBackend(w, ip6tables).sync(dualSnap([web4], []), { full: true, changed: new Set() });
  t.deepEqual(ip6tables.restores, []);
  t.is(w.ipset.entries('KUBE-6-CLUSTER-IP'), undefined);
  t.deepEqual(w.links.addressesOf('kube-ipvs0'), ['10.96.0.10/32']);
});

test('IPv6 external IP and LoadBalancer IP with IPv6 source ranges under externalTrafficPolicy Local: their virtual servers and KUBE-6- set entries', (t) => {
  const lb6: ServicePort = {
    ...sp('default/lb:http', 'fd00:10:96::50', 80, [ep('[fd00:10:244:1::2]:8080', { nodeName: 'here' }), ep('[fd00:10:244:2::2]:8080', { nodeName: 'there' })]),
    type: 'LoadBalancer',
    externalTrafficPolicy: 'Local',
    frontends: {
      clusterIPs: [{ family: 'IPv6', ip: 'fd00:10:96::50' }],
      externalIPs: [{ family: 'IPv4', ip: '198.51.100.7' }, { family: 'IPv6', ip: '2001:db8::7' }],
      loadBalancerIngress: [{ family: 'IPv6', ip: '2001:db8::10', ipMode: 'VIP' }],
      loadBalancerSourceRanges: ['10.0.0.0/8', '2001:db8:1::/48', 'fd00:1::/64'],
    },
  };
  const node = { name: 'here', labels: {}, addresses: [{ type: 'InternalIP' as const, address: 'fd00:1::10' }] };
  const d = desiredIpvsState({ services: new Map([[lb6.key, lb6]]), node }, { scheduler: 'rr', nodeAddresses: NODE6 });
  t.deepEqual([...d.virtualServers.keys()], ['TCP/2001:db8::10:80', 'TCP/2001:db8::7:80', 'TCP/fd00:10:96::50:80']);
  // Policy Local: only this node's endpoint behind the external frontends, the cluster set behind the ClusterIP.
  t.deepEqual([...d.virtualServers.get('TCP/2001:db8::10:80')!.reals.keys()], ['fd00:10:244:1::2:8080']);
  t.deepEqual([...d.virtualServers.get('TCP/fd00:10:96::50:80')!.reals.keys()], ['fd00:10:244:1::2:8080', 'fd00:10:244:2::2:8080']);
  t.deepEqual([...d.sets['KUBE-EXTERNAL-IP-LOCAL']], ['2001:db8::7,tcp:80']);
  t.deepEqual([...d.sets['KUBE-LOAD-BALANCER-LOCAL']], ['2001:db8::10,tcp:80']);
  t.deepEqual([...d.sets['KUBE-LOAD-BALANCER-FW']], ['2001:db8::10,tcp:80']);
  // The IPv6 ranges only; the node's InternalIP is in fd00:1::/64, so the VIP is let in as its own source.
  t.deepEqual([...d.sets['KUBE-LOAD-BALANCER-SOURCE-CIDR']].sort(), ['2001:db8::10,tcp:80,2001:db8:1::/48', '2001:db8::10,tcp:80,fd00:1::/64']);
  t.deepEqual([...d.sets['KUBE-LOAD-BALANCER-SOURCE-IP']], ['2001:db8::10,tcp:80,2001:db8::10']);
  t.deepEqual(d.addresses, ['2001:db8::7', '2001:db8::10', 'fd00:10:96::50']);
});

test('an IPv6-only Service without a NodePort: its IPv6 external IP and LoadBalancer IP get their virtual servers, set entries and /128 bindings', (t) => {
  const frontends = (extra: Partial<ServicePort['frontends']>): ServicePort['frontends'] => ({ clusterIPs: [{ family: 'IPv6', ip: 'fd00:10:96::60' }], externalIPs: [], loadBalancerIngress: [], loadBalancerSourceRanges: [], ...extra });
  const eps = [ep('[fd00:10:244:1::2]:8080')];
  const ext6 = sp('default/ext:http', 'fd00:10:96::60', 80, eps, { frontends: frontends({ externalIPs: [{ family: 'IPv6', ip: '2001:db8::7' }] }) });
  const lb6 = sp('default/lb:http', 'fd00:10:96::61', 80, eps, {
    type: 'LoadBalancer',
    frontends: { ...frontends({ loadBalancerIngress: [{ family: 'IPv6', ip: '2001:db8::10', ipMode: 'VIP' }], loadBalancerSourceRanges: ['2001:db8:1::/48'] }), clusterIPs: [{ family: 'IPv6', ip: 'fd00:10:96::61' }] },
  });
  const d = desiredIpvsState({ services: new Map([[ext6.key, ext6], [lb6.key, lb6]]) }, { scheduler: 'rr', nodeAddresses: NODE6 });
  t.deepEqual([...d.virtualServers.keys()].sort(), ['TCP/2001:db8::10:80', 'TCP/2001:db8::7:80', 'TCP/fd00:10:96::60:80', 'TCP/fd00:10:96::61:80']);
  t.deepEqual([...d.virtualServers.get('TCP/2001:db8::7:80')!.reals.keys()], ['fd00:10:244:1::2:8080']);
  t.deepEqual([...d.sets['KUBE-EXTERNAL-IP']], ['2001:db8::7,tcp:80']);
  t.deepEqual([...d.sets['KUBE-LOAD-BALANCER']], ['2001:db8::10,tcp:80']);
  t.deepEqual([...d.sets['KUBE-LOAD-BALANCER-SOURCE-CIDR']], ['2001:db8::10,tcp:80,2001:db8:1::/48']);
  t.deepEqual([...d.addresses].sort(), ['2001:db8::10', '2001:db8::7', 'fd00:10:96::60', 'fd00:10:96::61']);
});

test('chains and status of a dual-stack node: IPv6 virtual servers under their service port, with their /128 binding and KUBE-6- entries; status counts both families', async (t) => {
  const w = new World();
  const ip6tables = new FakeIptables();
  await dualBackend(w, ip6tables).sync(dual(), { full: true, changed: new Set() });
  const live = await readIpvsLive(w);
  const d = (f: 'IPv4' | 'IPv6') => desiredIpvsState(familyView(dual(), f), { scheduler: 'rr', nodeAddresses: f === 'IPv6' ? NODE6 : NODE4 }).virtualServers;
  const views = ipvsServicePortViews(live, new Map([...d('IPv4'), ...d('IPv6')]));
  const v6 = views.find((v) => v.key === 'TCP/fd00:10:96::a:80')!;
  t.is(v6.servicePort, 'default/web:http');
  t.true(v6.bound);
  t.deepEqual(v6.clusterIP, { set: 'KUBE-6-CLUSTER-IP', entry: 'fd00:10:96::a,tcp:80', present: true });
  t.deepEqual(v6.realServers.map((r) => r.loopBack), [
    { set: 'KUBE-6-LOOP-BACK', entry: 'fd00:10:244:1::2,tcp:8080,fd00:10:244:1::2', present: true },
    { set: 'KUBE-6-LOOP-BACK', entry: 'fd00:10:244:1::3,tcp:8080,fd00:10:244:1::3', present: true },
  ]);
  const sticky = views.find((v) => v.key === 'UDP/fd00:10:96::35:53')!;
  t.is(sticky.virtualServer?.netmask, '/128');
  const text = formatIpvsChains([v6], true);
  t.true(text.includes('TCP [fd00:10:96::a]:80 rr'), text);
  t.true(text.includes('  kube-ipvs0: fd00:10:96::a/128 bound\n'), text);
  t.true(text.includes('-> [fd00:10:244:1::2]:8080'), text);
  const lines = new Map(ipvsStatusLines(ipvsCounts(live)));
  t.is(lines.get('ipvs'), '5 virtual servers, 9 real servers in the kernel');
  t.is(lines.get('kube-ipvs0'), '3 addresses');
  t.regex(lines.get('ipsets')!, /KUBE-6-CLUSTER-IP 2, KUBE-6-LOOP-BACK 3/);
});

test('a failed step of the IPv6 cleanup does not leave kube-ipvs0 with its IPv6 addresses: the other steps run, the error names the failed one', async (t) => {
  const w = new World();
  const ip6tables = new FakeIptables();
  const backend = dualBackend(w, ip6tables);
  await backend.sync(dual(), { full: true, changed: new Set() });
  t.deepEqual(w.links.addressesOf('kube-ipvs0'), ['10.96.0.10/32', 'fd00:10:96::35/128', 'fd00:10:96::a/128']);
  ip6tables.failNextRestore(new Error('ip6tables-restore: Another app is currently holding the xtables lock'));
  const error = await t.throwsAsync(backend.cleanup(), { instanceOf: IpvsCleanupError });
  t.is(error!.message, 'IPv6 IPVS cleanup could not remove everything: iptables rules: ip6tables-restore: Another app is currently holding the xtables lock');
  t.deepEqual(error!.failed.map((f) => f.step), ['iptables rules']);
  t.is(error!.partial.removed['virtual server'], 3);
  t.is(error!.partial.removed.link, 1);
  // Everything but the ip6tables rules is gone: virtual servers, kube-ipvs0 and both families' sets.
  t.deepEqual((await w.ipvs.dumpServices()).entries, []);
  t.is(w.links.addressesOf('kube-ipvs0'), undefined);
  t.is(w.ipset.entries('KUBE-6-CLUSTER-IP'), undefined);
  t.is(w.ipset.entries('KUBE-CLUSTER-IP'), undefined);
  t.true(ip6tables.dump('filter').includes('KUBE-IPVS-FILTER'), 'the rules whose restore failed are still there');
  // A second cleanup removes them.
  const again = await backend.cleanup();
  t.true((again.removed.chain ?? 0) > 0);
  t.false(ip6tables.dump('filter').includes('KUBE-IPVS-FILTER'));
});

test('chains --mode ipvs with --source: the pod column names the Pod of an IPv6 real server', async (t) => {
  const podWeb6 = nodePort('fd00:10:96::a', []);
  const withPod: ServicePort = { ...podWeb6, endpoints: [ep('[fd00:10:244:1::2]:8080', { pod: 'default/web-6' }), ep('[fd00:10:244:1::3]:8080')] };
  const snap = dualSnap([web4], [withPod]);
  const w = new World();
  await dualBackend(w, new FakeIptables()).sync(snap, { full: true, changed: new Set() });
  const live = await readIpvsLive(w);
  const desired6 = desiredIpvsState(familyView(snap, 'IPv6'), { scheduler: 'rr', nodeAddresses: NODE6 }).virtualServers;
  const views = ipvsServicePortViews(live, desired6, endpointPods(snap)).filter((v) => v.key === 'TCP/fd00:10:96::a:80');
  t.is(
    formatIpvsChains(views, true),
    `# default/web:http (virtual server TCP [fd00:10:96::a]:80)
TCP [fd00:10:96::a]:80 rr (flags: hashed)
  kube-ipvs0: fd00:10:96::a/128 bound
  KUBE-6-CLUSTER-IP: fd00:10:96::a,tcp:80
  -> real server              forward  weight  active  inactive  KUBE-6-LOOP-BACK                            pod
  -> [fd00:10:244:1::2]:8080  Masq     1       0       0         fd00:10:244:1::2,tcp:8080,fd00:10:244:1::2  default/web-6
  -> [fd00:10:244:1::3]:8080  Masq     1       0       0         fd00:10:244:1::3,tcp:8080,fd00:10:244:1::3  -
`,
  );
});

test('an IPv6 ClusterIP /128 removed from kube-ipvs0 by hand: a full sync binds it again and keeps its virtual server and real servers, as for IPv4', async (t) => {
  const w = new World();
  const backend = dualBackend(w, new FakeIptables());
  await backend.sync(dual(), { full: true, changed: new Set() });
  const index = (await w.links.find('kube-ipvs0'))!;
  await w.links.delAddress(index, { address: 'fd00:10:96::a', prefixLength: 128 });
  await w.links.delAddress(index, { address: '10.96.0.10', prefixLength: 32 });
  const vsLog = w.ipvs.log.length;
  w.links.log.length = 0;
  await backend.sync(dual(), { full: true, changed: new Set() });
  t.deepEqual(w.links.log.filter((l) => l.startsWith('add ')).sort(), ['add 10.96.0.10/32', 'add fd00:10:96::a/128']);
  t.deepEqual(w.ipvs.log.slice(vsLog), [], 'the virtual servers and their real servers are kept, not deleted and added again');
  t.true((await w.links.addresses(index, 'IPv6')).some((a) => a.address === 'fd00:10:96::a' && a.prefixLength === 128));
});

test('diff --mode ipvs, the IPv6 side: a /128 removed by hand, a real server deleted, a virtual server and a KUBE-6- entry added by hand are drift; an IPv4 virtual server is not the IPv6 pass\'s', async (t) => {
  const w = new World();
  await dualBackend(w, new FakeIptables()).sync(dual(), { full: true, changed: new Set() });
  const desired6 = () => desiredIpvsState(familyView(dual(), 'IPv6'), { scheduler: 'rr', nodeAddresses: NODE6 });
  const opts = { family: 'IPv6' as const, hostAddresses: NODE6.hostAddresses };
  const read = () => readIpvsLive(w);
  t.is(formatIpvsDrift(ipvsDrift(desired6(), await read(), opts)), 'no differences\n');
  const index = (await w.links.find('kube-ipvs0'))!;
  await w.links.delAddress(index, { address: 'fd00:10:96::a', prefixLength: 128 });
  const vs = { protocol: 'TCP' as const, address: 'fd00:10:96::a', port: 80 };
  await w.ipvs.delDest(vs, { address: 'fd00:10:244:1::3', port: 8080 });
  await w.links.addAddress(index, 'fd00:10:96::99');
  await w.ipvs.newService({ protocol: 'TCP', address: 'fd00:10:96::99', port: 81, scheduler: 'wrr', netmask: 128 });
  await w.ipset.restore('add KUBE-6-CLUSTER-IP fd00:10:96::77,tcp:80\n');
  t.is(
    formatIpvsDrift(ipvsDrift(desired6(), await read(), opts)),
    `extra entry KUBE-6-CLUSTER-IP fd00:10:96::77,tcp:80
missing address kube-ipvs0 fd00:10:96::a/128
extra address kube-ipvs0 fd00:10:96::99/128
extra virtual server TCP [fd00:10:96::99]:81: wrr
missing real server TCP [fd00:10:96::a]:80 -> [fd00:10:244:1::3]:8080 (default/web:http): weight 1 Masq
`,
  );
  // The IPv4 pass sees none of it.
  const desired4 = desiredIpvsState(familyView(dual(), 'IPv4'), { scheduler: 'rr', nodeAddresses: NODE4 });
  t.is(formatIpvsDrift(ipvsDrift(desired4, await read(), { serviceCIDR: '10.96.0.0/12', hostAddresses: NODE4.hostAddresses })), 'no differences\n');
});

test('diff --mode ipvs compares the IPv6 side only when a sync would touch it: IPv6 virtual servers in the source, or KUBE-6-CLUSTER-IP in the kernel', async (t) => {
  const v4only = dualSnap([web4], []);
  const w = new World();
  await dualBackend(w, new FakeIptables()).sync(v4only, { full: true, changed: new Set() });
  const live = await readIpvsLive(w);
  t.false(live.sets.has('KUBE-6-CLUSTER-IP'), 'an IPv4-only sync leaves the IPv6 side alone');
  const empty6 = desiredIpvsState(familyView(v4only, 'IPv6'), { scheduler: 'rr', nodeAddresses: NODE6 });
  t.false(ipv6DriftWanted(empty6, live));
  t.true(ipv6DriftWanted(desiredIpvsState(familyView(dual(), 'IPv6'), { scheduler: 'rr', nodeAddresses: NODE6 }), live));
  await w.ipset.restore('create KUBE-6-CLUSTER-IP hash:ip,port family inet6\n');
  t.true(ipv6DriftWanted(empty6, await readIpvsLive(w)));
});
