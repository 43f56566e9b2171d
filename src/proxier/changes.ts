/**
 * Change tracking between two whole snapshots: which service ports need
 * their rules rewritten (kube-proxy: pkg/proxy/servicechangetracker.go and
 * endpointschangetracker.go, reduced to comparing whole snapshots).
 *
 * Sources report what changed themselves (proxier.ts SourceRead.changed,
 * sources/decoder.ts), at the cost of what changed; this comparison, at the
 * cost of every service port, is the proxier's fallback for a read that
 * cannot tell, and the reference the sources' reports are tested against.
 */
import { isDeepStrictEqual } from 'node:util';
import type { Snapshot } from '../model/types.ts';

/**
 * ServicePortNames ("namespace/name:port") that were added, removed, or
 * whose ServicePort (service or endpoints) differs between `before` and
 * `after`. Costs O(service ports of both).
 */
export function changedServicePorts(before: Snapshot, after: Snapshot): Set<string> {
  const changed = new Set<string>();
  for (const [key, sp] of after.services) {
    const old = before.services.get(key);
    if (!old || !isDeepStrictEqual(old, sp)) changed.add(key);
  }
  for (const key of before.services.keys()) if (!after.services.has(key)) changed.add(key);
  return changed;
}
