/**
 * Stable ClusterIP allocation for services that come without one (Shepherd
 * services, hand-written manifests), from the service CIDR (`--service-cidr`,
 * default 10.96.0.0/12, kube-apiserver's default range).
 *
 * The address of a service depends only on its "namespace/name", the CIDR
 * and the addresses already taken, so it survives restarts:
 *   1. a service that held an address in the previous snapshot keeps it if
 *      it is still in the CIDR and free (so a new service cannot steal it);
 *   2. every other service, in key order, gets
 *      candidate = network + 1 + (sha256(key)[0..4] as big-endian uint32 mod usable)
 *      where usable = size - 2 (network and broadcast addresses excluded),
 *      and on a collision the next address (linear probing, wrapping within
 *      the usable range).
 * Pure function; no I/O.
 */
import { createHash } from 'node:crypto';
import { compareStrings } from './order.ts';
import { cidrContains, ipv4ToUint32, parseCIDR, uint32ToIPv4, type CIDR } from './validate.ts';

/** The default service CIDR (kube-apiserver --service-cluster-ip-range default). */
export const DEFAULT_SERVICE_CIDR = '10.96.0.0/12';

/**
 * Parse a service CIDR: {@link parseCIDR} plus a prefix of at most /30 (so
 * that at least two usable addresses remain). Throws Error otherwise.
 */
export function parseServiceCIDR(value: string): CIDR {
  const cidr = parseCIDR(value);
  if (cidr.prefix > 30) throw new Error(`service CIDR ${value} is too small (prefix must be /30 or shorter)`);
  return cidr;
}

/** Inputs of {@link allocateClusterIPs}. */
export interface AllocationInput {
  readonly cidr: CIDR;
  /** "namespace/name" of every service that needs an address (any order, no duplicates). */
  readonly keys: readonly string[];
  /** Dotted-quad addresses already in use (explicit ClusterIPs); never handed out. */
  readonly taken: Iterable<string>;
  /** "namespace/name" → the address the service had in the previous snapshot. */
  readonly previous: ReadonlyMap<string, string>;
}

/** Outcome: `allocated` maps key → address (sorted by key); `exhausted` lists keys left without one (CIDR full). */
export interface AllocationResult {
  readonly allocated: ReadonlyMap<string, string>;
  readonly exhausted: readonly string[];
}

/** The hash candidate's offset inside the usable range [1, usable]: 1 + sha256(key) mod usable. */
export function hashOffset(key: string, usable: number): number {
  const h = createHash('sha256').update(key, 'utf8').digest().readUInt32BE(0);
  return 1 + (h % usable);
}

/** Allocate addresses as described in the module comment. */
export function allocateClusterIPs(input: AllocationInput): AllocationResult {
  const { cidr } = input;
  const usable = cidr.size - 2;
  const used = new Set<number>();
  for (const ip of input.taken) used.add(ipv4ToUint32(ip));
  const isUsable = (n: number) => cidrContains(cidr, n) && n !== cidr.network && n !== cidr.network + cidr.size - 1;

  const keys = [...input.keys].sort(compareStrings);
  const allocated = new Map<string, number>();
  // 1. stickiness: previous holders keep a still-free address.
  for (const key of keys) {
    const prev = input.previous.get(key);
    if (prev === undefined) continue;
    const n = ipv4ToUint32(prev);
    if (isUsable(n) && !used.has(n)) {
      used.add(n);
      allocated.set(key, n);
    }
  }
  // 2. hash + linear probing for the rest, in key order.
  const exhausted: string[] = [];
  for (const key of keys) {
    if (allocated.has(key)) continue;
    const start = usable > 0 ? hashOffset(key, usable) : 1;
    let found: number | undefined;
    for (let i = 0; i < usable; i++) {
      const n = cidr.network + 1 + ((start - 1 + i) % usable);
      if (!used.has(n)) {
        found = n;
        break;
      }
    }
    if (found === undefined) {
      exhausted.push(key);
      continue;
    }
    used.add(found);
    allocated.set(key, found);
  }
  const sorted = [...allocated].sort(([a], [b]) => compareStrings(a, b));
  return { allocated: new Map(sorted.map(([k, n]) => [k, uint32ToIPv4(n)])), exhausted };
}
