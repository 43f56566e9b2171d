import test from 'ava';
import { conntrackDeleteArgs } from '../../src/conntrack/exec.ts';
import { notNATedUDPFlows, staleUDPFlows } from '../../src/conntrack/stale.ts';
import { changedServicePorts } from '../../src/proxier/changes.ts';
import { dualSnap, ep, snap, sp } from '../support/snapshots.ts';
import { ipv4Frontends } from '../../src/model/types.ts';

const dns = (eps: string[], extra = {}) => sp('kube-system/dns:dns', '10.96.0.10', 53, eps.map((e) => ep(e)), { protocol: 'UDP', ...extra });
const web = (eps: string[]) => sp('default/web:http', '10.96.0.20', 80, eps.map((e) => ep(e)));

test('a removed UDP endpoint: its NATed flows to the ClusterIP are stale', (t) => {
  t.deepEqual(staleUDPFlows(snap(dns(['10.244.1.2:53', '10.244.1.3:53'])), snap(dns(['10.244.1.2:53']))), [
    { ip: '10.96.0.10', port: 53, endpointIP: '10.244.1.3' },
  ]);
});

test('an endpoint that stops being ready counts as removed', (t) => {
  const after = snap(sp('kube-system/dns:dns', '10.96.0.10', 53, [ep('10.244.1.2:53', { ready: false })], { protocol: 'UDP' }));
  t.deepEqual(staleUDPFlows(snap(dns(['10.244.1.2:53'])), after), [{ ip: '10.96.0.10', port: 53, endpointIP: '10.244.1.2' }]);
});

test('a UDP service port that gets its first endpoint: every flow to it is stale', (t) => {
  t.deepEqual(staleUDPFlows(snap(dns([])), snap(dns(['10.244.1.2:53']))), [{ ip: '10.96.0.10', port: 53 }]);
  t.deepEqual(staleUDPFlows(snap(), snap(dns(['10.244.1.2:53']))), [{ ip: '10.96.0.10', port: 53 }]);
});

test('a removed UDP service: all its endpoints are stale; TCP services are never touched', (t) => {
  t.deepEqual(staleUDPFlows(snap(dns(['10.244.1.2:53']), web(['10.244.2.2:80'])), snap()), [
    { ip: '10.96.0.10', port: 53, endpointIP: '10.244.1.2' },
  ]);
  t.deepEqual(staleUDPFlows(snap(web(['10.244.2.2:80', '10.244.2.3:80'])), snap(web(['10.244.2.2:80']))), []);
});

test('nothing changed: nothing is stale', (t) => {
  const s = snap(dns(['10.244.1.2:53']), web(['10.244.2.2:80']));
  t.deepEqual(staleUDPFlows(s, s), []);
});

test('conntrack -D arguments', (t) => {
  t.deepEqual(conntrackDeleteArgs({ ip: '10.96.0.10', port: 53, endpointIP: '10.244.1.3' }), [
    '-D', '-p', 'udp', '--orig-dst', '10.96.0.10', '--orig-port-dst', '53', '--dst-nat', '10.244.1.3',
  ]);
  t.deepEqual(conntrackDeleteArgs({ ip: '10.96.0.10', port: 53 }), ['-D', '-p', 'udp', '--orig-dst', '10.96.0.10', '--orig-port-dst', '53']);
});

test('restricted to the changed service ports, the stale flows are the same', (t) => {
  const other = sp('ns/other:dns', '10.96.0.11', 53, [ep('10.244.3.2:53')], { protocol: 'UDP' });
  const before = snap(dns(['10.244.1.2:53', '10.244.1.3:53']), other, web(['10.244.2.2:80']));
  const after = snap(dns(['10.244.1.2:53']), other);
  const all = staleUDPFlows(before, after);
  t.deepEqual(staleUDPFlows(before, after, changedServicePorts(before, after)), all);
  t.deepEqual(staleUDPFlows(before, after, new Set(['ns/other:dns'])), [], 'an unchanged service port yields nothing');
});

test('UDP NodePort, external IP and LoadBalancer IP: a removed endpoint is stale at every frontend; a NodePort matches any address', (t) => {
  const frontends = {
    ...ipv4Frontends('10.96.0.10', 30053),
    externalIPs: [{ family: 'IPv4' as const, ip: '203.0.113.10' }],
    loadBalancerIngress: [
      { family: 'IPv4' as const, ip: '198.51.100.10', ipMode: 'VIP' as const },
      { family: 'IPv4' as const, ip: '198.51.100.11', ipMode: 'Proxy' as const },
    ],
  };
  const lb = (eps: string[]) => dns(eps, { type: 'LoadBalancer', frontends });
  t.deepEqual(staleUDPFlows(snap(lb(['10.244.1.2:53', '10.244.1.3:53'])), snap(lb(['10.244.1.2:53']))), [
    { port: 30053, endpointIP: '10.244.1.3' },
    { ip: '10.96.0.10', port: 53, endpointIP: '10.244.1.3' },
    { ip: '198.51.100.10', port: 53, endpointIP: '10.244.1.3' },
    { ip: '203.0.113.10', port: 53, endpointIP: '10.244.1.3' },
  ]);
  t.deepEqual(staleUDPFlows(snap(lb([])), snap(lb(['10.244.1.2:53']))), [
    { port: 30053 },
    { ip: '10.96.0.10', port: 53 },
    { ip: '198.51.100.10', port: 53 },
    { ip: '203.0.113.10', port: 53 },
  ]);
  t.deepEqual(conntrackDeleteArgs({ port: 30053, endpointIP: '10.244.1.3' }), ['-D', '-p', 'udp', '--orig-port-dst', '30053', '--dst-nat', '10.244.1.3']);
});

test('externalTrafficPolicy Local: a NodePort flow is stale only when its endpoint is gone, not when it moves to another node (pods and the node still reach it)', (t) => {
  const node = { name: 'n1', addresses: [] };
  const local = (nodeName: string) =>
    dns([], { type: 'NodePort', externalTrafficPolicy: 'Local', frontends: ipv4Frontends('10.96.0.10', 30053), endpoints: [ep('10.244.1.2:53', { nodeName: 'n1' }), ep('10.244.1.3:53', { nodeName })] });
  // With ETP Local the NodePort still reaches the cluster set (pods and the node short-circuit), so nothing is stale.
  t.deepEqual(staleUDPFlows({ ...snap(local('n1')), node }, { ...snap(local('n2')), node }), []);
  const gone = dns([], { type: 'NodePort', externalTrafficPolicy: 'Local', frontends: ipv4Frontends('10.96.0.10', 30053), endpoints: [ep('10.244.1.2:53', { nodeName: 'n1' })] });
  t.deepEqual(staleUDPFlows({ ...snap(local('n2')), node }, { ...snap(gone), node }), [
    { port: 30053, endpointIP: '10.244.1.3' },
    { ip: '10.96.0.10', port: 53, endpointIP: '10.244.1.3' },
  ]);
});

/** The dual-stack DNS service port: its IPv4 half and its IPv6 half, NodePort 30053 in both, an IPv6 external IP. */
const dualFrontends = {
  clusterIPs: [
    { family: 'IPv4' as const, ip: '10.96.0.10' },
    { family: 'IPv6' as const, ip: 'fd00:96::10' },
  ],
  nodePort: 30053,
  externalIPs: [{ family: 'IPv6' as const, ip: '2001:db8::10' }],
  loadBalancerIngress: [],
  loadBalancerSourceRanges: [],
};
const dual = (eps4: string[], eps6: string[]) =>
  dualSnap(
    [dns(eps4, { type: 'NodePort', frontends: dualFrontends })],
    [sp('kube-system/dns:dns', 'fd00:96::10', 53, eps6.map((e) => ep(e)), { protocol: 'UDP', type: 'NodePort', frontends: dualFrontends })],
  );

test('IPv6: a removed endpoint is stale at the IPv6 ClusterIP, external IP and NodePort, marked IPv6; the IPv4 half is compared on its own', (t) => {
  const before = dual(['10.244.1.2:53'], ['[fd00:244:1::2]:53', '[fd00:244:1::3]:53']);
  const after = dual(['10.244.1.2:53'], ['[fd00:244:1::2]:53']);
  t.deepEqual(staleUDPFlows(before, after), [
    { family: 'IPv6', port: 30053, endpointIP: 'fd00:244:1::3' },
    { family: 'IPv6', ip: '2001:db8::10', port: 53, endpointIP: 'fd00:244:1::3' },
    { family: 'IPv6', ip: 'fd00:96::10', port: 53, endpointIP: 'fd00:244:1::3' },
  ]);
  t.deepEqual(staleUDPFlows(before, after, new Set(['kube-system/dns:dns'])), staleUDPFlows(before, after));
  // Both families lose an endpoint: the IPv4 flows first, each with its own NodePort filter.
  t.deepEqual(staleUDPFlows(dual(['10.244.1.2:53'], ['[fd00:244:1::2]:53']), dual([], [])), [
    { port: 30053, endpointIP: '10.244.1.2' },
    { ip: '10.96.0.10', port: 53, endpointIP: '10.244.1.2' },
    { family: 'IPv6', port: 30053, endpointIP: 'fd00:244:1::2' },
    { family: 'IPv6', ip: '2001:db8::10', port: 53, endpointIP: 'fd00:244:1::2' },
    { family: 'IPv6', ip: 'fd00:96::10', port: 53, endpointIP: 'fd00:244:1::2' },
  ]);
});

test('IPv6: a single-stack IPv6 UDP service port that gets its first endpoint: every flow to it is stale', (t) => {
  const v6 = (eps: string[]) => dualSnap([], [sp('ns/v6:dns', 'fd00:96::20', 53, eps.map((e) => ep(e)), { protocol: 'UDP', frontends: { ...dualFrontends, clusterIPs: [{ family: 'IPv6', ip: 'fd00:96::20' }], nodePort: undefined, externalIPs: [] } })]);
  t.deepEqual(staleUDPFlows(v6([]), v6(['[fd00:244:1::4]:53'])), [{ family: 'IPv6', ip: 'fd00:96::20', port: 53 }]);
  t.deepEqual(staleUDPFlows(v6(['[fd00:244:1::4]:53']), snap()), [{ family: 'IPv6', ip: 'fd00:96::20', port: 53, endpointIP: 'fd00:244:1::4' }]);
});

test('conntrack -D arguments of an IPv6 flow: -f ipv6, the endpoint as the reply source; an address of the wrong family is refused', (t) => {
  t.deepEqual(conntrackDeleteArgs({ family: 'IPv6', ip: 'fd00:96::10', port: 53, endpointIP: 'fd00:244:1::3' }), [
    '-D', '-f', 'ipv6', '-p', 'udp', '--orig-dst', 'fd00:96::10', '--orig-port-dst', '53', '--reply-src', 'fd00:244:1::3',
  ]);
  t.deepEqual(conntrackDeleteArgs({ family: 'IPv6', port: 30053 }), ['-D', '-f', 'ipv6', '-p', 'udp', '--orig-port-dst', '30053']);
  t.throws(() => conntrackDeleteArgs({ ip: 'fd00:96::10', port: 53 }), { message: 'stale UDP flow: ip "fd00:96::10" is not an IPv4 address' });
  t.throws(() => conntrackDeleteArgs({ family: 'IPv6', ip: 'fd00:96::10', port: 53, endpointIP: '10.244.1.2 -j' }), {
    message: 'stale UDP flow: endpointIP "10.244.1.2 -j" is not an IPv6 address',
  });
});

test('entries not DNATed: every UDP frontend with an endpoint, of the families asked, the reply from the frontend itself; TCP and endpoint-less frontends left alone', (t) => {
  const both = dual(['10.244.1.2:53'], ['[fd00:244:1::2]:53']);
  const withTcp = { ...both, services: new Map([...both.services, ['default/web:http', web(['10.244.1.5:8080'])], ['ns/empty:dns', sp('ns/empty:dns', '10.96.0.30', 53, [], { protocol: 'UDP' })]]) };
  t.deepEqual(notNATedUDPFlows(withTcp), [
    { port: 30053, notNATed: true },
    { ip: '10.96.0.10', port: 53, notNATed: true },
    { family: 'IPv6', port: 30053, notNATed: true },
    { family: 'IPv6', ip: '2001:db8::10', port: 53, notNATed: true },
    { family: 'IPv6', ip: 'fd00:96::10', port: 53, notNATed: true },
  ]);
  t.deepEqual(notNATedUDPFlows(withTcp, ['IPv6']), notNATedUDPFlows(withTcp).filter((f) => f.family === 'IPv6'));
  t.deepEqual(notNATedUDPFlows(withTcp, []), []);
});

test('conntrack -D arguments of entries not DNATed: an address\'s reply from that address, a NodePort\'s from that port; a bad port or an endpoint with them is refused', (t) => {
  t.deepEqual(conntrackDeleteArgs({ ip: '10.96.0.10', port: 53, notNATed: true }), ['-D', '-p', 'udp', '--orig-dst', '10.96.0.10', '--orig-port-dst', '53', '--reply-src', '10.96.0.10']);
  t.deepEqual(conntrackDeleteArgs({ port: 30053, notNATed: true }), ['-D', '-p', 'udp', '--orig-port-dst', '30053', '--reply-port-src', '30053']);
  t.deepEqual(conntrackDeleteArgs({ family: 'IPv6', ip: 'fd00:96::10', port: 53, notNATed: true }), [
    '-D', '-f', 'ipv6', '-p', 'udp', '--orig-dst', 'fd00:96::10', '--orig-port-dst', '53', '--reply-src', 'fd00:96::10',
  ]);
  t.deepEqual(conntrackDeleteArgs({ family: 'IPv6', port: 30053, notNATed: true }), ['-D', '-f', 'ipv6', '-p', 'udp', '--orig-port-dst', '30053', '--reply-port-src', '30053']);
  t.throws(() => conntrackDeleteArgs({ ip: '10.96.0.10 -x', port: 53, notNATed: true }), { message: 'stale UDP flow: ip "10.96.0.10 -x" is not an IPv4 address' });
  t.throws(() => conntrackDeleteArgs({ port: 0, notNATed: true }), { message: 'stale UDP flow: port 0 is not a port number' });
  t.throws(() => conntrackDeleteArgs({ ip: '10.96.0.10', port: 53, endpointIP: '10.244.1.2', notNATed: true }), { message: 'stale UDP flow: an entry not DNATed has no endpoint' });
});
