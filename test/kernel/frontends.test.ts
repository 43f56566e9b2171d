/**
 * Packets to the external frontends of drover's iptables rules, between
 * network namespaces: NodePorts on the node's address, external IPs and
 * LoadBalancer IPs routed to the node, loadBalancerSourceRanges and
 * externalTrafficPolicy Local. The node namespace is "node-a"; backends
 * b1 and b2 run on node-a, b3 on node-b (by the endpoints' nodeName).
 * Each case is also traced against the live rules: the trace must name
 * the endpoints real connections reach, or the same verdict.
 */
import test from 'ava';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { SystemIptables } from '../../src/modes/iptables/exec.ts';
import { localAddresses, readTables } from '../../src/modes/iptables/live.ts';
import { iptablesTraceContext } from '../../src/modes/iptables/trace.ts';
import { trace } from '../../src/inspect/trace.ts';
import { probe } from '../../src/testbed/probe.ts';
import { createTopology, testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';
import type { Frontends, ServicePort, Snapshot } from '../../src/model/types.ts';
import { ipv4Frontends } from '../../src/model/types.ts';
import { ep, snap, sp } from '../support/snapshots.ts';
import { iptablesStatics } from '../../src/modes/iptables/node-ports.ts';
import { nodePortAddressesArg } from '../../src/cli/options.ts';

const unavailable = await testbedUnavailableReason();
const FULL = { full: true, changed: new Set<string>() };
const CLUSTER_CIDR = '10.244.0.0/16';
const NODE_IP = '192.168.100.1';
const EXTERNAL_IP = '203.0.113.10';
const LB_IP = '198.51.100.10';

const BACKENDS = [
  { name: 'b1', ip: '10.244.1.2', ports: [8080] },
  { name: 'b2', ip: '10.244.1.3', ports: [8080] },
  { name: 'b3', ip: '10.244.1.4', ports: [8080] },
];
const NODE_OF: Record<string, string> = { b1: 'node-a', b2: 'node-a', b3: 'node-b' };
const endpoints = (names: string[]) => names.map((n) => ep(`${BACKENDS.find((b) => b.name === n)!.ip}:8080`, { nodeName: NODE_OF[n]! }));
const frontends = (clusterIP: string, nodePort: number, extra: Partial<Frontends> = {}): Frontends => ({ ...ipv4Frontends(clusterIP, nodePort), ...extra });
const external = (key: string, clusterIP: string, nodePort: number, names: string[], extra: Partial<ServicePort> & { f?: Partial<Frontends> } = {}) => {
  const { f, ...rest } = extra;
  return sp(key, clusterIP, 80, endpoints(names), { type: 'LoadBalancer', frontends: frontends(clusterIP, nodePort, f), ...rest });
};

/** Every service of the test: one per behaviour. */
const SERVICES = [
  // NodePort, external IP and a LoadBalancer IP allowed only from 192.168.100.0/24, policy Cluster.
  external('default/web:http', '10.96.0.10', 30080, ['b1', 'b2', 'b3'], {
    f: {
      externalIPs: [{ family: 'IPv4', ip: EXTERNAL_IP }],
      loadBalancerIngress: [{ family: 'IPv4', ip: LB_IP, ipMode: 'VIP' }],
      loadBalancerSourceRanges: ['192.168.100.0/24'],
    },
  }),
  // externalTrafficPolicy Local with a local (b1) and a remote (b3) endpoint.
  external('default/local:http', '10.96.0.11', 30081, ['b1', 'b3'], { externalTrafficPolicy: 'Local', f: { healthCheckNodePort: 30999 } }),
  // externalTrafficPolicy Local with only a remote endpoint.
  external('default/remote:http', '10.96.0.12', 30082, ['b3'], { externalTrafficPolicy: 'Local' }),
  // No endpoints at all.
  external('default/empty:http', '10.96.0.13', 30083, []),
  // ClientIP session affinity with a 2 s timeout.
  external('default/sticky:http', '10.96.0.14', 30084, ['b1', 'b2', 'b3'], { sessionAffinity: { timeoutSeconds: 2 } }),
];
const STATE: Snapshot = { ...snap(...SERVICES), node: { name: 'node-a', addresses: [{ type: 'InternalIP', address: NODE_IP }] } };

let topo: Topology;
let backend: IptablesBackend;

if (unavailable) {
  test.skip(`external frontend tests skipped: ${unavailable}`, () => {});
} else {
  test.before(async () => {
    topo = await createTopology({
      backends: BACKENDS,
      nodeIp: NODE_IP,
      clients: [
        { name: 'outside', ip: '192.168.100.2' },
        { name: 'far', ip: '172.16.5.2' },
        { name: 'pod', ip: '10.244.9.2' },
      ],
    });
    await topo.exec(topo.node, 'sysctl', ['-q', '-w', 'net.ipv4.icmp_ratelimit=0']);
    // The LoadBalancer IP is the node's own, as a VIP-mode load balancer often makes it: without the
    // firewall rule a connection from outside the source range would be refused, not dropped.
    await topo.exec(topo.node, 'ip', ['route', 'add', 'local', `${LB_IP}/32`, 'dev', 'lo']);
    backend = new IptablesBackend({ exec: new SystemIptables({ variant: 'nft', netns: topo.node }), render: { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false }, logger: silentLogger() });
    await backend.sync(STATE, FULL);
  });

  test.after.always(async () => {
    await topo?.destroy();
  });

  test.serial('the kernel reads back as rendered: a second full sync writes nothing', async (t) => {
    t.deepEqual((await backend.sync(STATE, FULL)).written, { chain: 0, rule: 0 });
  });

  /** Cases: who connects where → which backends answer and the source they see, or the error. */
  const cases: Array<{ what: string; from: string; host: string; port: number; reach?: string[]; seen?: 'client' | 'node'; error?: string }> = [
    { what: 'a NodePort on the node address reaches every endpoint, masqueraded', from: 'outside', host: NODE_IP, port: 30080, reach: ['b1', 'b2', 'b3'], seen: 'node' },
    { what: 'an external IP reaches every endpoint, masqueraded', from: 'far', host: EXTERNAL_IP, port: 80, reach: ['b1', 'b2', 'b3'], seen: 'node' },
    { what: 'a LoadBalancer IP from inside its source range reaches every endpoint', from: 'outside', host: LB_IP, port: 80, reach: ['b1', 'b2', 'b3'], seen: 'node' },
    { what: 'a LoadBalancer IP from outside its source range is dropped', from: 'far', host: LB_IP, port: 80, error: 'ETIMEDOUT' },
    { what: 'externalTrafficPolicy Local: a NodePort reaches only local endpoints and keeps the client address', from: 'far', host: NODE_IP, port: 30081, reach: ['b1'], seen: 'client' },
    { what: 'externalTrafficPolicy Local: the ClusterIP still reaches every endpoint', from: 'pod', host: '10.96.0.11', port: 80, reach: ['b1', 'b3'], seen: 'client' },
    { what: 'externalTrafficPolicy Local, no local endpoint: a NodePort from outside is dropped', from: 'far', host: NODE_IP, port: 30082, error: 'ETIMEDOUT' },
    { what: 'externalTrafficPolicy Local, no local endpoint: a pod short-circuits to the cluster endpoints', from: 'pod', host: NODE_IP, port: 30082, reach: ['b3'], seen: 'client' },
    { what: 'no endpoints: a NodePort is refused', from: 'outside', host: NODE_IP, port: 30083, error: 'ECONNREFUSED' },
  ];
  for (const c of cases) {
    test.serial(c.what, async (t) => {
      const from = topo.client(c.from);
      const count = c.error ? 3 : 40;
      const real = await probe(topo, { from: from.netns, host: c.host, port: c.port, count, timeoutMs: 1000 });
      const traced = trace(iptablesTraceContext(await readTables(new SystemIptables({ variant: 'nft', netns: topo.node })), await localAddresses(topo.node)), {
        src: from.ip,
        dst: c.host,
        dport: c.port,
        proto: 'tcp',
      });
      if (c.error) {
        t.deepEqual(real.errors, { [c.error]: count });
        t.deepEqual(
          traced.outcomes.map((o) => o.verdict.kind),
          [c.error === 'ECONNREFUSED' ? 'reject' : 'drop'],
        );
        return;
      }
      t.deepEqual([Object.keys(real.counts).sort(), real.errors], [c.reach, {}]);
      const expected = c.seen === 'client' ? from.ip : topo.gateway;
      for (const name of c.reach!) t.deepEqual(real.clientsSeen[name], [expected], `${name} sees ${expected}`);
      const ips = traced.outcomes.flatMap((o) => (o.verdict.kind === 'dnat' ? [o.verdict.ip] : [])).sort();
      t.deepEqual(ips, c.reach!.map((n) => topo.backend(n).ip).sort(), 'trace names the endpoints reached');
      t.true(traced.outcomes.every((o) => o.masqueraded === (c.seen === 'node')), 'trace agrees on masquerade');
    });
  }

  test.serial('ClientIP affinity: a client keeps its endpoint, through the ClusterIP and the NodePort alike; after the timeout it may move', async (t) => {
    const from = topo.client('outside').netns;
    const viaNodePort = await probe(topo, { from, host: NODE_IP, port: 30084, count: 15 });
    const viaClusterIP = await probe(topo, { from, host: '10.96.0.14', port: 80, count: 15 });
    t.deepEqual([viaNodePort.errors, viaClusterIP.errors], [{}, {}]);
    t.is(Object.keys(viaNodePort.counts).length, 1, `one endpoint through the NodePort: ${JSON.stringify(viaNodePort.counts)}`);
    t.deepEqual(Object.keys(viaClusterIP.counts), Object.keys(viaNodePort.counts), 'the same endpoint through the ClusterIP');
    // Each round waits out the timeout, so each connection picks anew: 8 rounds all on one of 3 endpoints has odds 1 in 2187.
    const seen = new Set<string>();
    for (let round = 0; round < 8 && seen.size < 2; round++) {
      await new Promise((r) => setTimeout(r, 2500));
      const one = await probe(topo, { from, host: NODE_IP, port: 30084, count: 1 });
      for (const name of Object.keys(one.counts)) seen.add(name);
    }
    t.true(seen.size >= 2, `after the timeout the client moved: ${[...seen].join(', ')}`);
  });

  test.serial('--nodeport-addresses: NodePorts answer only on the listed address; a later full sync without it swaps the hooks back', async (t) => {
    const exec = new SystemIptables({ variant: 'nft', netns: topo.node });
    const make = async (cidrs?: string) =>
      new IptablesBackend({
        exec,
        render: { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false },
        logger: silentLogger(),
        statics: await iptablesStatics(cidrs === undefined ? undefined : nodePortAddressesArg(cidrs), topo.node),
      });
    // 10.244.0.1 is the node's address on the backend links, not the one the client reaches.
    await (await make('10.244.0.0/24')).sync(STATE, FULL);
    const nat = await exec.save('nat');
    t.regex(nat, /^-A PREROUTING -d 10\.244\.0\.1\/32 -m comment --comment "kubernetes service nodeports" -j KUBE-NODEPORTS$/m);
    t.notRegex(nat, /--dst-type LOCAL -j KUBE-NODEPORTS/);
    const refused = await probe(topo, { from: topo.client('outside').netns, host: NODE_IP, port: 30080, count: 3, timeoutMs: 1000 });
    t.deepEqual(refused.errors, { ECONNREFUSED: 3 }, 'nothing listens on the node address itself');
    const back = await make();
    t.like(await back.sync(STATE, FULL), { deleted: { rule: 2 } }, 'the two per-address hooks go');
    const s = await probe(topo, { from: topo.client('outside').netns, host: NODE_IP, port: 30080, count: 30 });
    t.deepEqual([Object.keys(s.counts).sort(), s.errors], [['b1', 'b2', 'b3'], {}]);
    t.deepEqual((await back.sync(STATE, FULL)).written, { chain: 0, rule: 0 });
  });
}
