/**
 * Objects the cluster tests write to the real API server, as a user (or,
 * for EndpointSlices, the EndpointSlice controller, which this API server
 * does not run) writes them, and the API calls that write them.
 */
import type { Obj, TestApiServer } from './apiserver.ts';

/** One port of a test Service: `port` → the backends' `targetPort`, TCP. */
export interface PortSpec {
  readonly name: string;
  readonly port: number;
  readonly targetPort: number;
  readonly nodePort?: number;
}

/** A Service's spec fields the tests set. */
export interface ServiceSpec {
  readonly type?: 'ClusterIP' | 'NodePort' | 'LoadBalancer' | 'ExternalName';
  /** A fixed ClusterIP ("None" for headless); absent: allocated by the API server. */
  readonly clusterIP?: string;
  readonly clusterIPs?: readonly string[];
  readonly ipFamilyPolicy?: 'SingleStack' | 'PreferDualStack' | 'RequireDualStack';
  readonly ipFamilies?: readonly ('IPv4' | 'IPv6')[];
  readonly externalName?: string;
  readonly trafficDistribution?: 'PreferClose' | 'PreferSameZone' | 'PreferSameNode';
  readonly ports?: readonly PortSpec[];
  readonly labels?: Record<string, string>;
}

/** A Service in `ns` (selector-less: the tests write its EndpointSlices). */
export function serviceObject(ns: string, name: string, spec: ServiceSpec): Obj {
  const ports = spec.type === 'ExternalName' && !spec.ports ? undefined : (spec.ports ?? [{ name: 'http', port: 80, targetPort: 8080 }]);
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: ns, ...(spec.labels ? { labels: spec.labels } : {}) },
    spec: {
      type: spec.type ?? 'ClusterIP',
      ...(spec.clusterIP !== undefined ? { clusterIP: spec.clusterIP } : {}),
      ...(spec.clusterIPs !== undefined ? { clusterIPs: spec.clusterIPs } : {}),
      ...(spec.ipFamilyPolicy !== undefined ? { ipFamilyPolicy: spec.ipFamilyPolicy } : {}),
      ...(spec.ipFamilies !== undefined ? { ipFamilies: spec.ipFamilies } : {}),
      ...(spec.externalName !== undefined ? { externalName: spec.externalName } : {}),
      ...(spec.trafficDistribution !== undefined ? { trafficDistribution: spec.trafficDistribution } : {}),
      ...(ports ? { ports: ports.map((p) => ({ name: p.name, port: p.port, targetPort: p.targetPort, protocol: 'TCP', ...(p.nodePort ? { nodePort: p.nodePort } : {}) })) } : {}),
    },
  };
}

/** One endpoint of an EndpointSlice: an address, its Pod, its node, ready unless said. */
export interface EndpointSpec {
  readonly ip: string;
  readonly pod: string;
  readonly nodeName: string;
  readonly zone?: string;
  readonly ready?: boolean;
  /** `hints.forZones`: the zone whose nodes should use it (as the EndpointSlice controller sets for topology-aware routing). */
  readonly hintZone?: string;
}

/**
 * An EndpointSlice of Service `svc` as the EndpointSlice controller writes
 * it (pkg/controller/endpointslice, k8s.io/endpointslice): owned by the
 * Service, labelled with its name and the controller as manager (and the
 * Service's headless label when it is headless), the trigger-time
 * annotation, one endpoint per Pod with ready/serving/terminating and a
 * Pod targetRef.
 */
export function endpointSliceObject(
  ns: string,
  name: string,
  service: { name: string; uid: string; headless?: boolean },
  addressType: 'IPv4' | 'IPv6',
  endpoints: readonly EndpointSpec[],
  ports: readonly { name: string; port: number }[] = [{ name: 'http', port: 8080 }],
): Obj {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name,
      namespace: ns,
      labels: {
        'kubernetes.io/service-name': service.name,
        'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io',
        ...(service.headless ? { 'service.kubernetes.io/headless': '' } : {}),
      },
      annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': new Date().toISOString().replace(/\.\d+Z$/, 'Z') },
      ownerReferences: [{ apiVersion: 'v1', kind: 'Service', name: service.name, uid: service.uid, controller: true, blockOwnerDeletion: true }],
    },
    addressType,
    endpoints: endpoints.map((e) => ({
      addresses: [e.ip],
      conditions: { ready: e.ready ?? true, serving: e.ready ?? true, terminating: false },
      nodeName: e.nodeName,
      ...(e.zone ? { zone: e.zone } : {}),
      ...(e.hintZone ? { hints: { forZones: [{ name: e.hintZone }] } } : {}),
      targetRef: { kind: 'Pod', namespace: ns, name: e.pod, uid: `00000000-0000-4000-8000-${e.pod.padStart(12, '0').slice(-12)}` },
    })),
    ports: ports.map((p) => ({ name: p.name, port: p.port, protocol: 'TCP' })),
  };
}

/** A Node named `name` with a zone label, created by the admin, and its InternalIP written through the status subresource (as a kubelet does). */
export async function createNode(api: TestApiServer, name: string, zone: string, internalIP: string): Promise<Obj> {
  await api.must('POST', '/api/v1/nodes', {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: { 'kubernetes.io/hostname': name, 'topology.kubernetes.io/zone': zone } },
  });
  return api.must('PATCH', `/api/v1/nodes/${name}/status`, {
    status: { addresses: [{ type: 'InternalIP', address: internalIP }, { type: 'Hostname', address: name }], conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'test', lastHeartbeatTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'), lastTransitionTime: '2026-01-01T00:00:00Z' }] },
  });
}

/** Create namespace `ns`. */
export async function createNamespace(api: TestApiServer, ns: string): Promise<void> {
  await api.must('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
}

/** Create a Service; returns it as the API server stored it (uid, allocated clusterIPs and nodePorts). */
export function createService(api: TestApiServer, ns: string, name: string, spec: ServiceSpec): Promise<Obj & { metadata: { uid: string }; spec: { clusterIP?: string; clusterIPs?: string[]; ports?: Array<{ nodePort?: number }> } }> {
  return api.must('POST', `/api/v1/namespaces/${ns}/services`, serviceObject(ns, name, spec));
}

/** Create or replace an EndpointSlice (PUT with the stored resourceVersion when it exists). */
export async function writeEndpointSlice(api: TestApiServer, slice: Obj): Promise<Obj> {
  const ns = slice.metadata!.namespace!;
  const name = slice.metadata!.name!;
  const path = `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`;
  const existing = await api.request('GET', `${path}/${name}`);
  if (existing.status === 404) return api.must('POST', path, slice);
  const rv = (existing.body as Obj).metadata?.resourceVersion;
  return api.must('PUT', `${path}/${name}`, { ...slice, metadata: { ...slice.metadata, resourceVersion: rv } });
}
