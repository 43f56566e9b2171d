/**
 * A full garbage collection on request. V8 collects old garbage when it
 * needs room, not when a process goes idle: after a full sync of a large
 * snapshot (every rule rendered, the kernel's read-back, the restore
 * payloads: a few hundred MB at 10,000 service ports) the heap keeps that
 * size, and so the RSS, until enough is allocated again, which in a quiet
 * cluster can be hours. Collecting once such a sync is done gives the
 * memory back (proxier/collect-after-sync.ts): the RSS rises for a moment
 * while the heap is compacted into fresh pages, then falls as the old ones
 * are returned.
 *
 * Node.js has no API for it without `--expose-gc` on its command line
 * (which, when given, is used as it is), so the first call turns that flag
 * on with v8.setFlagsFromString and takes `gc` from a fresh V8 context
 * (node:vm), where the flag makes it defined. Node.js warns that flags
 * changed after start may behave unpredictably; this one only defines the
 * `gc` function in new contexts, and stays on for the process's life.
 */
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** The runtime's collector: undefined until looked up, null when it cannot be had. */
let collector: (() => void) | null | undefined;

/** V8's `gc` function, from the global when Node.js was started with `--expose-gc`, else from a new context; null when neither gives one. */
function findCollector(): (() => void) | null {
  const exposed = (globalThis as { gc?: unknown }).gc;
  if (typeof exposed === 'function') return exposed as () => void;
  try {
    setFlagsFromString('--expose-gc');
    const gc: unknown = runInNewContext('typeof gc === "function" ? gc : undefined');
    return typeof gc === 'function' ? (gc as () => void) : null;
  } catch {
    return null;
  }
}

/**
 * Run a full, blocking garbage collection, then one that also compacts the
 * heap (V8's `--compact-on-every-full-gc`, for this one collection), so
 * that the pages it empties go back to the system instead of staying half
 * used. Compacting copies everything live into fresh pages before the old
 * ones are returned; the first collection returns the pages that hold only
 * garbage, so that the copy does not come on top of them (at 10,000
 * service ports of 10 endpoints in one file per object, it kept the peak
 * RSS 160 MB lower). It blocks the process: about 1 s with 80 MB live
 * (10,000 service ports from one List), up to 3-4 s with 150 MB live (from
 * one file per object), measured on a 2-core machine. Never throws.
 * @returns false when the runtime offers no way to do it (nothing was done).
 */
export function collectGarbage(): boolean {
  if (collector === undefined) collector = findCollector();
  if (collector === null) return false;
  collector();
  setFlagsFromString('--compact-on-every-full-gc');
  try {
    collector();
  } finally {
    setFlagsFromString('--no-compact-on-every-full-gc');
  }
  usedAfterCollection = heapUsed();
  return true;
}

/**
 * The heap growth within one sync that the backends collect while they
 * wait on the kernel (iptables-save and -restore, nft -f, netlink
 * batches), bytes: {@link collectWhenGrown}'s bound.
 */
export const SYNC_GROWTH_BOUND = 48 * 1024 * 1024;

/** Heap in use after the last collection this module ran or saw, bytes; undefined before the first. */
let usedAfterCollection: number | undefined;

/** Bytes in use on V8's heap now (live objects and garbage not yet collected). */
function heapUsed(): number {
  return getHeapStatistics().used_heap_size;
}

/**
 * True when the heap in use has grown by more than `boundBytes` since the
 * last collection this module ran or saw (always true before the first:
 * nothing is known). Cheap (one heap statistics call); never throws.
 */
export function heapGrownBy(boundBytes: number): boolean {
  const used = heapUsed();
  if (usedAfterCollection !== undefined && used < usedAfterCollection) usedAfterCollection = used;
  return usedAfterCollection === undefined || used - usedAfterCollection > boundBytes;
}

/**
 * Run a full, non-compacting garbage collection when the heap in use has
 * grown by more than `boundBytes` since the last one this function ran (or
 * since its first call). For the long stretches of work that make garbage
 * while the process waits on the kernel (the transactions of a large full
 * sync): V8 lets the heap grow to about four times what the last full
 * collection kept before it collects again, so at 10,000 service ports a
 * first full sync otherwise ends with some 240 MB of garbage on top of
 * about 195 MB live (measured in iptables mode, one file per object, on
 * 10,000 Services of 10 endpoints). A collection there takes about 150 ms
 * with 200 MB live on a 2-core machine. Never throws.
 * @returns true when it collected.
 */
export function collectWhenGrown(boundBytes: number): boolean {
  // The first call only sets the baseline; V8's own collections since lower it (heapGrownBy).
  if (usedAfterCollection === undefined) {
    usedAfterCollection = heapUsed();
    return false;
  }
  if (!heapGrownBy(boundBytes)) return false;
  if (collector === undefined) collector = findCollector();
  if (collector === null) return false;
  collector();
  usedAfterCollection = heapUsed();
  return true;
}
