/**
 * The orders used everywhere in the model, so that every output (snapshot
 * keys, endpoints, allocations) is deterministic and locale-independent.
 */
import { compareAddresses } from './addr.ts';

/** Code-unit string order (not localeCompare): the order of every sorted key. */
export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Endpoint order: address numerically (addr.ts `compareAddresses`: 10.0.0.9
 * before 10.0.0.10), then port. Both IPs must be valid.
 */
export function compareEndpoints(a: { ip: string; port: number }, b: { ip: string; port: number }): number {
  return compareAddresses(a.ip, b.ip) || a.port - b.port;
}
