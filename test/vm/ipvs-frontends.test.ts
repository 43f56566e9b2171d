/**
 * The external frontends of IPVS mode on a real kernel (src/modes/ipvs/
 * frontends.ts), between network namespaces of the guest (src/testbed
 * topology): NodePorts on the node's own addresses, external IPs,
 * externalTrafficPolicy Local (with and without a local endpoint), and a
 * LoadBalancer IP with source ranges.
 * The node's addresses are read by the driver inside the node namespace
 * (node-ips.ts), as `drover run` reads them.
 */
import test from 'ava';
import { connectOnce, probe } from '../../src/testbed/probe.ts';
import type { Topology } from '../../src/testbed/topology.ts';
import { ipv4Frontends, type NodeInfo, type ServicePort } from '../../src/model/types.ts';
import type { NodeAddresses } from '../../src/modes/ipvs/frontends.ts';
import { ep, sp } from '../support/snapshots.ts';
import { Driver } from './support/driver-client.ts';
import { createIpvsTopology, ipvsadmState, registerIpvsTests } from './support/env.ts';
import { run } from '../../src/testbed/exec.ts';

const BACKENDS = [
  { name: 'b1', ip: '10.244.1.2', ports: [8080] },
  { name: 'b2', ip: '10.244.1.3', ports: [8080] },
];
const NODE: NodeInfo = { name: 'node1', addresses: [{ type: 'InternalIP', address: '192.168.100.1' }] };
/** b1 runs on this node, b2 on another one. */
const endpoints = () => [ep('10.244.1.2:8080', { nodeName: 'node1' }), ep('10.244.1.3:8080', { nodeName: 'node2' })];

const nodePort = sp('default/np:http', '10.96.1.10', 80, endpoints(), { type: 'NodePort', frontends: ipv4Frontends('10.96.1.10', 30080) });
const external = sp('default/ext:http', '10.96.1.11', 80, endpoints(), {
  frontends: { ...ipv4Frontends('10.96.1.11'), externalIPs: [{ family: 'IPv4', ip: '203.0.113.10' }] },
});
const local = sp('default/local:http', '10.96.1.12', 80, endpoints(), {
  type: 'NodePort',
  externalTrafficPolicy: 'Local',
  frontends: { ...ipv4Frontends('10.96.1.12', 30081), externalIPs: [{ family: 'IPv4', ip: '203.0.113.11' }] },
});
const lb = sp('default/lb:http', '10.96.1.13', 80, endpoints(), {
  type: 'LoadBalancer',
  frontends: {
    ...ipv4Frontends('10.96.1.13'),
    loadBalancerIngress: [{ family: 'IPv4', ip: '198.51.100.10', ipMode: 'VIP' }],
    // Host bits set on purpose: the range is 10.244.9.0/24, the "inside" client's.
    loadBalancerSourceRanges: ['10.244.9.7/24'],
  },
});
const noLocal = sp('default/nolocal:http', '10.96.1.14', 80, [ep('10.244.1.3:8080', { nodeName: 'node2' })], {
  type: 'NodePort',
  externalTrafficPolicy: 'Local',
  frontends: ipv4Frontends('10.96.1.14', 30082),
});
const none = sp('default/none:http', '10.96.1.15', 80, [], { type: 'NodePort', externalTrafficPolicy: 'Local', frontends: ipv4Frontends('10.96.1.15', 30083) });
const SERVICES: ServicePort[] = [nodePort, external, local, lb, noLocal, none];

let topo: Topology;
let driver: Driver;
let addresses: NodeAddresses;

/** ipvsadmState lines grouped per virtual server ("TCP 10.96.1.10:80 rr | -> 10.244.1.2:8080 Masq 1 | ..."), sorted. */
function byServer(lines: readonly string[]): string[] {
  const groups: string[][] = [];
  for (const l of lines) {
    if (l.startsWith('->')) groups.at(-1)!.push(l);
    else groups.push([l]);
  }
  return groups.map(([head, ...reals]) => [head, ...reals.sort()].join(' | ')).sort();
}

/** Distinct source addresses the backends saw. */
const seen = (s: Awaited<ReturnType<typeof probe>>) => [...new Set(Object.values(s.clientsSeen).flat())].sort();

if (await registerIpvsTests('IPVS frontends tests')) {
  test.before(async () => {
    topo = await createIpvsTopology(BACKENDS);
    driver = await Driver.start(topo.node);
    ({ nodeAddresses: addresses } = (await driver.open({ readNodeAddresses: true })) as { nodeAddresses: NodeAddresses });
    await driver.sync(SERVICES, { full: true }, NODE);
  });

  test.after.always(async () => {
    await driver?.stop();
    await topo?.destroy();
  });

  test.serial('the node addresses are read in the node namespace; ipvsadm lists exactly the desired virtual servers', async (t) => {
    t.deepEqual(addresses.nodePortIPs, [topo.gateway, topo.nodeIp]);
    const both = ['-> 10.244.1.2:8080 Masq 1', '-> 10.244.1.3:8080 Masq 1'];
    const onlyLocal = ['-> 10.244.1.2:8080 Masq 1'];
    const state = await ipvsadmState(topo.node);
    t.log(state.join('\n'));
    // Compared as a set: ipvsadm's order is not numeric address order (the guest lists 192.168.100.1 first).
    t.deepEqual(byServer(state), byServer([
      'TCP 10.96.1.10:80 rr', ...both,
      'TCP 10.96.1.11:80 rr', ...both,
      'TCP 10.96.1.12:80 rr', ...both,
      'TCP 10.96.1.13:80 rr', ...both,
      'TCP 10.96.1.14:80 rr', '-> 10.244.1.3:8080 Masq 1',
      'TCP 10.96.1.15:80 rr',
      `TCP ${topo.gateway}:30080 rr`, ...both,
      `TCP ${topo.gateway}:30081 rr`, ...onlyLocal,
      `TCP ${topo.gateway}:30082 rr`,
      `TCP ${topo.gateway}:30083 rr`,
      `TCP ${topo.nodeIp}:30080 rr`, ...both,
      `TCP ${topo.nodeIp}:30081 rr`, ...onlyLocal,
      `TCP ${topo.nodeIp}:30082 rr`,
      `TCP ${topo.nodeIp}:30083 rr`,
      'TCP 198.51.100.10:80 rr', ...both,
      'TCP 203.0.113.10:80 rr', ...both,
      'TCP 203.0.113.11:80 rr', ...onlyLocal,
    ]));
    const ips = await run('ip', ['-o', '-4', 'addr', 'show', 'dev', 'kube-ipvs0'], { netns: topo.node });
    const bound = [...ips.stdout.matchAll(/inet (\S+)/g)].map((m) => m[1]).sort();
    t.deepEqual(bound, ['10.96.1.10/32', '10.96.1.11/32', '10.96.1.12/32', '10.96.1.13/32', '10.96.1.14/32', '10.96.1.15/32', '198.51.100.10/32', '203.0.113.10/32', '203.0.113.11/32']);
  });

  test.serial('a NodePort on the node address reaches every endpoint, masqueraded', async (t) => {
    const s = await probe(topo, { from: topo.client('outside').netns, host: topo.nodeIp, port: 30080, count: 10 });
    t.deepEqual(s.errors, {});
    t.deepEqual(s.counts, { b1: 5, b2: 5 });
    t.deepEqual(seen(s), [topo.gateway], 'the endpoints see the node (KUBE-NODE-PORT-TCP marks it for masquerade)');
  });

  test.serial('an external IP reaches every endpoint, masqueraded', async (t) => {
    const s = await probe(topo, { from: topo.client('outside').netns, host: '203.0.113.10', port: 80, count: 10 });
    t.deepEqual(s.errors, {});
    t.deepEqual(s.counts, { b1: 5, b2: 5 });
    t.deepEqual(seen(s), [topo.gateway]);
  });

  test.serial('externalTrafficPolicy Local: NodePort and external IP reach only the local endpoint and keep the client address; the ClusterIP keeps both', async (t) => {
    for (const [host, port] of [[topo.nodeIp, 30081], ['203.0.113.11', 80]] as const) {
      const s = await probe(topo, { from: topo.client('outside').netns, host, port, count: 6 });
      t.deepEqual(s.errors, {}, `${host}:${port}`);
      t.deepEqual(s.counts, { b1: 6 }, `${host}:${port}`);
      t.deepEqual(seen(s), ['192.168.100.2'], `${host}:${port}: not masqueraded`);
    }
    const c = await probe(topo, { from: topo.client('inside').netns, host: '10.96.1.12', port: 80, count: 6 });
    t.deepEqual(c.counts, { b1: 3, b2: 3 });
  });

  test.serial('externalTrafficPolicy Local without a local endpoint: dropped when endpoints exist elsewhere (KUBE-EXTERNAL-NO-LOCAL), refused when none exists', async (t) => {
    const dropped = await connectOnce(topo, { from: topo.client('outside').netns, host: topo.nodeIp, port: 30082, timeoutMs: 2000 });
    t.log(JSON.stringify(dropped));
    t.false(dropped.ok);
    t.not((dropped as { code?: string }).code, 'ECONNREFUSED', 'dropped (a timeout), not refused');
    const refused = await connectOnce(topo, { from: topo.client('outside').netns, host: topo.nodeIp, port: 30083, timeoutMs: 1000 });
    t.deepEqual(refused, { ok: false, code: 'ECONNREFUSED' });
  });

  test.serial('a LoadBalancer IP with source ranges: a client in the range gets through; one outside it is dropped', async (t) => {
    const inside = await probe(topo, { from: topo.client('inside').netns, host: '198.51.100.10', port: 80, count: 4 });
    t.deepEqual(inside.errors, {});
    t.deepEqual(inside.counts, { b1: 2, b2: 2 });
    const outside = await connectOnce(topo, { from: topo.client('outside').netns, host: '198.51.100.10', port: 80, timeoutMs: 2000 });
    t.log(JSON.stringify(outside));
    t.false(outside.ok);
    t.not((outside as { code?: string }).code, 'ECONNREFUSED', 'dropped (a timeout), not refused');
  });

  test.serial('the ipsets hold kube-proxy-style entries, and the next full sync writes nothing', async (t) => {
    const save = (await run('ipset', ['save'], { netns: topo.node })).stdout;
    t.log(save.split('\n').filter((l) => /KUBE-(NODE-PORT|LOAD-BALANCER|EXTERNAL)/.test(l)).join('\n'));
    t.regex(save, /^add KUBE-NODE-PORT-TCP 30080$/m);
    t.regex(save, /^add KUBE-NODE-PORT-LOCAL-TCP 30081$/m);
    t.regex(save, /^add KUBE-EXTERNAL-IP 203\.0\.113\.10,tcp:80$/m);
    t.regex(save, /^add KUBE-EXTERNAL-IP-LOCAL 203\.0\.113\.11,tcp:80$/m);
    t.regex(save, /^add KUBE-LOAD-BALANCER-FW 198\.51\.100\.10,tcp:80$/m);
    t.regex(save, /^add KUBE-LOAD-BALANCER-SOURCE-CIDR 198\.51\.100\.10,tcp:80,10\.244\.9\.0\/24$/m);
    t.regex(save, /^add KUBE-EXTERNAL-NO-LOCAL 192\.168\.100\.1,tcp:30082$/m);
    t.notRegex(save, /^add KUBE-EXTERNAL-NO-LOCAL \S+,tcp:30083$/m);
    const again = await driver.sync(SERVICES, { full: true }, NODE);
    t.log(JSON.stringify(again.result));
    t.like(again.result, { transactions: 0 }, 'nothing differs: no ipset restore, no iptables-restore');
    t.like(again.detail, { addressesAdded: 0, addressesRemoved: 0, ipsetAdded: 0, ipsetDeleted: 0 });
  });

  test.serial('removing the frontends removes their virtual servers, set entries and kube-ipvs0 addresses', async (t) => {
    const plain = SERVICES.map((s) => ({ ...s, type: 'ClusterIP' as const, externalTrafficPolicy: 'Cluster' as const, frontends: ipv4Frontends(s.clusterIP) }));
    await driver.sync(plain, { full: false, changed: plain.map((s) => s.key) }, NODE);
    const state = await ipvsadmState(topo.node);
    t.deepEqual(state.filter((l) => l.startsWith('TCP')).sort(), ['TCP 10.96.1.10:80 rr', 'TCP 10.96.1.11:80 rr', 'TCP 10.96.1.12:80 rr', 'TCP 10.96.1.13:80 rr', 'TCP 10.96.1.14:80 rr', 'TCP 10.96.1.15:80 rr']);
    const save = (await run('ipset', ['save'], { netns: topo.node })).stdout;
    t.notRegex(save, /^add KUBE-(NODE-PORT|LOAD-BALANCER|EXTERNAL)/m, 'KUBE-EXTERNAL-NO-LOCAL included');
    const ips = await run('ip', ['-o', '-4', 'addr', 'show', 'dev', 'kube-ipvs0'], { netns: topo.node });
    t.notRegex(ips.stdout, /198\.51\.100\.10|203\.0\.113\./);
  });
}
