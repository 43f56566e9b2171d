/**
 * One small cluster for the packet-flow tests that feed the same state to
 * drover through each of its sources: Service `default/web`, port "http"
 * 80/TCP → 8080, with three endpoints, b1 and b2 ready and b3 not ready, and
 * the network-namespace testbed that serves it (a node, a client outside
 * the cluster CIDR, and one echo server per endpoint, b3's included, so
 * that a connection sent to b3 would be answered and seen).
 *
 * The cluster in each source's form:
 * - Kubernetes (the API server double, and manifest files): a Service with
 *   ClusterIP {@link FLOW_CLUSTER_IP} and one EndpointSlice in which b3 is
 *   not ready;
 * - Shepherd: a Service without a ClusterIP (Shepherd assigns none; drover
 *   allocates one) whose `status.endpoints` lists b1 and b2 alone, as
 *   Shepherd's service controller lists only the ready Pods of a Service.
 */
import { probe } from '../../src/testbed/probe.ts';
import { createTopology, type Topology } from '../../src/testbed/topology.ts';
import type { ApiObject } from './kube-api.ts';
import { service, slice } from './kube-objects.ts';
import { shepherdService } from './shepherd-api.ts';

/** `--cluster-cidr` of the flow tests: the endpoints' addresses are inside it, the client's is not. */
export const FLOW_CLUSTER_CIDR = '10.244.0.0/16';

/** The Service's ClusterIP where the source gives one (Kubernetes), inside the testbed's service CIDR 10.96.0.0/12. */
export const FLOW_CLUSTER_IP = '10.96.0.50';

/** The endpoints: echo server name, address, and whether it is ready. */
export const FLOW_ENDPOINTS = [
  { name: 'b1', ip: '10.244.1.2', ready: true },
  { name: 'b2', ip: '10.244.1.3', ready: true },
  { name: 'b3', ip: '10.244.1.4', ready: false },
] as const;

/** Names of the ready endpoints, sorted: where every connection to the Service must land. */
export const FLOW_READY = FLOW_ENDPOINTS.filter((e) => e.ready).map((e) => e.name);

/** The port every endpoint serves, the Service's target port. */
export const FLOW_TARGET_PORT = 8080;

/** The cluster as Kubernetes API objects: the Service and its EndpointSlice. */
export function flowKubernetesObjects(): ApiObject[] {
  return [
    service('web', FLOW_CLUSTER_IP),
    slice(
      'web-1',
      'web',
      FLOW_ENDPOINTS.map((e) => e.ip),
      { notReady: FLOW_ENDPOINTS.filter((e) => !e.ready).map((e) => e.ip) },
    ),
  ];
}

/** The cluster as one manifest file: the Kubernetes objects in a `v1 List` (JSON). */
export function flowManifest(): string {
  return `${JSON.stringify({ apiVersion: 'v1', kind: 'List', items: flowKubernetesObjects() }, null, 2)}\n`;
}

/** The cluster as the Shepherd API server sends it: one Service, no ClusterIP, its ready endpoints. */
export function flowShepherdService(): Record<string, unknown> {
  return shepherdService(
    'default',
    'web',
    [{ name: 'http', port: 80, target_port: FLOW_TARGET_PORT, protocol: 'tcp' }],
    FLOW_ENDPOINTS.filter((e) => e.ready).map((e) => `${e.ip}:${FLOW_TARGET_PORT}`),
  );
}

/**
 * Run `fn` on a fresh testbed for the cluster (see the module comment);
 * the testbed is removed afterwards, also when `fn` throws.
 */
export async function withFlowTopology<T>(fn: (topo: Topology) => Promise<T>): Promise<T> {
  const topo = await createTopology({ backends: FLOW_ENDPOINTS.map((e) => ({ name: e.name, ip: e.ip, ports: [FLOW_TARGET_PORT] })) });
  try {
    return await fn(topo);
  } finally {
    await topo.destroy();
  }
}

/** What `count` new TCP connections from the client to `host`:`port` reached: the answering echo servers (sorted) and the failures by code. */
export async function reached(topo: Topology, host: string, port: number, count: number): Promise<{ backends: string[]; errors: Record<string, number> }> {
  const r = await probe(topo, { host, port, count, timeoutMs: 1000 });
  return { backends: Object.keys(r.counts).sort(), errors: r.errors };
}
