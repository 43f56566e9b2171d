/**
 * The packet-flow table every mode runs: one set of Services on node
 * "node-a" and the cases {client, destination, port} → {the endpoints
 * reached and the source address they see, or the error a client gets}.
 *
 * The testbed (src/testbed/topology.ts) gives the node 192.168.100.1 on
 * the client links and 10.244.0.1 on the backend links; backends b1 and b2
 * run on node-a, b3 on node-b (by their endpoints' nodeName); the clients
 * are "outside" (192.168.100.2, in the LoadBalancer's source range),
 * "far" (172.16.5.2, outside it) and "pod" (10.244.9.2, in the cluster
 * CIDR). The LoadBalancer IP is made a local address of the node, as a
 * VIP-mode load balancer often makes it, so that without the firewall a
 * client outside the source range would be refused rather than dropped.
 *
 * The cases follow kube-proxy's packet-flow tests
 * (pkg/proxy/iptables/proxier_test.go, TestOverallIPTablesRules and the
 * externalTrafficPolicy, source-range and internalTrafficPolicy cases).
 */
import { ipv4Frontends, type Frontends, type ServicePort, type Snapshot } from '../../src/model/types.ts';
import type { BackendSpec, ClientSpec } from '../../src/testbed/topology.ts';
import { ep, snap, sp } from './snapshots.ts';

export const CLUSTER_CIDR = '10.244.0.0/16';
export const NODE_IP = '192.168.100.1';
export const EXTERNAL_IP = '203.0.113.10';
export const LB_IP = '198.51.100.10';
/** The node's own addresses: on the client links, on the backend links, and the LoadBalancer VIP. */
export const NODE_ADDRESSES = [NODE_IP, '10.244.0.1', LB_IP];

export const BACKENDS: BackendSpec[] = [
  { name: 'b1', ip: '10.244.1.2', ports: [8080] },
  { name: 'b2', ip: '10.244.1.3', ports: [8080] },
  { name: 'b3', ip: '10.244.1.4', ports: [8080] },
];
export const CLIENTS: ClientSpec[] = [
  { name: 'outside', ip: '192.168.100.2' },
  { name: 'far', ip: '172.16.5.2' },
  { name: 'pod', ip: '10.244.9.2' },
];
const NODE_OF: Record<string, string> = { b1: 'node-a', b2: 'node-a', b3: 'node-b' };

/** The backend's address. */
export const backendIP = (name: string): string => BACKENDS.find((b) => b.name === name)!.ip;
const endpoints = (names: string[]) => names.map((n) => ep(`${backendIP(n)}:8080`, { nodeName: NODE_OF[n]! }));
const external = (key: string, clusterIP: string, nodePort: number, names: string[], extra: Partial<ServicePort> & { f?: Partial<Frontends> } = {}) => {
  const { f, ...rest } = extra;
  return sp(key, clusterIP, 80, endpoints(names), { type: 'LoadBalancer', frontends: { ...ipv4Frontends(clusterIP, nodePort), ...f }, ...rest });
};

/** Every Service of the table: one per behaviour. */
export const SERVICES: ServicePort[] = [
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
  // internalTrafficPolicy Local: a local and a remote endpoint; only a remote one.
  sp('default/itp:http', '10.96.0.15', 80, endpoints(['b1', 'b3']), { internalTrafficPolicy: 'Local' }),
  sp('default/itp-remote:http', '10.96.0.16', 80, endpoints(['b3']), { internalTrafficPolicy: 'Local' }),
  // No ready endpoint: the serving and terminating one serves (KEP-1669), the one that is not serving does not.
  sp('default/terminating:http', '10.96.0.17', 80, [
    ep(`${backendIP('b1')}:8080`, { nodeName: 'node-a', ready: false, serving: false, terminating: true }),
    ep(`${backendIP('b2')}:8080`, { nodeName: 'node-a', ready: false, serving: true, terminating: true }),
  ]),
];

/** The desired state of the table. */
export const STATE: Snapshot = { ...snap(...SERVICES), node: { name: 'node-a', addresses: [{ type: 'InternalIP', address: NODE_IP }] } };

/** One case: who connects where, and what happens. */
export interface FlowCase {
  readonly what: string;
  /** A client of {@link CLIENTS}. */
  readonly from: string;
  readonly host: string;
  readonly port: number;
  /** The backends reached; absent when the connection fails. */
  readonly reach?: readonly string[];
  /** The source address the backends see: the client's own, or the node's (masqueraded). */
  readonly seen?: 'client' | 'node';
  /** The error every attempt gets: refused (REJECT) or timed out (DROP). */
  readonly error?: 'ECONNREFUSED' | 'ETIMEDOUT';
}

/**
 * Per-connection deadline of a packet-flow probe, ms. A case that expects
 * drops waits 1 s per connection; every other case waits 4 s, long enough
 * for TCP to retransmit a SYN once (initial RTO 1 s, RFC 6298), so a packet
 * lost while a neighbour is still being resolved on a busy host does not
 * read as a wrong verdict.
 */
export function flowProbeTimeoutMs(expectedError?: string): number {
  return expectedError === 'ETIMEDOUT' ? 1000 : 4000;
}

export const CASES: readonly FlowCase[] = [
  { what: 'a ClusterIP from a pod reaches every endpoint, the pod address kept', from: 'pod', host: '10.96.0.10', port: 80, reach: ['b1', 'b2', 'b3'], seen: 'client' },
  { what: 'a ClusterIP from outside the cluster CIDR is masqueraded', from: 'outside', host: '10.96.0.10', port: 80, reach: ['b1', 'b2', 'b3'], seen: 'node' },
  { what: 'a NodePort on the node address reaches every endpoint, masqueraded', from: 'outside', host: NODE_IP, port: 30080, reach: ['b1', 'b2', 'b3'], seen: 'node' },
  { what: 'an external IP reaches every endpoint, masqueraded', from: 'far', host: EXTERNAL_IP, port: 80, reach: ['b1', 'b2', 'b3'], seen: 'node' },
  { what: 'a LoadBalancer IP from inside its source range reaches every endpoint', from: 'outside', host: LB_IP, port: 80, reach: ['b1', 'b2', 'b3'], seen: 'node' },
  { what: 'a LoadBalancer IP from outside its source range is dropped', from: 'far', host: LB_IP, port: 80, error: 'ETIMEDOUT' },
  { what: 'externalTrafficPolicy Local: a NodePort reaches only local endpoints and keeps the client address', from: 'far', host: NODE_IP, port: 30081, reach: ['b1'], seen: 'client' },
  { what: 'externalTrafficPolicy Local: the ClusterIP still reaches every endpoint', from: 'pod', host: '10.96.0.11', port: 80, reach: ['b1', 'b3'], seen: 'client' },
  { what: 'externalTrafficPolicy Local, no local endpoint: a NodePort from outside is dropped', from: 'far', host: NODE_IP, port: 30082, error: 'ETIMEDOUT' },
  { what: 'externalTrafficPolicy Local, no local endpoint: a pod short-circuits to the cluster endpoints', from: 'pod', host: NODE_IP, port: 30082, reach: ['b3'], seen: 'client' },
  { what: 'no endpoints: a NodePort is refused', from: 'outside', host: NODE_IP, port: 30083, error: 'ECONNREFUSED' },
  { what: 'no endpoints: the ClusterIP is refused', from: 'pod', host: '10.96.0.13', port: 80, error: 'ECONNREFUSED' },
  { what: "internalTrafficPolicy Local: the ClusterIP reaches only this node's endpoint", from: 'pod', host: '10.96.0.15', port: 80, reach: ['b1'], seen: 'client' },
  { what: 'internalTrafficPolicy Local, no local endpoint: the ClusterIP is dropped', from: 'pod', host: '10.96.0.16', port: 80, error: 'ETIMEDOUT' },
  { what: 'no ready endpoint: the serving-terminating one serves, the other does not', from: 'pod', host: '10.96.0.17', port: 80, reach: ['b2'], seen: 'client' },
];

/** What a trace gives for one new connection, as the modes' trace contexts report it (inspect/trace.ts). */
interface TracedOutcome {
  readonly verdict: { readonly kind: string; readonly ip?: string; readonly port?: number };
  readonly masqueraded: boolean;
  readonly probability: number;
}

/**
 * Check the traced outcomes of case `c` on rendered rules: the verdict of
 * a failing case, else exactly the endpoints it reaches, masqueraded as the
 * case says, with probabilities summing to 1. `ipOf` gives a backend's
 * address (default: its IPv4 one, {@link backendIP}); `refused` is the
 * verdict of a refused connection: a REJECT rule (`reject`, the default),
 * in IPVS mode a virtual server without real servers (`refused`), or
 * either (`any`: the cross-mode table, whatever refuses the client).
 */
export function checkTraced(
  t: { deepEqual(a: unknown, b: unknown, m?: string): void; is(a: unknown, b: unknown, m?: string): void },
  c: FlowCase,
  outcomes: readonly TracedOutcome[],
  ipOf: (name: string) => string = backendIP,
  refused: 'reject' | 'refused' | 'any' = 'reject',
): void {
  if (c.error) {
    const kinds = outcomes.map((o) => o.verdict.kind);
    const want = c.error === 'ECONNREFUSED' ? (refused === 'any' && kinds.length === 1 && ['reject', 'refused'].includes(kinds[0]!) ? kinds[0]! : refused) : 'drop';
    t.deepEqual(kinds, [want]);
    return;
  }
  const reached = outcomes.flatMap((o) => (o.verdict.kind === 'dnat' ? [`${o.verdict.ip}:${o.verdict.port}`] : [])).sort();
  t.deepEqual(reached, c.reach!.map((n) => `${ipOf(n)}:8080`).sort());
  t.deepEqual([...new Set(outcomes.map((o) => o.masqueraded))], [c.seen === 'node']);
  t.is(outcomes.reduce((p, o) => p + o.probability, 0).toFixed(6), '1.000000');
}

/**
 * What a traced connection reaches, sorted: each DNAT as "ip:port", any
 * other verdict by its kind, a refusal as `reject` whichever way the mode
 * refuses (a REJECT rule, or an IPVS virtual server without real servers).
 */
export function reachedOf(outcomes: readonly TracedOutcome[]): string[] {
  return outcomes.map((o) => (o.verdict.kind === 'dnat' ? `${o.verdict.ip}:${o.verdict.port}` : o.verdict.kind === 'refused' ? 'reject' : o.verdict.kind)).sort();
}
