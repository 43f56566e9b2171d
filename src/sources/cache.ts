/**
 * What each manifest file held at its last read, so that an unchanged file
 * is not parsed again (the YAML parser reads about 1 MB/s, so re-parsing a
 * large dump on every change would dominate each sync).
 *
 * An entry is used only while the file's stamp (device, inode, size, mtime
 * and ctime, in nanoseconds) is what it was when the file was read. A file
 * modified within {@link RACY_MS} of being read is not cached at all: on a
 * file system with coarse timestamps a second write in the same tick could
 * leave the stamp unchanged (git's "racily clean" problem).
 */
import type { BigIntStats } from 'node:fs';
import type { ManifestError } from '../model/errors.ts';
import type { ManifestObject } from '../model/parsed.ts';

/**
 * What one file held: its objects (position order), or the errors that made
 * it skipped. The objects are ManifestObjects, or whatever a read's decode
 * function made of them (manifests.ts Decode).
 */
export interface FileRead<T = ManifestObject> {
  readonly objects: readonly T[];
  readonly errors: readonly ManifestError[];
}

/** A file modified less than this long before it was read is read again next time (milliseconds). */
export const RACY_MS = 2000;

/** The part of a stat that identifies a version of a file. */
type Stamp = Pick<BigIntStats, 'dev' | 'ino' | 'size' | 'mtimeNs' | 'ctimeNs'>;

function stampOf(st: Stamp): string {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
}

/** Per-path cache of {@link FileRead}s; see the module comment. Not shared between sources. */
export class ManifestCache<T = ManifestObject> {
  private readonly entries = new Map<string, { readonly stamp: string; readonly read: FileRead<T> }>();
  private readonly now: () => number;

  /** `now` (milliseconds since the epoch) is for tests. */
  constructor(now: () => number = Date.now) {
    this.now = now;
  }

  /** The read of `path` when its stamp is still `st`, else undefined. */
  get(path: string, st: Stamp): FileRead<T> | undefined {
    const e = this.entries.get(path);
    return e !== undefined && e.stamp === stampOf(st) ? e.read : undefined;
  }

  /** Remember `read` as the content of `path` at stamp `st` (forgotten instead when the file was modified too recently). */
  set(path: string, st: Stamp & Pick<BigIntStats, 'mtimeMs'>, read: FileRead<T>): void {
    if (this.now() - Number(st.mtimeMs) < RACY_MS) this.entries.delete(path);
    else this.entries.set(path, { stamp: stampOf(st), read });
  }

  /** Drop the entry of `path` (a file removed since). */
  forget(path: string): void {
    this.entries.delete(path);
  }

  /** Drop every entry whose path is not in `paths` (files removed since). */
  retain(paths: Iterable<string>): void {
    const keep = new Set(paths);
    for (const path of this.entries.keys()) if (!keep.has(path)) this.entries.delete(path);
  }

  /** Number of files cached. */
  get size(): number {
    return this.entries.size;
  }
}
