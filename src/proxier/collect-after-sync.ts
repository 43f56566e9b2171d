/**
 * Giving memory back after the syncs that made garbage: once a sync that
 * left garbage (see {@link leavesGarbage}) is followed by `quietMs`
 * without another sync, a full, compacting garbage collection (util/gc.ts).
 * A burst of changes is collected once, after its last sync; a collection
 * due while a sync runs waits for the end of that sync and the quiet time
 * after it, so it never pauses a sync at its peak. A sync that changed
 * nothing (the periodic check of a quiet node) collects nothing.
 *
 * Each collection blocks the process (0.3-0.5 s at 10,000 service ports),
 * so changes that come more than `quietMs` apart each pay one. Collecting
 * less often (after a growth threshold of the heap or of the RSS) let the
 * RSS grow by half over 100 reloads of a 10,000-Service List, where this
 * keeps it within 1 %.
 */
import { collectGarbage } from '../util/gc.ts';
import type { LastSync, SyncListener } from './proxier.ts';

/** Default quiet time before the collection, ms. */
export const DEFAULT_QUIET_MS = 1000;

/** True for a sync that may leave garbage: a full one (also a failed one: it read and rendered everything), or one that wrote. */
export function leavesGarbage(last: LastSync): boolean {
  if (last.full) return true;
  if (last.error !== undefined) return false;
  return (last.result?.transactions ?? 0) > 0;
}

/** What {@link collectAfterSyncs} follows of the proxier. */
export interface CollectedProxier {
  on(event: 'sync', listener: SyncListener): () => void;
  /** True while a sync runs. */
  readonly syncing: boolean;
}

/** Options of {@link collectAfterSyncs}; `collect` is for tests. */
export interface CollectOptions {
  readonly quietMs?: number;
  readonly collect?: () => unknown;
}

/**
 * Collect garbage `quietMs` after each sync of `proxier` that
 * {@link leavesGarbage}, unless another sync comes first (the timer does
 * not keep the process alive).
 * @returns a function that stops it and cancels a pending collection.
 */
export function collectAfterSyncs(proxier: CollectedProxier, opts: CollectOptions = {}): () => void {
  const quietMs = opts.quietMs ?? DEFAULT_QUIET_MS;
  const collect = opts.collect ?? collectGarbage;
  let timer: NodeJS.Timeout | undefined;
  /** A collection is due; it waits for the quiet time after the next sync. */
  let due = false;
  const fire = () => {
    timer = undefined;
    if (proxier.syncing) return; // `due` stays: the end of this sync arms the timer again
    due = false;
    collect();
  };
  const off = proxier.on('sync', (last) => {
    if (!due && !leavesGarbage(last)) return;
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
