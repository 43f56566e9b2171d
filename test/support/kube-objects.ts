/** Kubernetes API objects for the Kubernetes source's tests, as the API server returns them. */
import type { ApiObject } from './kube-api.ts';

/** A ClusterIP Service in `default` with one TCP port "http" 80 → 8080. */
export function service(name: string, clusterIP: string, opts: { labels?: Record<string, string>; ns?: string } = {}): ApiObject {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: opts.ns ?? 'default', ...(opts.labels ? { labels: opts.labels } : {}) },
    spec: { type: 'ClusterIP', clusterIP, clusterIPs: clusterIP === 'None' ? ['None'] : [clusterIP], ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }] },
  };
}

/**
 * An IPv4 EndpointSlice of `svc` in `default`, port "http" 8080, one endpoint
 * per address: ready, except the addresses in `opts.notReady` (ready,
 * serving and terminating all false, as for a Pod that has not passed its
 * readiness probe yet).
 */
export function slice(
  name: string,
  svc: string,
  ips: readonly string[],
  opts: { labels?: Record<string, string>; annotations?: Record<string, string>; port?: unknown; ns?: string; notReady?: readonly string[] } = {},
): ApiObject {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name,
      namespace: opts.ns ?? 'default',
      labels: { 'kubernetes.io/service-name': svc, ...opts.labels },
      ...(opts.annotations ? { annotations: opts.annotations } : {}),
    },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: opts.port ?? 8080, protocol: 'TCP' }],
    endpoints: ips.map((ip) => ({
      addresses: [ip],
      conditions: opts.notReady?.includes(ip) ? { ready: false, serving: false, terminating: false } : { ready: true },
      nodeName: 'node-a',
    })),
  };
}

/** A Node with a zone label and an InternalIP; `heartbeat` stands for the status fields a kubelet keeps updating. */
export function node(name: string, zone: string, heartbeat = '2026-01-01T00:00:00Z'): ApiObject {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: { 'topology.kubernetes.io/zone': zone, 'kubernetes.io/hostname': name } },
    status: { addresses: [{ type: 'InternalIP', address: '192.0.2.10' }], conditions: [{ type: 'Ready', status: 'True', lastHeartbeatTime: heartbeat }] },
  };
}
