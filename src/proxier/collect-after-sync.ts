/**
 * Giving memory back after the syncs that made garbage: once a full sync,
 * or a sync that wrote to the kernel, is followed by `quietMs` without
 * another such sync, a full, compacting garbage collection (util/gc.ts).
 * A burst of changes is collected once, after its last sync; a sync that
 * changed nothing (the periodic check of a quiet node) collects nothing.
 */
import { collectGarbage } from '../util/gc.ts';
import type { LastSync, SyncListener } from './proxier.ts';

/** Default quiet time before the collection, ms. */
export const DEFAULT_QUIET_MS = 1000;

/** True for a sync after which there is garbage worth collecting: a full one, or one that wrote. */
export function leavesGarbage(last: LastSync): boolean {
  if (last.error !== undefined) return false;
  return last.full || (last.result?.transactions ?? 0) > 0;
}

/**
 * Collect garbage `quietMs` after each sync of `proxier` that
 * {@link leavesGarbage}, unless another one comes first (the timer does not
 * keep the process alive). `collect` is for tests.
 * @returns a function that stops it and cancels a pending collection.
 */
export function collectAfterSyncs(proxier: { on(event: 'sync', listener: SyncListener): () => void }, quietMs: number = DEFAULT_QUIET_MS, collect: () => unknown = collectGarbage): () => void {
  let timer: NodeJS.Timeout | undefined;
  const off = proxier.on('sync', (last) => {
    if (!leavesGarbage(last)) return;
    clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      collect();
    }, quietMs);
    timer.unref();
  });
  return () => {
    off();
    clearTimeout(timer);
  };
}
