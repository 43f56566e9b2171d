/**
 * The external frontends of IPVS mode for the IPv6 view, with real IPv6
 * traffic between network namespaces of the guest: the dual-stack backend
 * (dual-stack.ts) runs in the node namespace and programs the IPv6 view's
 * external IPs (one bound on kube-ipvs0, one the node already holds), a
 * LoadBalancer IP with IPv6 loadBalancerSourceRanges, externalTrafficPolicy
 * Local (with and without a local endpoint), internalTrafficPolicy Local
 * with endpoints on other nodes only, and a UDP NodePort whose endpoint
 * changes under a client that keeps its source port (stale IPv6 conntrack
 * entries deleted by the Proxier, as `drover run` does). The clients are
 * the IPVS testbed's (support/env.ts), each in its own namespace:
 * "outside" (fd00:100::2) and "inside", a pod of this node in the IPv6
 * cluster CIDR (fd00:244:9::2). Endpoint b1 is on this node, b2 on another
 * one, as in ipvs-frontends.test.ts. The tests assert what the backends
 * answer: which backend, and which client address it saw.
 */
import test from 'ava';
import { connectOnce, probe, udpEach, udpOnce } from '../../src/testbed/probe.ts';
import type { Topology } from '../../src/testbed/topology.ts';
import type { Frontends, NodeInfo, ServicePort } from '../../src/model/types.ts';
import { ep, sp } from '../support/snapshots.ts';
import { Driver } from './support/driver-client.ts';
import { assertDropped, clientsSeen, createIpvsTopology, PROBE_TIMEOUT_MS, registerIpvsTests } from './support/env.ts';

const UDP_PORT = 5353;
const BACKENDS = [
  { name: 'b1', ip: '10.244.1.2', ip6: 'fd00:244:1::2', ports: [8080], udpPorts: [UDP_PORT] },
  { name: 'b2', ip: '10.244.1.3', ip6: 'fd00:244:1::3', ports: [8080], udpPorts: [UDP_PORT] },
];
/** The IPv6 cluster CIDR: the endpoints' fd00:244:1::/64 and the "inside" client's fd00:244:9::2 are in it, the "outside" client's fd00:100::2 is not. */
const CLUSTER_CIDR6 = 'fd00:244::/32';
/** The node's address on the client links (the topology's default): an external IP the node already holds. */
const NODE_IP6 = 'fd00:100::1';
const OUTSIDE6 = 'fd00:100::2';
const NODE: NodeInfo = { name: 'node1', addresses: [{ type: 'InternalIP', address: '192.168.100.1' }, { type: 'InternalIP', address: NODE_IP6 }] };
const B1 = '[fd00:244:1::2]:8080';
const B2 = '[fd00:244:1::3]:8080';
/** b1 runs on this node, b2 on another one. */
const endpoints = () => [ep(B1, { nodeName: 'node1' }), ep(B2, { nodeName: 'node2' })];

/** The frontends of an IPv6 service port at `clusterIP`, with `extra` ones. */
const frontends6 = (clusterIP: string, extra: Partial<Frontends> = {}): Frontends => ({
  clusterIPs: [{ family: 'IPv6', ip: clusterIP }],
  externalIPs: [],
  loadBalancerIngress: [],
  loadBalancerSourceRanges: [],
  ...extra,
});

const external = sp('default/ext:http', 'fd00:96::11', 80, endpoints(), {
  frontends: frontends6('fd00:96::11', { externalIPs: [{ family: 'IPv6', ip: '2001:db8:203::10' }, { family: 'IPv6', ip: NODE_IP6 }] }),
});
const local = sp('default/local:http', 'fd00:96::12', 80, endpoints(), {
  type: 'NodePort',
  externalTrafficPolicy: 'Local',
  frontends: frontends6('fd00:96::12', { nodePort: 30081, externalIPs: [{ family: 'IPv6', ip: '2001:db8:203::11' }] }),
});
const lb = sp('default/lb:http', 'fd00:96::13', 80, endpoints(), {
  type: 'LoadBalancer',
  frontends: frontends6('fd00:96::13', {
    loadBalancerIngress: [{ family: 'IPv6', ip: '2001:db8:51::10', ipMode: 'VIP' }],
    // Host bits set on purpose: the range is fd00:244:9::/64, the "inside" client's; the IPv4 range is the IPv4 proxier's.
    loadBalancerSourceRanges: ['fd00:244:9::7/64', '10.0.0.0/8'],
  }),
});
const noLocal = sp('default/nolocal:http', 'fd00:96::14', 80, [ep(B2, { nodeName: 'node2' })], {
  type: 'NodePort',
  externalTrafficPolicy: 'Local',
  frontends: frontends6('fd00:96::14', { nodePort: 30082, externalIPs: [{ family: 'IPv6', ip: '2001:db8:203::12' }] }),
});
const none = sp('default/none:http', 'fd00:96::15', 80, [], { type: 'NodePort', externalTrafficPolicy: 'Local', frontends: frontends6('fd00:96::15', { nodePort: 30083 }) });
/** internalTrafficPolicy Local with its only endpoint on another node. */
const itpLocal = sp('default/itp:http', 'fd00:96::17', 80, [ep(B2, { nodeName: 'node2' })], { internalTrafficPolicy: 'Local', frontends: frontends6('fd00:96::17') });
/** A UDP NodePort Service with one endpoint, `backend` (b1 or b2). */
const dns = (backend: string) =>
  sp('default/dns:dns', 'fd00:96::53', 53, [ep(`[${backend}]:${UDP_PORT}`)], { protocol: 'UDP', type: 'NodePort', frontends: frontends6('fd00:96::53', { nodePort: 30053 }) });
const SERVICES6: ServicePort[] = [external, local, lb, noLocal, none, itpLocal, dns('fd00:244:1::2')];

let topo: Topology;
let driver: Driver;

/** Addresses on kube-ipvs0 in the node namespace, with their prefix length, sorted. */
async function boundAddresses(): Promise<string[]> {
  const out = (await topo.exec(topo.node, 'ip', ['-o', '-6', 'addr', 'show', 'dev', 'kube-ipvs0'])).stdout;
  return [...out.matchAll(/inet6 (\S+)/g)].map((m) => m[1]!).sort();
}

if (await registerIpvsTests('IPVS IPv6 frontends tests')) {
  test.before(async () => {
    topo = await createIpvsTopology(BACKENDS, { ipv6: true });
    driver = await Driver.start(topo.node);
    await driver.open({ dualStack: { clusterCIDR6: CLUSTER_CIDR6 }, readNodeAddresses: true, conntrack: true });
    await driver.sync([], { full: true }, NODE, SERVICES6);
  });

  test.after.always(async () => {
    await driver?.stop();
    await topo?.destroy();
  });

  test.serial('an IPv6 external IP bound on kube-ipvs0, and one the node already holds (not bound), reach every endpoint, masqueraded', async (t) => {
    const bound = await boundAddresses();
    t.log(bound.join(' '));
    t.true(bound.includes('2001:db8:203::10/128'), 'the external IP is bound on kube-ipvs0');
    t.false(bound.includes(`${NODE_IP6}/128`), 'the node address is not bound on kube-ipvs0');
    for (const host of ['2001:db8:203::10', NODE_IP6]) {
      const s = await probe(topo, { from: topo.client('outside').netns, host, port: 80, count: 10, timeoutMs: PROBE_TIMEOUT_MS });
      t.deepEqual(s.errors, {}, host);
      t.deepEqual(s.counts, { b1: 5, b2: 5 }, host);
      t.deepEqual(clientsSeen(s), [topo.ipv6.gateway], `${host}: the endpoints see the node (masquerade)`);
    }
  });

  test.serial('an IPv6 LoadBalancer IP with IPv6 source ranges: a client in the range reaches the endpoints; one outside it is dropped', async (t) => {
    const inside = await probe(topo, { from: topo.client('inside').netns, host: '2001:db8:51::10', port: 80, count: 4, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(inside.errors, {});
    t.deepEqual(inside.counts, { b1: 2, b2: 2 });
    const outside = await connectOnce(topo, { from: topo.client('outside').netns, host: '2001:db8:51::10', port: 80, timeoutMs: 2000 });
    assertDropped(t, outside, 'outside the source ranges');
  });

  test.serial('externalTrafficPolicy Local: the IPv6 NodePort and external IP reach only the local endpoint and keep the client address; the ClusterIP keeps both', async (t) => {
    for (const [host, port] of [[NODE_IP6, 30081], ['2001:db8:203::11', 80]] as const) {
      const s = await probe(topo, { from: topo.client('outside').netns, host, port, count: 6, timeoutMs: PROBE_TIMEOUT_MS });
      t.deepEqual(s.errors, {}, `[${host}]:${port}`);
      t.deepEqual(s.counts, { b1: 6 }, `[${host}]:${port}`);
      t.deepEqual(clientsSeen(s), [OUTSIDE6], `[${host}]:${port}: not masqueraded`);
    }
    const c = await probe(topo, { from: topo.client('inside').netns, host: 'fd00:96::12', port: 80, count: 6, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(c.errors, {});
    t.deepEqual(c.counts, { b1: 3, b2: 3 });
  });

  test.serial('externalTrafficPolicy Local without a local endpoint: an outside client is dropped when endpoints exist elsewhere, refused when none exists', async (t) => {
    for (const [host, port] of [[NODE_IP6, 30082], ['2001:db8:203::12', 80]] as const) {
      assertDropped(t, await connectOnce(topo, { from: topo.client('outside').netns, host, port, timeoutMs: 2000 }), `[${host}]:${port}`);
    }
    // ICMPv6 port unreachable from IPVS (ip_vs_leave); a longer wait than for IPv4, which the emulated guest needs for its first one.
    const refused = await connectOnce(topo, { from: topo.client('outside').netns, host: NODE_IP6, port: 30083, timeoutMs: 3000 });
    t.deepEqual(refused, { ok: false, code: 'ECONNREFUSED' });
  });

  test.serial("externalTrafficPolicy Local without a local endpoint: this node's pods (IPv6 cluster CIDR) and the node itself reach the other node's endpoint", async (t) => {
    for (const from of [topo.client('inside').netns, topo.node]) {
      for (const [host, port] of [[NODE_IP6, 30082], ['2001:db8:203::12', 80]] as const) {
        const s = await probe(topo, { from, host, port, count: 2, timeoutMs: PROBE_TIMEOUT_MS });
        const who = from === topo.node ? 'node' : 'pod';
        t.log(who, `[${host}]:${port}`, JSON.stringify(s.counts), JSON.stringify(s.errors), JSON.stringify(clientsSeen(s)));
        t.deepEqual(s.errors, {}, `${who} -> [${host}]:${port}`);
        t.deepEqual(s.counts, { b2: 2 }, `${who} -> [${host}]:${port}`);
      }
    }
  });

  test.serial("internalTrafficPolicy Local with endpoints on other nodes only: a pod's connection to the IPv6 ClusterIP is dropped, not refused", async (t) => {
    assertDropped(t, await connectOnce(topo, { from: topo.client('inside').netns, host: 'fd00:96::17', port: 80, timeoutMs: 2000 }), 'pod -> [fd00:96::17]:80');
  });

  test.serial('UDP on the IPv6 NodePort: a client that keeps its source port reaches the new endpoint after a change (its stale conntrack entry deleted)', async (t) => {
    const flow = { from: topo.client('outside').netns, host: NODE_IP6, port: 30053, sourcePort: 40053, timeoutMs: PROBE_TIMEOUT_MS };
    for (const r of await udpEach(topo, { ...flow, sourcePorts: [flow.sourcePort, flow.sourcePort] })) {
      t.like(r, { ok: true, reply: { backend: 'b1', ip: 'fd00:244:1::2' } }, JSON.stringify(r));
    }
    // The node's IPv6 UDP conntrack entries to the NodePort; without the deletion the flow would stay on b1, gone from the Service.
    const entries = async () => (await topo.exec(topo.node, 'conntrack', ['-L', '-f', 'ipv6', '-p', 'udp', '--orig-port-dst', '30053'], { allowFail: true })).stdout.trim();
    const before = await entries();
    t.log('before:', before);
    t.regex(before, /sport=40053 dport=30053 src=fd00:244:1::2 /, 'the flow is NATed to b1');
    await driver.sync([], { full: false }, NODE, [...SERVICES6.slice(0, -1), dns('fd00:244:1::3')]);
    const deleted = await entries();
    t.log('after:', deleted);
    t.notRegex(deleted, /src=fd00:244:1::2 /, 'no entry to b1 is left');
    const after = await udpOnce(topo, flow);
    t.like(after, { ok: true, reply: { backend: 'b2', ip: 'fd00:244:1::3' } }, JSON.stringify(after));
  });
}
