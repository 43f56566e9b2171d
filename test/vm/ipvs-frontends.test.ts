/**
 * The external frontends of IPVS mode on a real kernel (src/modes/ipvs/
 * frontends.ts), between network namespaces of the guest (src/testbed
 * topology): NodePorts on the node's own addresses, external IPs,
 * externalTrafficPolicy Local (with and without a local endpoint: this
 * node's pods and the node itself still get through), a LoadBalancer IP
 * with source ranges (the node itself too: KUBE-IPVS-OUT-FILTER),
 * internalTrafficPolicy Local with endpoints on other nodes only (dropped,
 * from pods and from the node itself), the health-check NodePort's accept rule (filter
 * KUBE-NODE-PORT) and KUBE-IPVS-FILTER (a ClusterIP does not expose the
 * node's own ports).
 * The node's addresses are read by the driver inside the node namespace
 * (node-ips.ts), as `drover run` reads them.
 */
import test from 'ava';
import { spawn, type ChildProcess } from 'node:child_process';
import { connectOnce, holdConnection, probe } from '../../src/testbed/probe.ts';
import type { Topology } from '../../src/testbed/topology.ts';
import { ipv4Frontends, type NodeInfo, type ServicePort } from '../../src/model/types.ts';
import type { NodeAddresses } from '../../src/modes/ipvs/frontends.ts';
import { ep, sp } from '../support/snapshots.ts';
import { Driver } from './support/driver-client.ts';
import { clientsSeen as seen, createIpvsTopology, ipvsadmState, PROBE_TIMEOUT_MS, realServerConns, registerIpvsTests } from './support/env.ts';
import { run } from '../../src/testbed/exec.ts';
import { helperArgv } from '../../src/testbed/topology.ts';

const BACKENDS = [
  { name: 'b1', ip: '10.244.1.2', ports: [8080] },
  { name: 'b2', ip: '10.244.1.3', ports: [8080] },
];
/** The health-check NodePort of `health`, and a port nothing of drover's uses; an echo server listens on both in the node namespace. */
const HEALTH_PORT = 30300;
const NODE_OWN_PORT = 9999;
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
  frontends: { ...ipv4Frontends('10.96.1.14', 30082), externalIPs: [{ family: 'IPv4', ip: '203.0.113.12' }] },
});
const none = sp('default/none:http', '10.96.1.15', 80, [], { type: 'NodePort', externalTrafficPolicy: 'Local', frontends: ipv4Frontends('10.96.1.15', 30083) });
/** A LoadBalancer Service still waiting for its IP, with a health-check NodePort. */
const health = sp('default/health:http', '10.96.1.16', 80, endpoints(), {
  type: 'LoadBalancer',
  externalTrafficPolicy: 'Local',
  frontends: { ...ipv4Frontends('10.96.1.16'), healthCheckNodePort: HEALTH_PORT },
});
/** internalTrafficPolicy Local with its only endpoint on another node: no virtual server, dropped. */
const itpLocal = sp('default/itp:http', '10.96.1.17', 80, [ep('10.244.1.3:8080', { nodeName: 'node2' })], { internalTrafficPolicy: 'Local' });
/** A LoadBalancer IP whose source range holds the node's InternalIP: the node itself is let in (KUBE-LOAD-BALANCER-SOURCE-IP). */
const lbNode = sp('default/lbnode:http', '10.96.1.18', 80, endpoints(), {
  type: 'LoadBalancer',
  frontends: { ...ipv4Frontends('10.96.1.18'), loadBalancerIngress: [{ family: 'IPv4', ip: '198.51.100.11', ipMode: 'VIP' }], loadBalancerSourceRanges: ['192.168.100.0/24'] },
});
const SERVICES: ServicePort[] = [nodePort, external, local, lb, noLocal, none, health, itpLocal, lbNode];

let topo: Topology;
let driver: Driver;
let addresses: NodeAddresses;
let nodeServer: ChildProcess | undefined;

/** How long the node's echo server may take to listen: a Node.js start, seconds under emulation, as the topology's own servers (createIpvsTopology). */
const NODE_SERVER_READY_MS = 120_000;

/** Start an echo server (src/testbed/echo-server.mjs) on every address of the node namespace, at HEALTH_PORT and NODE_OWN_PORT; killed when it does not listen in time. */
function startNodeServer(): Promise<ChildProcess> {
  const child = spawn('ip', ['netns', 'exec', topo.node, ...helperArgv('echo-server.mjs', ['--name', 'node', '--ip', '0.0.0.0', '--ports', `${HEALTH_PORT},${NODE_OWN_PORT}`])], { stdio: ['pipe', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`echo server in the node namespace: not listening after ${NODE_SERVER_READY_MS / 1000} s`));
    }, NODE_SERVER_READY_MS);
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (out.includes('READY\n')) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.on('exit', (code) => reject(new Error(`echo server in the node namespace exited (${code})`)));
  });
}

/** ipvsadmState lines grouped per virtual server ("TCP 10.96.1.10:80 rr | -> 10.244.1.2:8080 Masq 1 | ..."), sorted. */
function byServer(lines: readonly string[]): string[] {
  const groups: string[][] = [];
  for (const l of lines) {
    if (l.startsWith('->')) groups.at(-1)!.push(l);
    else groups.push([l]);
  }
  return groups.map(([head, ...reals]) => [head, ...reals.sort()].join(' | ')).sort();
}

if (await registerIpvsTests('IPVS frontends tests')) {
  test.before(async () => {
    topo = await createIpvsTopology(BACKENDS);
    driver = await Driver.start(topo.node);
    ({ nodeAddresses: addresses } = (await driver.open({ readNodeAddresses: true })) as { nodeAddresses: NodeAddresses });
    await driver.sync(SERVICES, { full: true }, NODE);
    nodeServer = await startNodeServer();
  });

  test.after.always(async () => {
    nodeServer?.stdin?.end();
    nodeServer?.kill();
    await driver?.stop();
    await topo?.destroy();
  });

  test.serial('the node addresses are read in the node namespace; ipvsadm lists exactly the desired virtual servers', async (t) => {
    t.deepEqual(addresses.nodePortIPs, [topo.gateway, topo.nodeIp]);
    const both = ['-> 10.244.1.2:8080 Masq 1', '-> 10.244.1.3:8080 Masq 1'];
    const onlyLocal = ['-> 10.244.1.2:8080 Masq 1'];
    // externalTrafficPolicy Local without a local endpoint: the cluster set, for this node's pods and the node itself.
    const onlyOther = ['-> 10.244.1.3:8080 Masq 1'];
    const state = await ipvsadmState(topo.node);
    t.log(state.join('\n'));
    // Compared as a set: ipvsadm's order is not numeric address order (the guest lists 192.168.100.1 first).
    t.deepEqual(byServer(state), byServer([
      'TCP 10.96.1.10:80 rr', ...both,
      'TCP 10.96.1.11:80 rr', ...both,
      'TCP 10.96.1.12:80 rr', ...both,
      'TCP 10.96.1.13:80 rr', ...both,
      'TCP 10.96.1.14:80 rr', ...onlyOther,
      'TCP 10.96.1.15:80 rr',
      'TCP 10.96.1.16:80 rr', ...both,
      'TCP 10.96.1.18:80 rr', ...both,
      `TCP ${topo.gateway}:30080 rr`, ...both,
      `TCP ${topo.gateway}:30081 rr`, ...onlyLocal,
      `TCP ${topo.gateway}:30082 rr`, ...onlyOther,
      `TCP ${topo.gateway}:30083 rr`,
      `TCP ${topo.nodeIp}:30080 rr`, ...both,
      `TCP ${topo.nodeIp}:30081 rr`, ...onlyLocal,
      `TCP ${topo.nodeIp}:30082 rr`, ...onlyOther,
      `TCP ${topo.nodeIp}:30083 rr`,
      'TCP 198.51.100.10:80 rr', ...both,
      'TCP 198.51.100.11:80 rr', ...both,
      'TCP 203.0.113.10:80 rr', ...both,
      'TCP 203.0.113.11:80 rr', ...onlyLocal,
      'TCP 203.0.113.12:80 rr', ...onlyOther,
    ]));
    const ips = await run('ip', ['-o', '-4', 'addr', 'show', 'dev', 'kube-ipvs0'], { netns: topo.node });
    const bound = [...ips.stdout.matchAll(/inet (\S+)/g)].map((m) => m[1]).sort();
    // 10.96.1.17 has no virtual server (internalTrafficPolicy Local, endpoints elsewhere only) but stays bound, so that the rules see its connections.
    t.deepEqual(bound, ['10.96.1.10/32', '10.96.1.11/32', '10.96.1.12/32', '10.96.1.13/32', '10.96.1.14/32', '10.96.1.15/32', '10.96.1.16/32', '10.96.1.17/32', '10.96.1.18/32', '198.51.100.10/32', '198.51.100.11/32', '203.0.113.10/32', '203.0.113.11/32', '203.0.113.12/32']);
    const save = (await run('ipset', ['save'], { netns: topo.node })).stdout;
    const ipvsIps = [...save.matchAll(/^add KUBE-IPVS-IPS (\S+)$/gm)].map((m) => `${m[1]}/32`).sort();
    t.deepEqual(ipvsIps, bound, 'KUBE-IPVS-IPS holds every address of kube-ipvs0');
  });

  test.serial('a NodePort on the node address reaches every endpoint, masqueraded', async (t) => {
    const s = await probe(topo, { from: topo.client('outside').netns, host: topo.nodeIp, port: 30080, count: 10, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(s.errors, {});
    t.deepEqual(s.counts, { b1: 5, b2: 5 });
    t.deepEqual(seen(s), [topo.gateway], 'the endpoints see the node (KUBE-NODE-PORT-TCP marks it for masquerade)');
  });

  test.serial('an external IP reaches every endpoint, masqueraded', async (t) => {
    const s = await probe(topo, { from: topo.client('outside').netns, host: '203.0.113.10', port: 80, count: 10, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(s.errors, {});
    t.deepEqual(s.counts, { b1: 5, b2: 5 });
    t.deepEqual(seen(s), [topo.gateway]);
  });

  test.serial('externalTrafficPolicy Local: NodePort and external IP reach only the local endpoint and keep the client address; the ClusterIP keeps both', async (t) => {
    for (const [host, port] of [[topo.nodeIp, 30081], ['203.0.113.11', 80]] as const) {
      const s = await probe(topo, { from: topo.client('outside').netns, host, port, count: 6, timeoutMs: PROBE_TIMEOUT_MS });
      t.deepEqual(s.errors, {}, `${host}:${port}`);
      t.deepEqual(s.counts, { b1: 6 }, `${host}:${port}`);
      t.deepEqual(seen(s), ['192.168.100.2'], `${host}:${port}: not masqueraded`);
    }
    const c = await probe(topo, { from: topo.client('inside').netns, host: '10.96.1.12', port: 80, count: 6, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(c.counts, { b1: 3, b2: 3 });
  });

  test.serial('externalTrafficPolicy Local without a local endpoint: dropped when endpoints exist elsewhere (KUBE-EXTERNAL-NO-LOCAL), refused when none exists', async (t) => {
    for (const [host, port] of [[topo.nodeIp, 30082], ['203.0.113.12', 80]] as const) {
      const dropped = await connectOnce(topo, { from: topo.client('outside').netns, host, port, timeoutMs: 2000 });
      t.log(`${host}:${port}`, JSON.stringify(dropped));
      t.false(dropped.ok, `${host}:${port}`);
      t.not((dropped as { code?: string }).code, 'ECONNREFUSED', `${host}:${port}: dropped (a timeout), not refused`);
    }
    const refused = await connectOnce(topo, { from: topo.client('outside').netns, host: topo.nodeIp, port: 30083, timeoutMs: 1000 });
    t.deepEqual(refused, { ok: false, code: 'ECONNREFUSED' });
  });

  test.serial("externalTrafficPolicy Local without a local endpoint: this node's pods and the node itself reach the other node's endpoint through the NodePort and the external IP", async (t) => {
    for (const from of [topo.client('inside').netns, topo.node]) {
      for (const [host, port] of [[topo.nodeIp, 30082], ['203.0.113.12', 80]] as const) {
        const s = await probe(topo, { from, host, port, count: 2, timeoutMs: PROBE_TIMEOUT_MS });
        t.log(from === topo.node ? 'node' : 'pod', `${host}:${port}`, JSON.stringify(s.counts), JSON.stringify(s.errors), JSON.stringify(seen(s)));
        t.deepEqual(s.errors, {}, `${from} -> ${host}:${port}`);
        t.deepEqual(s.counts, { b2: 2 }, `${from} -> ${host}:${port}`);
      }
    }
  });

  test.serial("internalTrafficPolicy Local with endpoints on other nodes only: a pod's connection to the ClusterIP and the node's own are dropped, not refused", async (t) => {
    for (const [who, from] of [['pod', topo.client('inside').netns], ['node', topo.node]] as const) {
      const dropped = await connectOnce(topo, { from, host: '10.96.1.17', port: 80, timeoutMs: 2000 });
      t.log(who, JSON.stringify(dropped));
      t.false(dropped.ok, who);
      t.not((dropped as { code?: string }).code, 'ECONNREFUSED', `${who}: dropped (a timeout), not refused`);
    }
    const filter = (await run('iptables-save', ['-t', 'filter'], { netns: topo.node })).stdout;
    t.regex(filter, /^-A KUBE-IPVS-OUT-FILTER -m mark --mark 0x8000\/0x8000 .*-j DROP$/m);
    const counted = (await run('iptables', ['-t', 'filter', '-L', 'KUBE-IPVS-OUT-FILTER', '-v', '-n', '-x'], { netns: topo.node })).stdout;
    t.log(counted);
    t.regex(counted, /^\s*[1-9]\d*\s+\d+\s+DROP/m, 'the node\'s connection was dropped in filter KUBE-IPVS-OUT-FILTER');
  });

  test.serial("KUBE-IPVS-FILTER: a ClusterIP does not expose the node's own listening ports", async (t) => {
    const direct = await connectOnce(topo, { from: topo.client('inside').netns, host: topo.nodeIp, port: NODE_OWN_PORT, timeoutMs: PROBE_TIMEOUT_MS });
    t.true(direct.ok, `the node's own server answers on its address: ${JSON.stringify(direct)}`);
    for (const host of ['10.96.1.10', '203.0.113.10']) {
      const viaVip = await connectOnce(topo, { from: topo.client('inside').netns, host, port: NODE_OWN_PORT, timeoutMs: 3000 });
      t.deepEqual(viaVip, { ok: false, code: 'ECONNREFUSED' }, `${host}:${NODE_OWN_PORT} is rejected`);
    }
    const service = await connectOnce(topo, { from: topo.client('inside').netns, host: '10.96.1.10', port: 80, timeoutMs: PROBE_TIMEOUT_MS });
    t.true(service.ok, 'the virtual server itself is not filtered');
  });

  test.serial('the health-check NodePort is accepted in filter KUBE-NODE-PORT when INPUT drops everything else', async (t) => {
    await run('iptables', ['-P', 'INPUT', 'DROP'], { netns: topo.node });
    try {
      const hc = await connectOnce(topo, { from: topo.client('outside').netns, host: topo.nodeIp, port: HEALTH_PORT, timeoutMs: PROBE_TIMEOUT_MS });
      t.true(hc.ok, `health-check NodePort: ${JSON.stringify(hc)}`);
      const other = await connectOnce(topo, { from: topo.client('outside').netns, host: topo.nodeIp, port: NODE_OWN_PORT, timeoutMs: 2000 });
      t.false(other.ok, 'another port of the node is dropped by the policy');
    } finally {
      await run('iptables', ['-P', 'INPUT', 'ACCEPT'], { netns: topo.node });
    }
  });

  test.serial('a LoadBalancer IP with source ranges: a client in the range gets through; one outside it is dropped', async (t) => {
    const inside = await probe(topo, { from: topo.client('inside').netns, host: '198.51.100.10', port: 80, count: 4, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(inside.errors, {});
    t.deepEqual(inside.counts, { b1: 2, b2: 2 });
    const outside = await connectOnce(topo, { from: topo.client('outside').netns, host: '198.51.100.10', port: 80, timeoutMs: 2000 });
    t.log(JSON.stringify(outside));
    t.false(outside.ok);
    t.not((outside as { code?: string }).code, 'ECONNREFUSED', 'dropped (a timeout), not refused');
  });

  test.serial("a LoadBalancer IP with source ranges from the node itself: dropped when the ranges leave the node out (KUBE-IPVS-OUT-FILTER), let in when one holds its InternalIP", async (t) => {
    const fromNode = await connectOnce(topo, { from: topo.node, host: '198.51.100.10', port: 80, timeoutMs: 2000 });
    t.log(JSON.stringify(fromNode));
    t.false(fromNode.ok);
    t.not((fromNode as { code?: string }).code, 'ECONNREFUSED', 'dropped (a timeout), not refused');
    const allowed = await probe(topo, { from: topo.node, host: '198.51.100.11', port: 80, count: 4, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(allowed.errors, {});
    t.deepEqual(allowed.counts, { b1: 2, b2: 2 });
    // The same range lets the outside client (192.168.100.2) in; the first one's does not.
    const client = await probe(topo, { from: topo.client('outside').netns, host: '198.51.100.11', port: 80, count: 2, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(client.errors, {});
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
    t.regex(save, /^add KUBE-LOAD-BALANCER-SOURCE-IP 198\.51\.100\.11,tcp:80,198\.51\.100\.11$/m);
    t.notRegex(save, /^add KUBE-LOAD-BALANCER-SOURCE-IP 198\.51\.100\.10,/m);
    t.regex(save, /^add KUBE-EXTERNAL-NO-LOCAL 192\.168\.100\.1,tcp:30082$/m);
    t.regex(save, /^add KUBE-EXTERNAL-NO-LOCAL 203\.0\.113\.12,tcp:80$/m);
    t.regex(save, /^add KUBE-INTERNAL-NO-LOCAL 10\.96\.1\.17,tcp:80$/m);
    t.regex(save, new RegExp(`^add KUBE-HEALTH-CHECK-NODE-PORT ${HEALTH_PORT}$`, 'm'));
    const filter = (await run('iptables-save', ['-t', 'filter'], { netns: topo.node })).stdout;
    t.regex(filter, /^-A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER$/m);
    t.regex(filter, /^-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT --reject-with icmp-port-unreachable$/m);
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
    t.deepEqual(state.filter((l) => l.startsWith('TCP')).sort(), ['TCP 10.96.1.10:80 rr', 'TCP 10.96.1.11:80 rr', 'TCP 10.96.1.12:80 rr', 'TCP 10.96.1.13:80 rr', 'TCP 10.96.1.14:80 rr', 'TCP 10.96.1.15:80 rr', 'TCP 10.96.1.16:80 rr', 'TCP 10.96.1.18:80 rr']);
    const save = (await run('ipset', ['save'], { netns: topo.node })).stdout;
    t.notRegex(save, /^add KUBE-(NODE-PORT|LOAD-BALANCER|EXTERNAL|HEALTH-CHECK)/m, 'KUBE-EXTERNAL-NO-LOCAL and KUBE-HEALTH-CHECK-NODE-PORT included');
    t.deepEqual([...save.matchAll(/^add KUBE-IPVS-IPS (\S+)$/gm)].map((m) => m[1]).sort(), ['10.96.1.10', '10.96.1.11', '10.96.1.12', '10.96.1.13', '10.96.1.14', '10.96.1.15', '10.96.1.16', '10.96.1.17', '10.96.1.18']);
    const ips = await run('ip', ['-o', '-4', 'addr', 'show', 'dev', 'kube-ipvs0'], { netns: topo.node });
    t.notRegex(ips.stdout, /198\.51\.100\.|203\.0\.113\./);
  });

  test.serial('internalTrafficPolicy Local losing its local endpoint: an open connection to it keeps working while new ones are dropped', async (t) => {
    const drain = (nodeName: string) => sp('default/drain:http', '10.96.1.19', 80, [ep('10.244.1.2:8080', { nodeName })], { internalTrafficPolicy: 'Local' });
    await driver.sync([drain('node1')], { full: false, changed: ['default/drain:http'] }, NODE);
    const held = await holdConnection(topo, { from: topo.client('inside').netns, host: '10.96.1.19', port: 80, timeoutMs: PROBE_TIMEOUT_MS });
    try {
      t.like(held.first, { ok: true, reply: { backend: 'b1' } });
      // b1 is now on another node: the ClusterIP is withheld, its real server drains.
      await driver.sync([drain('node2')], { full: false, changed: ['default/drain:http'] }, NODE);
      const quiesced = await realServerConns(topo.node, '10.96.1.19:80', '10.244.1.2:8080');
      t.like(quiesced, { weight: 0 }, 'the virtual server stays while its real server drains, at weight 0');
      const again = await held.request();
      t.log(JSON.stringify(again));
      t.true(again.ok && again.reply.backend === 'b1', 'the open connection still reaches its endpoint');
      const fresh = await connectOnce(topo, { from: topo.client('inside').netns, host: '10.96.1.19', port: 80, timeoutMs: 2000 });
      t.log(JSON.stringify(fresh));
      t.false(fresh.ok, 'a new connection from a pod does not get through');
      t.not((fresh as { code?: string }).code, 'ECONNREFUSED', 'dropped (a timeout), not refused');
    } finally {
      await held.close();
    }
    await driver.sync([], { full: false, changed: ['default/drain:http'] }, NODE);
  });
}
