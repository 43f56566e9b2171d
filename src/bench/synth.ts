/**
 * Synthetic desired state for benchmarks: N service ports with E endpoints
 * each, deterministic (the same arguments give the same snapshot).
 *
 * ClusterIPs are taken in order from 10.96.0.0/12 starting at 10.96.0.10,
 * endpoints from 10.244.0.0/16 (pod IPs), port 80 → 8080.
 */
import { uint32ToIPv4 } from '../model/addr.ts';
import { compareEndpoints } from '../model/order.ts';
import { ipv4Frontends, type Endpoint, type ServicePort, type Snapshot } from '../model/types.ts';

const SERVICE_BASE = (10 << 24) | (96 << 16); // 10.96.0.0
const POD_BASE = (10 << 24) | (244 << 16); // 10.244.0.0

/** The i-th synthetic service port ("bench/svc-<i>:http"), with `endpoints` ready endpoints. */
export function synthServicePort(i: number, endpoints: number, endpointOffset = 0): ServicePort {
  const eps: Array<Pick<Endpoint, 'ip' | 'port'>> = [];
  for (let j = 0; j < endpoints; j++) {
    const n = (i * 16 + j + endpointOffset) % (1 << 16);
    eps.push({ ip: uint32ToIPv4(POD_BASE + n), port: 8080 });
  }
  return benchPort(`svc-${i}`, uint32ToIPv4(SERVICE_BASE + 10 + i), eps);
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

/** A real endpoint of the benchmark's testbed: an echo server's namespace and one of its ports. */
export interface RealEndpoint {
  /** Backend (namespace) name, as the echo server reports it. */
  readonly backend: string;
  /** Dotted-quad IPv4 address of the backend. */
  readonly ip: string;
  /** TCP port the echo server listens on. */
  readonly port: number;
}

/** How the data path names an endpoint: "<backend>:<port>", from the echo server's reply. */
export function endpointId(ep: RealEndpoint): string {
  return `${ep.backend}:${ep.port}`;
}

/** Pod network of the benchmark's rules (`--cluster-cidr`); its client (192.168.100.2) is outside it, so its traffic is masqueraded. */
export const BENCH_CLUSTER_CIDR = '10.244.0.0/16';

const CLOCK_BASE = (10 << 24) | (110 << 16); // 10.110.0.0, inside 10.96.0.0/12, apart from synthSnapshot's range
const ADDED_BASE = (10 << 24) | (111 << 16); // 10.111.0.0

/** A bench service port "bench/<name>:http" on `clusterIP`:80/TCP with `endpoints` (ready), sorted. */
function benchPort(name: string, clusterIP: string, endpoints: ReadonlyArray<Pick<Endpoint, 'ip' | 'port'>>): ServicePort {
  const eps: Endpoint[] = endpoints
    .map((e) => ({ ip: e.ip, port: e.port, ready: true, serving: true, terminating: false }))
    .sort(compareEndpoints);
  return {
    key: `bench/${name}:http`,
    namespace: 'bench',
    name,
    portName: 'http',
    type: 'ClusterIP',
    clusterIP,
    clusterIPAllocated: false,
    frontends: ipv4Frontends(clusterIP),
    port: 80,
    protocol: 'TCP',
    sessionAffinity: null,
    internalTrafficPolicy: 'Cluster',
    externalTrafficPolicy: 'Cluster',
    endpoints: eps,
  };
}

/**
 * The c-th clock service port ("bench/clock-<c>:http", ClusterIP 10.110.0.<10+c>
 * port 80): a service whose endpoints are real echo servers, so that a
 * client's connections show when a change reached the data path.
 * @param c 0-based index, below 65 000.
 */
export function clockServicePort(c: number, endpoints: readonly RealEndpoint[]): ServicePort {
  return benchPort(`clock-${c}`, uint32ToIPv4(CLOCK_BASE + 10 + c), endpoints);
}

/**
 * The i-th service port that the benchmark adds and removes again
 * ("bench/added-<i>:http", ClusterIP 10.111.0.0 + 10 + i, port 80), with
 * real endpoints.
 * @param i 0-based index, below 65 000.
 */
export function addedServicePort(i: number, endpoints: readonly RealEndpoint[]): ServicePort {
  return benchPort(`added-${i}`, uint32ToIPv4(ADDED_BASE + 10 + i), endpoints);
}

/**
 * The benchmark's starting state: `services` service ports in all, of which
 * `clock.length` are the given clock services (real endpoints) and the rest
 * synthetic ones with `endpoints` fake endpoints each (synthServicePort).
 * @throws Error when there are fewer services than clock services.
 */
export function benchSnapshot(services: number, endpoints: number, clock: readonly ServicePort[]): Snapshot {
  if (services < clock.length) throw new Error(`at least ${clock.length} services are needed, got ${services}`);
  const ports = [...Array.from({ length: services - clock.length }, (_, i) => synthServicePort(i, endpoints)), ...clock];
  ports.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return { services: new Map(ports.map((p) => [p.key, p])) };
}
