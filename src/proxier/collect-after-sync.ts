/**
 * Giving memory back after the syncs that made much garbage: once a full
 * sync is followed by `quietMs` without another sync that wrote, a full,
 * compacting garbage collection (util/gc.ts). A burst of changes is
 * collected once, after its last sync; a sync that changed nothing (the
 * periodic check of a quiet node) collects nothing.
 *
 * A partial sync leaves little garbage (a few kilobytes per changed
 * service port), which V8's own collector takes without stopping the
 * process; so a partial sync that wrote asks for a collection only once the
 * heap has grown by more than {@link OVERDUE_GROWTH_BYTES} since the last
 * one (a whole List reloaded with every slice changed leaves about 100 MB).
 * Each collection blocks the process (about 1 s at 10,000 service ports,
 * util/gc.ts): collected after every sync that wrote, a change that came
 * about 1 s after the one before waited for the collection the first one
 * caused, on top of its own sync of milliseconds. A partial sync
 * still postpones a pending collection, so that it does not fall in the
 * middle of a burst.
 *
 * Under a stream of such syncs less than `quietMs` apart, the collection
 * comes right after the first sync that ends `maxWaitMs` or more after the
 * first one left uncollected once the heap has grown by more than
 * {@link OVERDUE_GROWTH_BYTES} since the last collection, so that the memory
 * stays bounded however fast changes come (a 10,000-Service List reloaded
 * and synced every 0.9 s otherwise grew the RSS from 177 to 359 MB in 10
 * reloads; with a longest wait of 2 s it peaked at 422 MB over 60 reloads,
 * with 1 s at 362 MB). Holding it back until a sync ends, or collecting
 * only after the heap or the RSS grew by 16-32 MB, let the RSS grow by half
 * or more over 100 reloads of a 10,000-Service List in a row, where this
 * keeps it within 1 %.
 */
import { collectGarbage, heapGrownBy } from '../util/gc.ts';
import type { LastSync, SyncListener } from './proxier.ts';

/** Default quiet time before the collection, ms. */
export const DEFAULT_QUIET_MS = 1000;

/** Default longest time garbage-leaving syncs are left uncollected under a stream of them, ms. */
export const DEFAULT_MAX_WAIT_MS = 1000;

/** Heap growth since the last collection past which a stream of syncs is collected at the longest wait, bytes. */
export const OVERDUE_GROWTH_BYTES = 64 * 1024 * 1024;

/** True for a sync after which there is garbage worth collecting: a full one (also a failed one: it read and rendered everything), or one that wrote. */
export function leavesGarbage(last: LastSync): boolean {
  if (last.full) return true;
  if (last.error !== undefined) return false;
  return (last.result?.transactions ?? 0) > 0;
}

/**
 * Collect garbage `quietMs` after each full sync of `proxier`, and after
 * each partial one that wrote once the heap has grown by the bound (see the
 * module comment), unless another such sync comes first, and at the latest
 * right after the first such sync that ends `maxWaitMs` after the first one
 * left uncollected (the timer does not keep the process alive; the wait is
 * measured on the monotonic clock, performance.now), when `grown()` says
 * the heap grew by more than {@link OVERDUE_GROWTH_BYTES}. `collect`, `now`
 * (ms) and `grown` are for tests.
 * @returns a function that stops it and cancels a pending collection.
 */
export function collectAfterSyncs(
  proxier: { on(event: 'sync', listener: SyncListener): () => void },
  quietMs: number = DEFAULT_QUIET_MS,
  collect: () => unknown = collectGarbage,
  maxWaitMs: number = DEFAULT_MAX_WAIT_MS,
  now: () => number = performance.now.bind(performance),
  grown: () => boolean = () => heapGrownBy(OVERDUE_GROWTH_BYTES),
): () => void {
  let timer: NodeJS.Timeout | undefined;
  /** When the first sync not collected since ended, or undefined when there is none. */
  let pendingSince: number | undefined;
  const off = proxier.on('sync', (last) => {
    if (!leavesGarbage(last)) return;
    // A partial sync's few kilobytes are V8's to collect, unless the heap has grown by the bound or a collection is pending.
    if (!last.full && pendingSince === undefined && !grown()) return;
    clearTimeout(timer);
    pendingSince ??= now();
    const overdue = now() - pendingSince >= maxWaitMs && grown();
    timer = setTimeout(
      () => {
        timer = undefined;
        pendingSince = undefined;
        collect();
      },
      overdue ? 0 : quietMs,
    );
    timer.unref();
  });
  return () => {
    off();
    clearTimeout(timer);
  };
}
