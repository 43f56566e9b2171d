/**
 * ClusterIP allocation for services that come without one (Shepherd
 * services, hand-written manifests), from the service CIDR (`--service-cidr`,
 * default 10.96.0.0/12, kube-apiserver's default range).
 *
 * How an address is chosen:
 *   1. a service that held an address in the previous snapshot keeps it if
 *      it is still in the CIDR and not taken by an explicit ClusterIP (so a
 *      newcomer cannot steal it);
 *   2. every other service, in key order, gets
 *      candidate = network + 1 + (sha256(key)[0..4] as big-endian uint32 mod usable)
 *      where usable = size - 2 (network and broadcast addresses excluded),
 *      and on a collision the next address (linear probing, wrapping within
 *      the usable range). Addresses that fail the unicast check
 *      (validate.ts `specialAddress`) are never handed out.
 *
 * When an address is stable. `previous` is the only memory of this pure
 * function. drover fills it from the snapshot it built last, and, for
 * services that snapshot does not have, from the allocation state file that
 * every drover process that programs the kernel keeps
 * (sources/allocation-state.ts, via normalise.ts `remembered`). So:
 *   - while drover runs, a service keeps its address as long as it is in
 *     every snapshot and no explicit ClusterIP claims the address;
 *   - across a restart, a service keeps the address the state file records
 *     for it, unless an explicit ClusterIP now claims it; two colliding
 *     services therefore do not swap addresses;
 *   - a service dropped while drover runs (its file removed, its Shepherd
 *     Service deleted) is forgotten, as is every address of a lost or
 *     unreadable state file: such a service gets its address afresh by
 *     step 2 alone (its hash candidate when that is free, otherwise the next
 *     free address). A service whose address must never change needs an
 *     explicit ClusterIP.
 * Pure function; no I/O.
 */
import { createHash } from 'node:crypto';
import { compareStrings } from './order.ts';
import { cidrContains, ipAddress, ipPrefix, ipv4ToUint32, uint32ToIPv4, type IPPrefix } from './addr.ts';
import { parseCIDR, specialAddress, type CIDR } from './validate.ts';

/** The default service CIDR (kube-apiserver --service-cluster-ip-range default). */
export const DEFAULT_SERVICE_CIDR = '10.96.0.0/12';

/**
 * Ranges a service CIDR must not overlap: their addresses are not unicast
 * (validate.ts `checkUnicastIPv4`), and a ClusterIP in them would capture
 * local, link-local (e.g. cloud metadata) or multicast traffic.
 */
const RESERVED_RANGES: ReadonlyArray<{ cidr: string; what: string }> = [
  { cidr: '0.0.0.0/8', what: '"this network"' },
  { cidr: '127.0.0.0/8', what: 'loopback' },
  { cidr: '169.254.0.0/16', what: 'link-local' },
  { cidr: '224.0.0.0/3', what: 'multicast and reserved' },
];

/**
 * Parse a service CIDR: {@link parseCIDR} plus a prefix from /8 to /30 (at
 * least two usable addresses, and not a large share of the internet) and no
 * overlap with 0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16 or 224.0.0.0/3.
 * Throws Error with a message naming the value otherwise.
 */
export function parseServiceCIDR(value: string): CIDR {
  const cidr = parseCIDR(value);
  if (cidr.prefix > 30) throw new Error(`service CIDR ${value} is too small (prefix must be /30 or shorter)`);
  if (cidr.prefix < 8) throw new Error(`service CIDR ${value} is too large (prefix must be /8 or longer)`);
  const range = asPrefix(cidr);
  for (const r of RESERVED_RANGES) {
    const reserved = asPrefix(parseCIDR(r.cidr));
    const overlaps = cidrContains(reserved, ipAddress(4, range.network)) || cidrContains(range, ipAddress(4, reserved.network));
    if (overlaps) throw new Error(`service CIDR ${value} overlaps ${r.cidr} (${r.what} addresses); use a private range such as ${DEFAULT_SERVICE_CIDR}`);
  }
  return cidr;
}

/** `cidr` as an addr.ts prefix. */
function asPrefix(cidr: CIDR): IPPrefix {
  return ipPrefix(4, BigInt(cidr.network), cidr.prefix);
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

/**
 * Allocate addresses as described in the module comment (which also says
 * when an address is stable). `previous` is the only memory: a key absent
 * from it is allocated as on a fresh start.
 */
export function allocateClusterIPs(input: AllocationInput): AllocationResult {
  const { cidr } = input;
  const range = asPrefix(cidr);
  const usable = cidr.size - 2;
  const used = new Set<number>();
  for (const ip of input.taken) used.add(ipv4ToUint32(ip));
  const isUsable = (n: number) =>
    cidrContains(range, ipAddress(4, BigInt(n))) && n !== cidr.network && n !== cidr.network + cidr.size - 1 && specialAddress(n) === undefined;

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
      if (!used.has(n) && specialAddress(n) === undefined) {
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
