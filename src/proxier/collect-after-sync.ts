/**
 * Giving memory back after the syncs that made garbage: once a sync that
 * left garbage (see {@link worthCollecting}) is followed by `quietMs`
 * without another sync, a full, compacting garbage collection (util/gc.ts).
 * A burst of changes is collected once, after its last sync; a collection
 * due while a sync runs waits for the end of that sync and the quiet time
 * after it, so it never pauses a sync at its peak. A sync that changed
 * nothing (the periodic check of a quiet node) collects nothing.
 */
import { getHeapStatistics } from 'node:v8';
import { collectGarbage } from '../util/gc.ts';
import type { LastSync, SyncListener } from './proxier.ts';

/** Default quiet time before the collection, ms. */
export const DEFAULT_QUIET_MS = 1000;
/** Default growth of the heap since the last collection that makes a partial sync that wrote worth a collection, bytes (32 MiB). */
export const DEFAULT_GROWTH_BYTES = 32 * 1024 * 1024;

/** True for a sync that may leave garbage: a full one (also a failed one: it read and rendered everything), or one that wrote. */
export function leavesGarbage(last: LastSync): boolean {
  if (last.full) return true;
  if (last.error !== undefined) return false;
  return (last.result?.transactions ?? 0) > 0;
}

/**
 * Whether to collect after `last`: after a full sync always; after a
 * partial sync that wrote only when the heap has grown by `growthBytes`
 * since the last collection (a stream of small changes does not pay a
 * compaction, about 0.3 s at 10,000 service ports, for each of them).
 */
export function worthCollecting(last: LastSync, heapGrowth: number, growthBytes: number): boolean {
  if (!leavesGarbage(last)) return false;
  return last.full || heapGrowth >= growthBytes;
}

/** What {@link collectAfterSyncs} follows of the proxier. */
export interface CollectedProxier {
  on(event: 'sync', listener: SyncListener): () => void;
  /** True while a sync runs. */
  readonly syncing: boolean;
}

/** Options of {@link collectAfterSyncs}; `collect` and `heapUsed` are for tests. */
export interface CollectOptions {
  readonly quietMs?: number;
  readonly growthBytes?: number;
  readonly collect?: () => unknown;
  /** Bytes of heap in use, live or garbage (default: V8's used_heap_size). */
  readonly heapUsed?: () => number;
}

/**
 * Collect garbage `quietMs` after each sync of `proxier` that is
 * {@link worthCollecting}, unless another sync comes first (the timer does
 * not keep the process alive).
 * @returns a function that stops it and cancels a pending collection.
 */
export function collectAfterSyncs(proxier: CollectedProxier, opts: CollectOptions = {}): () => void {
  const quietMs = opts.quietMs ?? DEFAULT_QUIET_MS;
  const growthBytes = opts.growthBytes ?? DEFAULT_GROWTH_BYTES;
  const collect = opts.collect ?? collectGarbage;
  const heapUsed = opts.heapUsed ?? (() => getHeapStatistics().used_heap_size);
  let baseline = heapUsed();
  let timer: NodeJS.Timeout | undefined;
  /** A collection is due; it waits for the quiet time after the next sync. */
  let due = false;
  const fire = () => {
    timer = undefined;
    if (proxier.syncing) return; // `due` stays: the end of this sync arms the timer again
    due = false;
    collect();
    baseline = heapUsed();
  };
  const off = proxier.on('sync', (last) => {
    if (!due && !worthCollecting(last, heapUsed() - baseline, growthBytes)) return;
    // Due now, or already (then this sync came inside the quiet time, or ran when the timer fired): wait the quiet time again.
    due = true;
    clearTimeout(timer);
    timer = setTimeout(fire, quietMs);
    timer.unref();
  });
  return () => {
    off();
    clearTimeout(timer);
  };
}
