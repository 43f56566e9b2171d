/**
 * Change tracking between two snapshots: which service ports need their
 * rules rewritten (kube-proxy: pkg/proxy/servicechangetracker.go and
 * endpointschangetracker.go, reduced to comparing whole snapshots).
 */
import { isDeepStrictEqual } from 'node:util';
import type { Snapshot } from '../model/types.ts';

/**
 * ServicePortNames that were added, removed, or whose service or endpoints
 * differ between `before` and `after`.
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
