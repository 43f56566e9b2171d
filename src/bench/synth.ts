/**
 * Synthetic desired state for benchmarks: N service ports with E endpoints
 * each, deterministic (the same arguments give the same snapshot).
 *
 * ClusterIPs are taken in order from 10.96.0.0/12 starting at 10.96.0.10,
 * endpoints from 10.244.0.0/16 (pod IPs), port 80 → 8080.
 */
import type { Endpoint, ServicePort, Snapshot } from '../model/types.ts';

function ipFromInt(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

const SERVICE_BASE = (10 << 24) | (96 << 16); // 10.96.0.0
const POD_BASE = (10 << 24) | (244 << 16); // 10.244.0.0

/** The i-th synthetic service port ("bench/svc-<i>:http"), with `endpoints` ready endpoints. */
export function synthServicePort(i: number, endpoints: number, endpointOffset = 0): ServicePort {
  const eps: Endpoint[] = [];
  for (let j = 0; j < endpoints; j++) {
    const n = (i * 16 + j + endpointOffset) % (1 << 16);
    eps.push({ ip: ipFromInt(POD_BASE + n), port: 8080, ready: true, serving: true, terminating: false });
  }
  eps.sort((a, b) => (a.ip === b.ip ? 0 : ipToSortable(a.ip) - ipToSortable(b.ip)));
  return {
    key: `bench/svc-${i}:http`,
    namespace: 'bench',
    name: `svc-${i}`,
    portName: 'http',
    type: 'ClusterIP',
    clusterIP: ipFromInt(SERVICE_BASE + 10 + i),
    clusterIPAllocated: false,
    port: 80,
    protocol: 'TCP',
    sessionAffinity: null,
    internalTrafficPolicy: 'Cluster',
    externalTrafficPolicy: 'Cluster',
    endpoints: eps,
  };
}

function ipToSortable(ip: string): number {
  return ip.split('.').reduce((acc, o) => acc * 256 + Number(o), 0);
}

/** A snapshot of `services` synthetic service ports with `endpoints` endpoints each. */
export function synthSnapshot(services: number, endpoints: number): Snapshot {
  const map = new Map<string, ServicePort>();
  const ports = Array.from({ length: services }, (_, i) => synthServicePort(i, endpoints));
  ports.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  for (const p of ports) map.set(p.key, p);
  return { services: map };
}

/** A copy of `snapshot` with service port `key` replaced (or removed when `port` is undefined). */
export function withServicePort(snapshot: Snapshot, key: string, port: ServicePort | undefined): Snapshot {
  const map = new Map(snapshot.services);
  if (port) map.set(key, port);
  else map.delete(key);
  return { services: new Map([...map].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) };
}
