/**
 * IPVS mode's external frontends (src/modes/ipvs/frontends.ts): NodePort,
 * external IPs and LoadBalancer ingress IPs, with exact virtual servers, set
 * entries and kube-ipvs0 addresses, externalTrafficPolicy Local, source
 * ranges, the index's claims, the backend on fakes, and the host addresses.
 */
import test from 'ava';
import type { NetworkInterfaceInfo } from 'node:os';
import type { Interfaces } from '../../src/server/node-addresses.ts';
import { DesiredIndex, desiredIpvsState } from '../../src/modes/ipvs/assemble.ts';
import { desiredServicePort, type DesiredServicePort } from '../../src/modes/ipvs/desired.ts';
import type { NodeAddresses } from '../../src/modes/ipvs/frontends.ts';
import { ipv4SourceRanges } from '../../src/model/frontends.ts';
import { ipPortNetEntry, IpsetValidationError, MAX_SET_NAME } from '../../src/kernel/ipset/ipset.ts';
import { IPVS_SETS, swapSetName } from '../../src/modes/ipvs/ipset.ts';
import { nodeAddresses } from '../../src/modes/ipvs/node-ips.ts';
import { ipvsadmSaveLines } from '../../src/modes/ipvs/render.ts';
import { formatIpvsChains, ipvsServicePortViews } from '../../src/modes/ipvs/chains.ts';
import { readIpvsLive } from '../../src/modes/ipvs/live.ts';
import { parseCIDR } from '../../src/model/addr.ts';
import { ipv4Frontends, type NodeInfo, type ServicePort } from '../../src/model/types.ts';
import { ep, snap, sp } from '../support/snapshots.ts';
import { World } from '../support/ipvs-world.ts';

const ADDRS: NodeAddresses = { nodePortIPs: ['10.0.0.5', '192.168.1.5'], hostAddresses: ['10.0.0.5', '127.0.0.1', '192.168.1.5', '203.0.113.99'] };
const NODE: NodeInfo = { name: 'n1', addresses: [{ type: 'InternalIP', address: '10.0.0.5' }] };
const OPTS = { scheduler: 'rr', nodeAddresses: ADDRS };
/** 10.244.1.2 runs on this node (n1), 10.244.2.2 on n2. */
const EPS = () => [ep('10.244.1.2:8080', { nodeName: 'n1' }), ep('10.244.2.2:8080', { nodeName: 'n2' })];

/** Every frontend at once, externalTrafficPolicy as given. */
function all(policy: 'Cluster' | 'Local', extra: Partial<ServicePort['frontends']> = {}, endpoints = EPS()): ServicePort {
  return sp('default/web:http', '10.96.0.10', 80, endpoints, {
    type: 'LoadBalancer',
    externalTrafficPolicy: policy,
    frontends: {
      ...ipv4Frontends('10.96.0.10', 30080),
      externalIPs: [{ family: 'IPv4', ip: '198.51.100.7' }, { family: 'IPv6', ip: '2001:db8::7' }, { family: 'IPv4', ip: '203.0.113.99' }],
      loadBalancerIngress: [{ family: 'IPv4', ip: '198.51.100.10', ipMode: 'VIP' }, { family: 'IPv4', ip: '198.51.100.11', ipMode: 'Proxy' }],
      loadBalancerSourceRanges: [],
      ...extra,
    },
  });
}

/** A desired service port in plain form: each external virtual server as "kind key bind -> reals", and its entries "SET entry". */
function plain(d: DesiredServicePort) {
  return d.external.map((x) => ({
    vs: `${x.kind} ${x.server.key}${x.bind ? ' bound' : ''} -> ${[...x.server.reals.keys()].join(' ')}`,
    entries: x.entries.map((e) => `${e.set} ${e.entry}`),
  }));
}

test('externalTrafficPolicy Cluster: one virtual server per external IP, VIP ingress IP and node address, with their set entries, in kube-proxy order', (t) => {
  const d = desiredServicePort(all('Cluster'), OPTS, NODE);
  t.is(d.server.key, 'TCP/10.96.0.10:80');
  t.deepEqual([...d.server.reals.keys()], ['10.244.1.2:8080', '10.244.2.2:8080']);
  const loopBack = ['KUBE-LOOP-BACK 10.244.1.2,tcp:8080,10.244.1.2', 'KUBE-LOOP-BACK 10.244.2.2,tcp:8080,10.244.2.2'];
  t.deepEqual(plain(d), [
    // A bound address is in KUBE-IPVS-IPS (filter KUBE-IPVS-FILTER).
    { vs: 'externalIP TCP/198.51.100.7:80 bound -> 10.244.1.2:8080 10.244.2.2:8080', entries: ['KUBE-EXTERNAL-IP 198.51.100.7,tcp:80', 'KUBE-IPVS-IPS 198.51.100.7', ...loopBack] },
    // The host has this address on one of its interfaces: not bound to kube-ipvs0 (kube-proxy's shouldBind).
    { vs: 'externalIP TCP/203.0.113.99:80 -> 10.244.1.2:8080 10.244.2.2:8080', entries: ['KUBE-EXTERNAL-IP 203.0.113.99,tcp:80', ...loopBack] },
    // ipMode Proxy (198.51.100.11) and the IPv6 external IP are left out.
    { vs: 'loadBalancer TCP/198.51.100.10:80 bound -> 10.244.1.2:8080 10.244.2.2:8080', entries: ['KUBE-LOAD-BALANCER 198.51.100.10,tcp:80', 'KUBE-IPVS-IPS 198.51.100.10', ...loopBack] },
    { vs: 'nodePort TCP/10.0.0.5:30080 -> 10.244.1.2:8080 10.244.2.2:8080', entries: ['KUBE-NODE-PORT-TCP 30080', ...loopBack] },
    { vs: 'nodePort TCP/192.168.1.5:30080 -> 10.244.1.2:8080 10.244.2.2:8080', entries: ['KUBE-NODE-PORT-TCP 30080', ...loopBack] },
  ]);
});

test('externalTrafficPolicy Local: the external virtual servers get only the local endpoint and the -LOCAL sets; the ClusterIP keeps the cluster set', (t) => {
  const d = desiredServicePort(all('Local'), OPTS, NODE);
  t.deepEqual([...d.server.reals.keys()], ['10.244.1.2:8080', '10.244.2.2:8080']);
  const loopBack = 'KUBE-LOOP-BACK 10.244.1.2,tcp:8080,10.244.1.2';
  t.deepEqual(plain(d), [
    { vs: 'externalIP TCP/198.51.100.7:80 bound -> 10.244.1.2:8080', entries: ['KUBE-EXTERNAL-IP-LOCAL 198.51.100.7,tcp:80', 'KUBE-IPVS-IPS 198.51.100.7', loopBack] },
    { vs: 'externalIP TCP/203.0.113.99:80 -> 10.244.1.2:8080', entries: ['KUBE-EXTERNAL-IP-LOCAL 203.0.113.99,tcp:80', loopBack] },
    { vs: 'loadBalancer TCP/198.51.100.10:80 bound -> 10.244.1.2:8080', entries: ['KUBE-LOAD-BALANCER 198.51.100.10,tcp:80', 'KUBE-LOAD-BALANCER-LOCAL 198.51.100.10,tcp:80', 'KUBE-IPVS-IPS 198.51.100.10', loopBack] },
    { vs: 'nodePort TCP/10.0.0.5:30080 -> 10.244.1.2:8080', entries: ['KUBE-NODE-PORT-TCP 30080', 'KUBE-NODE-PORT-LOCAL-TCP 30080', loopBack] },
    { vs: 'nodePort TCP/192.168.1.5:30080 -> 10.244.1.2:8080', entries: ['KUBE-NODE-PORT-TCP 30080', 'KUBE-NODE-PORT-LOCAL-TCP 30080', loopBack] },
  ]);
});

test('externalTrafficPolicy Local without a local endpoint: the cluster set as real servers (for this node\'s pods and the node), and KUBE-EXTERNAL-NO-LOCAL so that new connections from elsewhere are dropped', (t) => {
  const d = desiredServicePort(all('Local', {}, [ep('10.244.2.2:8080', { nodeName: 'n2' })]), OPTS, NODE);
  t.deepEqual([...d.server.reals.keys()], ['10.244.2.2:8080']);
  const loopBack = 'KUBE-LOOP-BACK 10.244.2.2,tcp:8080,10.244.2.2';
  t.deepEqual(plain(d), [
    { vs: 'externalIP TCP/198.51.100.7:80 bound -> 10.244.2.2:8080', entries: ['KUBE-EXTERNAL-IP-LOCAL 198.51.100.7,tcp:80', 'KUBE-EXTERNAL-NO-LOCAL 198.51.100.7,tcp:80', 'KUBE-IPVS-IPS 198.51.100.7', loopBack] },
    { vs: 'externalIP TCP/203.0.113.99:80 -> 10.244.2.2:8080', entries: ['KUBE-EXTERNAL-IP-LOCAL 203.0.113.99,tcp:80', 'KUBE-EXTERNAL-NO-LOCAL 203.0.113.99,tcp:80', loopBack] },
    {
      vs: 'loadBalancer TCP/198.51.100.10:80 bound -> 10.244.2.2:8080',
      entries: ['KUBE-LOAD-BALANCER 198.51.100.10,tcp:80', 'KUBE-LOAD-BALANCER-LOCAL 198.51.100.10,tcp:80', 'KUBE-EXTERNAL-NO-LOCAL 198.51.100.10,tcp:80', 'KUBE-IPVS-IPS 198.51.100.10', loopBack],
    },
    { vs: 'nodePort TCP/10.0.0.5:30080 -> 10.244.2.2:8080', entries: ['KUBE-NODE-PORT-TCP 30080', 'KUBE-NODE-PORT-LOCAL-TCP 30080', 'KUBE-EXTERNAL-NO-LOCAL 10.0.0.5,tcp:30080', loopBack] },
    { vs: 'nodePort TCP/192.168.1.5:30080 -> 10.244.2.2:8080', entries: ['KUBE-NODE-PORT-TCP 30080', 'KUBE-NODE-PORT-LOCAL-TCP 30080', 'KUBE-EXTERNAL-NO-LOCAL 192.168.1.5,tcp:30080', loopBack] },
  ]);
  // No endpoint anywhere: no real server, refused by IPVS (as kube-proxy's REJECT), not dropped.
  const none = desiredServicePort(all('Local', {}, []), OPTS, NODE);
  t.deepEqual(none.external.flatMap((x) => x.entries.filter((e) => e.set === 'KUBE-EXTERNAL-NO-LOCAL')), []);
  t.deepEqual(none.external.map((x) => x.server.reals.size), [0, 0, 0, 0, 0]);
  // With a local endpoint, nothing is dropped.
  t.deepEqual(desiredServicePort(all('Local'), OPTS, NODE).external.flatMap((x) => x.entries.filter((e) => e.set === 'KUBE-EXTERNAL-NO-LOCAL')), []);
});

test('the ClusterIP\'s own entries: KUBE-IPVS-IPS, the health-check NodePort of a LoadBalancer with externalTrafficPolicy Local, KUBE-INTERNAL-NO-LOCAL under internalTrafficPolicy Local with endpoints elsewhere only', (t) => {
  const entries = (d: DesiredServicePort) => d.entries.map((e) => `${e.set} ${e.entry}`);
  // kube-proxy's HealthCheckNodePort() is set only for LoadBalancer + externalTrafficPolicy Local (model/health-check.ts).
  t.deepEqual(entries(desiredServicePort(all('Local', { healthCheckNodePort: 32000 }), OPTS, NODE)), ['KUBE-IPVS-IPS 10.96.0.10', 'KUBE-HEALTH-CHECK-NODE-PORT 32000']);
  t.deepEqual(entries(desiredServicePort(all('Cluster', { healthCheckNodePort: 32000 }), OPTS, NODE)), ['KUBE-IPVS-IPS 10.96.0.10']);
  const itp = (endpoints: ReturnType<typeof EPS>) => desiredServicePort(sp('default/itp:http', '10.96.0.20', 80, endpoints, { internalTrafficPolicy: 'Local' }), OPTS, NODE);
  // Endpoints on other nodes only: no real server, dropped (not refused) through KUBE-INTERNAL-NO-LOCAL.
  const elsewhere = itp([ep('10.244.2.2:8080', { nodeName: 'n2' })]);
  t.is(elsewhere.server.reals.size, 0);
  t.deepEqual(entries(elsewhere), ['KUBE-IPVS-IPS 10.96.0.20', 'KUBE-INTERNAL-NO-LOCAL 10.96.0.20,tcp:80']);
  // ...and no virtual server, so that IPVS does not refuse the node's own connections before the rules drop them.
  t.true(elsewhere.withheld);
  t.false(itp(EPS()).withheld);
  t.false(itp([]).withheld);
  // A local endpoint: it alone; no endpoint anywhere: refused by IPVS, not dropped.
  t.deepEqual([...itp(EPS()).server.reals.keys()], ['10.244.1.2:8080']);
  t.deepEqual(entries(itp(EPS())), ['KUBE-IPVS-IPS 10.96.0.20']);
  t.deepEqual(entries(itp([])), ['KUBE-IPVS-IPS 10.96.0.20']);
});

test('the index: KUBE-IPVS-IPS holds every kube-ipvs0 address once, however many service ports share it', (t) => {
  const d = desiredIpvsState(
    {
      ...snap(
        all('Cluster'),
        sp('default/web:https', '10.96.0.10', 443, EPS(), { frontends: { ...ipv4Frontends('10.96.0.10'), externalIPs: [{ family: 'IPv4', ip: '198.51.100.7' }] } }),
      ),
      node: NODE,
    },
    OPTS,
  );
  t.deepEqual([...d.sets['KUBE-IPVS-IPS']].sort(), ['10.96.0.10', '198.51.100.10', '198.51.100.7']);
  t.deepEqual([...d.sets['KUBE-IPVS-IPS']].map((a) => `${a}/32`).sort(), d.addresses.map((a) => `${a}/32`).sort(), 'exactly the addresses bound to kube-ipvs0');
});

test('UDP and SCTP NodePorts: the UDP bitmap set, and "nodeIP,sctp:port" entries as kube-proxy', (t) => {
  const udp = desiredServicePort(sp('kube-system/dns:dns', '10.96.0.53', 53, [ep('10.244.1.2:53')], { protocol: 'UDP', frontends: ipv4Frontends('10.96.0.53', 30053) }), OPTS);
  t.deepEqual(udp.external.map((x) => [x.server.key, x.entries[0]!.set, x.entries[0]!.entry]), [
    ['UDP/10.0.0.5:30053', 'KUBE-NODE-PORT-UDP', '30053'],
    ['UDP/192.168.1.5:30053', 'KUBE-NODE-PORT-UDP', '30053'],
  ]);
  const sctp = desiredServicePort(
    sp('default/sig:diameter', '10.96.0.30', 3868, [ep('10.244.1.2:3868', { nodeName: 'n1' })], { protocol: 'SCTP', externalTrafficPolicy: 'Local', frontends: ipv4Frontends('10.96.0.30', 31868) }),
    OPTS,
    NODE,
  );
  t.deepEqual(sctp.external[0]!.entries.map((e) => `${e.set} ${e.entry}`), [
    'KUBE-NODE-PORT-SCTP 10.0.0.5,sctp:31868',
    'KUBE-NODE-PORT-LOCAL-SCTP 10.0.0.5,sctp:31868',
    'KUBE-LOOP-BACK 10.244.1.2,sctp:3868,10.244.1.2',
  ]);
});

test('source ranges: host bits cleared, IPv6 left out; the VIP itself allowed when a range holds the node IP', (t) => {
  t.deepEqual(ipv4SourceRanges(['10.1.2.3/16', '2001:db8::/32', '192.168.7.9/32']).map((r) => r.text), ['10.1.0.0/16', '192.168.7.9/32']);
  const d = desiredServicePort(all('Cluster', { externalIPs: [], nodePort: undefined, loadBalancerSourceRanges: ['10.0.3.4/16', '192.168.7.9/32', '2001:db8::/32'] }), OPTS, NODE);
  t.deepEqual(plain(d), [
    {
      vs: 'loadBalancer TCP/198.51.100.10:80 bound -> 10.244.1.2:8080 10.244.2.2:8080',
      entries: [
        'KUBE-LOAD-BALANCER 198.51.100.10,tcp:80',
        'KUBE-LOAD-BALANCER-FW 198.51.100.10,tcp:80',
        'KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.10,tcp:80,10.0.0.0/16',
        // A /32 as ipset save prints it: without its length.
        'KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.10,tcp:80,192.168.7.9',
        // 10.0.0.0/16 holds the node's InternalIP 10.0.0.5 (kube-proxy's allowFromNode).
        'KUBE-LOAD-BALANCER-SOURCE-IP 198.51.100.10,tcp:80,198.51.100.10',
        'KUBE-IPVS-IPS 198.51.100.10',
        'KUBE-LOOP-BACK 10.244.1.2,tcp:8080,10.244.1.2',
        'KUBE-LOOP-BACK 10.244.2.2,tcp:8080,10.244.2.2',
      ],
    },
  ]);
  // Only IPv6 ranges, or 0.0.0.0/0 among them: no IPv4 firewall at all, every client gets in (kube-proxy's IPv4 proxier, iptables mode).
  for (const ranges of [['2001:db8::/32'], ['10.0.0.0/8', '0.0.0.0/0']]) {
    const open = desiredServicePort(all('Cluster', { externalIPs: [], nodePort: undefined, loadBalancerSourceRanges: ranges }), OPTS, NODE);
    t.deepEqual(open.external[0]!.entries.map((e) => e.set), ['KUBE-LOAD-BALANCER', 'KUBE-IPVS-IPS', 'KUBE-LOOP-BACK', 'KUBE-LOOP-BACK'], ranges.join(','));
  }
});

test('bad input never reaches ipset: addresses, prefix lengths and ports are checked again', (t) => {
  t.throws(() => desiredServicePort(all('Cluster', { externalIPs: [{ family: 'IPv4', ip: '198.51.100.7 -exist' }] }), OPTS), { instanceOf: IpsetValidationError });
  t.throws(() => desiredServicePort(all('Cluster', { nodePort: 70000 }), OPTS), { instanceOf: IpsetValidationError });
  t.throws(() => ipPortNetEntry('198.51.100.10', 'tcp', 80, '0.0.0.0', 0), { instanceOf: IpsetValidationError });
  t.throws(() => ipPortNetEntry('198.51.100.10', 'tcp', 80, '10.0.0.0\nflush', 8), { instanceOf: IpsetValidationError });
});

test('no node address known (render without a host): no NodePort virtual server, every external IP bound', (t) => {
  const d = desiredServicePort(all('Cluster'), { scheduler: 'rr' }, NODE);
  t.deepEqual(d.external.map((x) => `${x.kind} ${x.server.key}${x.bind ? ' bound' : ''}`), [
    'externalIP TCP/198.51.100.7:80 bound',
    'externalIP TCP/203.0.113.99:80 bound',
    'loadBalancer TCP/198.51.100.10:80 bound',
  ]);
});

test('the index: two service ports on one external IP:port, the first by name wins; shared NodePort entries are counted', (t) => {
  const a = desiredServicePort(sp('default/a:http', '10.96.0.20', 80, [ep('10.244.1.2:8080')], { frontends: { ...ipv4Frontends('10.96.0.20', 30001), externalIPs: [{ family: 'IPv4', ip: '198.51.100.7' }] } }), OPTS);
  const b = desiredServicePort(sp('default/b:http', '10.96.0.21', 80, [ep('10.244.9.9:80')], { frontends: { ...ipv4Frontends('10.96.0.21'), externalIPs: [{ family: 'IPv4', ip: '198.51.100.7' }] } }), OPTS);
  const index = DesiredIndex.of([b, a]);
  const s = index.state();
  t.deepEqual(s.conflicts, ['default/b:http']);
  t.is(s.virtualServers.get('TCP/198.51.100.7:80')!.servicePort, 'default/a:http');
  t.deepEqual([...s.sets['KUBE-NODE-PORT-TCP']], ['30001'], 'one entry for both node addresses');
  t.deepEqual(s.addresses, ['10.96.0.20', '10.96.0.21', '198.51.100.7']);
  t.deepEqual([...s.sets['KUBE-EXTERNAL-IP']], ['198.51.100.7,tcp:80']);
  t.deepEqual([...s.virtualServers.keys()], ['TCP/10.0.0.5:30001', 'TCP/10.96.0.20:80', 'TCP/10.96.0.21:80', 'TCP/192.168.1.5:30001', 'TCP/198.51.100.7:80']);

  const gone = index.update(new Map([['default/a:http', undefined]]));
  t.is(index.server('TCP/198.51.100.7:80')!.servicePort, 'default/b:http', 'b takes over with its own real servers');
  t.deepEqual([...index.server('TCP/198.51.100.7:80')!.reals.keys()], ['10.244.9.9:80']);
  t.deepEqual(gone.sets.get('KUBE-NODE-PORT-TCP'), { add: [], del: ['30001'] });
  t.deepEqual(gone.sets.get('KUBE-EXTERNAL-IP'), { add: [], del: [] }, 'still wanted by b');
  t.deepEqual(gone.addresses, { add: [], del: ['10.96.0.20'] });
  t.deepEqual(gone.loopBack, { add: [], del: ['10.244.1.2,tcp:8080,10.244.1.2'] }, "10.244.9.9's entry was there already, for b's ClusterIP");
  t.deepEqual(gone.conflicts, []);
});

test('render: the frontends\' virtual servers in ipvsadm -S form', (t) => {
  const index = DesiredIndex.of([desiredServicePort(all('Local'), OPTS, NODE)]);
  t.deepEqual(ipvsadmSaveLines(index.state()), [
    '-A -t 10.0.0.5:30080 -s rr',
    '-a -t 10.0.0.5:30080 -r 10.244.1.2:8080 -m -w 1',
    '-A -t 10.96.0.10:80 -s rr',
    '-a -t 10.96.0.10:80 -r 10.244.1.2:8080 -m -w 1',
    '-a -t 10.96.0.10:80 -r 10.244.2.2:8080 -m -w 1',
    '-A -t 192.168.1.5:30080 -s rr',
    '-a -t 192.168.1.5:30080 -r 10.244.1.2:8080 -m -w 1',
    '-A -t 198.51.100.7:80 -s rr',
    '-a -t 198.51.100.7:80 -r 10.244.1.2:8080 -m -w 1',
    '-A -t 198.51.100.10:80 -s rr',
    '-a -t 198.51.100.10:80 -r 10.244.1.2:8080 -m -w 1',
    '-A -t 203.0.113.99:80 -s rr',
    '-a -t 203.0.113.99:80 -r 10.244.1.2:8080 -m -w 1',
  ]);
});

test('the backend on fakes: a full sync programs the frontends; a partial sync removes them, NodePort virtual servers on the host\'s addresses included', async (t) => {
  const w = new World();
  const backend = w.backend({ nodeAddresses: ADDRS });
  const snapshot = { services: new Map([['default/web:http', all('Cluster')]]), node: NODE };
  await backend.sync(snapshot, { full: true, changed: new Set() });
  t.deepEqual(w.ipvs.list().filter((l) => !l.startsWith(' ')), [
    'TCP 10.0.0.5:30080 rr',
    'TCP 10.96.0.10:80 rr',
    'TCP 192.168.1.5:30080 rr',
    'TCP 198.51.100.10:80 rr',
    'TCP 198.51.100.7:80 rr',
    'TCP 203.0.113.99:80 rr',
  ]);
  t.deepEqual(w.links.addressesOf('kube-ipvs0'), ['10.96.0.10/32', '198.51.100.10/32', '198.51.100.7/32']);
  t.deepEqual(w.ipset.entries('KUBE-NODE-PORT-TCP'), ['30080']);
  t.deepEqual(w.ipset.entries('KUBE-EXTERNAL-IP'), ['198.51.100.7,tcp:80', '203.0.113.99,tcp:80']);
  t.deepEqual(w.ipset.entries('KUBE-LOAD-BALANCER'), ['198.51.100.10,tcp:80']);
  const before = w.writes();
  await backend.sync(snapshot, { full: true, changed: new Set() });
  t.deepEqual(w.writes(), before, 'a second full sync writes nothing');

  const plainPort = sp('default/web:http', '10.96.0.10', 80, EPS());
  await backend.sync({ services: new Map([['default/web:http', plainPort]]), node: NODE }, { full: false, changed: new Set(['default/web:http']) });
  t.deepEqual(w.ipvs.list().filter((l) => !l.startsWith(' ')), ['TCP 10.96.0.10:80 rr']);
  t.deepEqual(w.links.addressesOf('kube-ipvs0'), ['10.96.0.10/32']);
  for (const set of ['KUBE-NODE-PORT-TCP', 'KUBE-EXTERNAL-IP', 'KUBE-LOAD-BALANCER']) t.deepEqual(w.ipset.entries(set), [], set);
  // A virtual server left on a node address (a NodePort drover programmed before a restart) is drover's: a full sync deletes it.
  const restarted = w.backend({ nodeAddresses: ADDRS });
  await w.ipvs.newService({ protocol: 'TCP', address: '10.0.0.5', port: 30999, scheduler: 'rr' });
  await restarted.sync({ services: new Map([['default/web:http', plainPort]]), node: NODE }, { full: true, changed: new Set() });
  t.deepEqual(w.ipvs.list().filter((l) => !l.startsWith(' ')), ['TCP 10.96.0.10:80 rr']);
});

test('host addresses: every IPv4 address but kube-ipvs0\'s; NodePorts on those that are not loopback, within --nodeport-addresses', (t) => {
  const info = (address: string): NetworkInterfaceInfo =>
    address.includes(':')
      ? { address, netmask: 'ffff:ffff:ffff:ffff::', family: 'IPv6', mac: '00:00:00:00:00:00', internal: false, cidr: `${address}/64`, scopeid: 0 }
      : { address, netmask: '255.255.255.0', family: 'IPv4', mac: '00:00:00:00:00:00', internal: false, cidr: `${address}/24` };
  const interfaces: Interfaces = {
    lo: [info('127.0.0.1'), info('::1')],
    eth0: [info('10.0.0.5'), info('fe80::1')],
    eth1: [info('192.168.1.5'), info('10.0.0.5')],
    'kube-ipvs0': [info('10.96.0.10')],
  };
  t.deepEqual(nodeAddresses(undefined, interfaces), { nodePortIPs: ['10.0.0.5', '192.168.1.5'], hostAddresses: ['10.0.0.5', '127.0.0.1', '192.168.1.5'] });
  t.deepEqual(nodeAddresses([parseCIDR('192.168.0.0/16')!.prefix], interfaces).nodePortIPs, ['192.168.1.5']);
  t.deepEqual(nodeAddresses([parseCIDR('0.0.0.0/0')!.prefix], interfaces).nodePortIPs, ['10.0.0.5', '192.168.1.5']);
  t.deepEqual(nodeAddresses([parseCIDR('fd00::/8')!.prefix], interfaces).nodePortIPs, ['10.0.0.5', '192.168.1.5'], 'IPv6 CIDRs are an IPv6 proxier\'s');
});

test('chains --mode ipvs with --source: a frontend virtual server shows its frontend set entries, not a KUBE-CLUSTER-IP one', async (t) => {
  const w = new World();
  const port = all('Local');
  await w.backend({ nodeAddresses: ADDRS }).sync({ services: new Map([[port.key, port]]), node: NODE }, { full: true, changed: new Set() });
  const live = await readIpvsLive(w, { tables: false });
  const views = ipvsServicePortViews(live, DesiredIndex.of([desiredServicePort(port, OPTS, NODE)]).state().virtualServers);
  const np = views.find((v) => v.key === 'TCP/10.0.0.5:30080')!;
  t.deepEqual(np.clusterIP, { set: 'KUBE-NODE-PORT-TCP', entry: '30080', present: true });
  t.deepEqual(np.frontendEntries, [{ set: 'KUBE-NODE-PORT-LOCAL-TCP', entry: '30080', present: true }]);
  t.false(np.bound);
  const text = formatIpvsChains(views, true);
  t.true(
    text.includes(`# default/web:http (virtual server TCP 198.51.100.10:80)
TCP 198.51.100.10:80 rr (flags: hashed)
  kube-ipvs0: 198.51.100.10/32 bound
  KUBE-LOAD-BALANCER: 198.51.100.10,tcp:80
  KUBE-LOAD-BALANCER-LOCAL: 198.51.100.10,tcp:80
`),
    text,
  );
  const cluster = views.find((v) => v.key === 'TCP/10.96.0.10:80')!;
  t.deepEqual(cluster.clusterIP, { set: 'KUBE-CLUSTER-IP', entry: '10.96.0.10,tcp:80', present: true });
  t.is(cluster.frontendEntries, undefined);
});

test('every set and scratch set name fits the kernel (31 characters) and none collides', (t) => {
  const names = IPVS_SETS.flatMap((s) => [s.name, swapSetName(s.name)]);
  t.deepEqual(names.filter((n) => n.length > MAX_SET_NAME), []);
  t.is(new Set(names).size, names.length);
  t.is(swapSetName('KUBE-LOAD-BALANCER-SOURCE-CIDR'), 'KUBE-LB-SOURCE-CIDR-SWAP');
  t.is(swapSetName('KUBE-CLUSTER-IP'), 'KUBE-CLUSTER-IP-SWAP');
  t.is(swapSetName('KUBE-HEALTH-CHECK-NODE-PORT'), 'KUBE-HC-NODE-PORT-SWAP');
});

test('internalTrafficPolicy Local with endpoints elsewhere only: the ClusterIP stays bound and in its sets but gets no virtual server; a local endpoint brings it back', (t) => {
  const itp = (endpoints: ReturnType<typeof EPS>) => desiredServicePort(sp('default/itp:http', '10.96.0.20', 80, endpoints, { internalTrafficPolicy: 'Local' }), OPTS, NODE);
  const web = desiredServicePort(sp('default/web:http', '10.96.0.21', 80, EPS()), OPTS, NODE);
  const index = DesiredIndex.of([web, itp([ep('10.244.2.2:8080', { nodeName: 'n2' })])]);
  const state = index.state();
  t.deepEqual([...state.virtualServers.keys()], ['TCP/10.96.0.21:80']);
  t.deepEqual(state.addresses, ['10.96.0.20', '10.96.0.21']);
  t.true(state.clusterIPSet.has('10.96.0.20,tcp:80'));
  t.true(state.sets['KUBE-INTERNAL-NO-LOCAL'].has('10.96.0.20,tcp:80'));
  t.is(index.server('TCP/10.96.0.20:80'), undefined);
  t.deepEqual([...index.serverKeys()], ['TCP/10.96.0.21:80']);
  t.is(index.serverCount, 1);
  // A local endpoint appears: the virtual server is wanted, the drop entry is not.
  const back = index.update(new Map([['default/itp:http', itp(EPS())]]));
  t.deepEqual([...back.virtualServers].map(([key, v]) => [key, v.desired ? [...v.desired.reals.keys()] : null]), [['TCP/10.96.0.20:80', ['10.244.1.2:8080']]]);
  t.deepEqual(back.sets.get('KUBE-INTERNAL-NO-LOCAL'), { add: [], del: ['10.96.0.20,tcp:80'] });
  t.deepEqual(back.addresses, { add: [], del: [] });
  t.is(index.serverCount, 2);
  // It goes away again: the virtual server is deleted, the address stays.
  const gone = index.update(new Map([['default/itp:http', itp([ep('10.244.2.2:8080', { nodeName: 'n2' })])]]));
  t.deepEqual([...gone.virtualServers].map(([key, v]) => [key, v.desired ?? null]), [['TCP/10.96.0.20:80', null]]);
  t.deepEqual(gone.sets.get('KUBE-INTERNAL-NO-LOCAL'), { add: ['10.96.0.20,tcp:80'], del: [] });
  t.deepEqual(gone.addresses, { add: [], del: [] });
  t.is(index.serverCount, 1);
});
