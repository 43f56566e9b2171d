/**
 * The IPv6 cases of the packet-flow table (packet-flow.ts): the same
 * backends and clients with an IPv6 address each, single-stack IPv6
 * Services on node "node-a", and the cases {client, destination, port} →
 * {the endpoints reached and the source address they see, or the error a
 * client gets}, as kube-proxy's IPv6 proxier answers them: a ClusterIP, a
 * NodePort on the node's IPv6 address, a LoadBalancer IP with an IPv6
 * source range, and externalTrafficPolicy Local.
 *
 * The testbed gives the node fd00:100::1 on the client links and
 * fd00:244::1 on the backend links (topology.ts); the IPv6 cluster CIDR is
 * fd00:244::/32, so "pod" (fd00:244:9::2) is inside it and "outside"
 * (fd00:100::2, in the source range) and "far" (fd00:172:16:5::2) are not.
 * The LoadBalancer IP is made a local address of the node, as in the IPv4
 * table.
 */
import type { Frontends, ServicePort, Snapshot } from '../../src/model/types.ts';
import type { BackendSpec, ClientSpec } from '../../src/testbed/topology.ts';
import { BACKENDS, CLIENTS, NODE_IP, type FlowCase } from './packet-flow.ts';
import { dualSnap, ep, sp } from './snapshots.ts';

export const CLUSTER_CIDR6 = 'fd00:244::/32';
export const NODE_IP6 = 'fd00:100::1';
export const LB_IP6 = '2001:db8:100::10';

const IP6: Record<string, string> = { b1: 'fd00:244:1::2', b2: 'fd00:244:1::3', b3: 'fd00:244:1::4', outside: 'fd00:100::2', far: 'fd00:172:16:5::2', pod: 'fd00:244:9::2' };
const NODE_OF: Record<string, string> = { b1: 'node-a', b2: 'node-a', b3: 'node-b' };

/** The backends of packet-flow.ts, each with its IPv6 address too. */
export const BACKENDS6: BackendSpec[] = BACKENDS.map((b) => ({ ...b, ip6: IP6[b.name]! }));
/** The clients of packet-flow.ts, each with its IPv6 address too. */
export const CLIENTS6: ClientSpec[] = CLIENTS.map((c) => ({ ...c, ip6: IP6[c.name]! }));

/** The IPv6 address of a backend or client. */
export const ip6Of = (name: string): string => IP6[name]!;

const frontends = (clusterIP: string, nodePort: number, extra: Partial<Frontends> = {}): Frontends => ({
  clusterIPs: [{ family: 'IPv6', ip: clusterIP }],
  nodePort,
  externalIPs: [],
  loadBalancerIngress: [],
  loadBalancerSourceRanges: [],
  ...extra,
});
const external = (key: string, clusterIP: string, nodePort: number, names: string[], extra: Partial<ServicePort> & { f?: Partial<Frontends> } = {}) => {
  const { f, ...rest } = extra;
  const endpoints = names.map((n) => ep(`[${ip6Of(n)}]:8080`, { nodeName: NODE_OF[n]! }));
  return sp(key, clusterIP, 80, endpoints, { type: 'LoadBalancer', frontends: frontends(clusterIP, nodePort, f), ...rest });
};

/** The single-stack IPv6 Services of the table. */
export const SERVICES6: ServicePort[] = [
  // NodePort and a LoadBalancer IP allowed only from fd00:100::/64, policy Cluster.
  external('default/web6:http', 'fd00:96::10', 30080, ['b1', 'b2', 'b3'], {
    f: { loadBalancerIngress: [{ family: 'IPv6', ip: LB_IP6, ipMode: 'VIP' }], loadBalancerSourceRanges: ['fd00:100::/64'] },
  }),
  // externalTrafficPolicy Local with a local (b1) and a remote (b3) endpoint.
  external('default/local6:http', 'fd00:96::11', 30081, ['b1', 'b3'], { externalTrafficPolicy: 'Local' }),
];

/** The desired state of the IPv6 table: its Services in the snapshot's IPv6 view. */
export const STATE6: Snapshot = {
  ...dualSnap([], SERVICES6),
  node: { name: 'node-a', addresses: [{ type: 'InternalIP', address: NODE_IP }, { type: 'InternalIP', address: NODE_IP6 }] },
};

/** The IPv6 cases; `from` names a client, whose IPv6 address ({@link ip6Of}) connects. */
export const CASES6: readonly FlowCase[] = [
  { what: 'IPv6: a ClusterIP from a pod reaches every endpoint, the pod address kept', from: 'pod', host: 'fd00:96::10', port: 80, reach: ['b1', 'b2', 'b3'], seen: 'client' },
  { what: 'IPv6: a ClusterIP from outside the cluster CIDR is masqueraded', from: 'outside', host: 'fd00:96::10', port: 80, reach: ['b1', 'b2', 'b3'], seen: 'node' },
  { what: "IPv6: a NodePort on the node's IPv6 address reaches every endpoint, masqueraded", from: 'outside', host: NODE_IP6, port: 30080, reach: ['b1', 'b2', 'b3'], seen: 'node' },
  { what: 'IPv6: a LoadBalancer IP from inside its source range reaches every endpoint', from: 'outside', host: LB_IP6, port: 80, reach: ['b1', 'b2', 'b3'], seen: 'node' },
  { what: 'IPv6: a LoadBalancer IP from outside its source range is dropped', from: 'far', host: LB_IP6, port: 80, error: 'ETIMEDOUT' },
  { what: 'IPv6: externalTrafficPolicy Local: a NodePort reaches only local endpoints and keeps the client address', from: 'far', host: NODE_IP6, port: 30081, reach: ['b1'], seen: 'client' },
];
