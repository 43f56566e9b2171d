/**
 * The last-known-good rule of the file source: "the bad object is skipped;
 * every other service keeps being served; nothing already programmed is
 * lost to a typo". From one read of the manifests and the parse result of
 * each object, {@link LastKnownGood.resolve} decides which objects to serve:
 *
 *   - a valid object is served as it is;
 *   - an invalid object whose identity ("Kind/namespace/name") was valid at
 *     the last load is replaced by that last valid version;
 *   - an object that is now invalid without a usable identity, or invalid
 *     under another identity (a typo in `metadata`, `name: Web`), or
 *     "ignored" (`kind: Servce`, `apiVersion: V1`, an IPv6 clusterIP, the
 *     object wrapped in a list...), is replaced by the last valid version of
 *     the object that was at the same position of the same file at the last
 *     load. A valid object with another identity at that position is a
 *     rename and is served as it is;
 *   - a file that fails to read (syntax error, too large) keeps what it
 *     held; so does a file with one unreadable document (each object it
 *     held that is not valid in this read is kept), and a file that becomes
 *     empty (it is most likely being rewritten; deleting the file removes
 *     its objects);
 *   - a last valid version is never used for an identity that is valid
 *     somewhere else in this read (an object that moved), nor twice;
 *   - a file the caller holds (still being written: file.ts) serves what
 *     it served at the last load, as if it had not been read;
 *   - an object that disappears from its file, or whose file is removed,
 *     is gone.
 * Every replacement is reported as an error ending in "keeping the last
 * valid version".
 *
 * It also remembers how many objects each file read as at its last load
 * read whole (no error, not held), so that {@link LastKnownGood.shrunk}
 * can name the files that now read as fewer: the file source holds such a
 * file for a while, since it may have been caught half-written (file.ts).
 *
 * {@link LastKnownGood.resolveFiles} decides the same for a few files read
 * again (a watcher's events), at the cost of those files, in the one case
 * where the rules above reduce to "serve each file's valid objects": the
 * last decision kept nothing and had no error, and the files read again
 * hold only valid objects (or ignored ones where nothing was served
 * before), none of whose identities any other file holds. In any other
 * case it declines, and the caller resolves a whole read.
 */
import { ManifestError } from '../model/errors.ts';
import type { ParseResult } from '../model/parse.ts';
import type { ParsedObject } from '../model/parsed.ts';
import type { ReadResult } from './manifests.ts';

/** The part of a read that {@link LastKnownGood.resolve} decides from. */
export type ResolveRead = Pick<ReadResult<{ readonly file: string; readonly index: number }>, 'objects' | 'errors' | 'files'>;
import { compareStrings } from '../model/order.ts';

/** What to serve after one read. */
export interface Resolved {
  /** The objects to build the snapshot from. */
  readonly objects: ParsedObject[];
  /** Read and parse errors, with the note when a last valid version replaces the object. */
  readonly errors: ManifestError[];
  /** Entries dropped from valid objects, and files kept while empty. */
  readonly warnings: ManifestError[];
  /** Objects drover does not read and that replaced nothing, with the reason (for a debug log). */
  readonly ignored: Array<{ readonly file: string; readonly index: number; readonly reason: string }>;
  /**
   * `objects` by the file that serves them (a last valid version is served
   * by the file it is kept for), each list in the order of `objects`; files
   * that serve nothing are left out.
   */
  readonly byFile: Map<string, ParsedObject[]>;
}

/** The note of an error whose object is replaced by its last valid version. */
export const KEEP_NOTE = 'keeping the last valid version';

/** "Service/ns/name" → "Service ns/name". */
function showIdentity(identity: string): string {
  const slash = identity.indexOf('/');
  return `${identity.slice(0, slash)} ${identity.slice(slash + 1)}`;
}

/** The note when the replacement was found by position. */
function positionNote(identity: string, index: number): string {
  return `${KEEP_NOTE} of ${showIdentity(identity)}, which was object #${index + 1} of this file`;
}

/** What one file held at a load: the identity served from each position, and every identity served from the file. */
interface FileHeld {
  readonly byIndex: Map<number, string>;
  readonly all: Set<string>;
}

/** One file read again, for {@link LastKnownGood.resolveFiles}: its objects (with their parse results, in position order) and read errors. */
export interface FileReread {
  readonly objects: ReadonlyArray<{ readonly index: number; readonly result: ParseResult }>;
  readonly errors: readonly ManifestError[];
}

/** What {@link LastKnownGood.resolveFiles} decided: what each file read again serves now (an empty list: nothing, or the file is gone). */
export interface ResolvedFiles {
  readonly byFile: Map<string, ParsedObject[]>;
  /** Objects of those files drover does not read (for a debug log). */
  readonly ignored: Array<{ readonly file: string; readonly index: number; readonly reason: string }>;
}

/** Remembers the last valid version of every object; see the module comment. */
export class LastKnownGood {
  /** identity → last valid version (only identities served at the last load). */
  private lastValid = new Map<string, ParsedObject>();
  /** file → what it held at the last load: position → identity, and every identity served from it. */
  private lastByFile = new Map<string, FileHeld>();
  /** identity → how many files of `lastByFile` serve it. */
  private holders = new Map<string, number>();
  /** file → the warnings of its valid objects at the last load (files with none are left out). */
  private warningsOf = new Map<string, ManifestError[]>();
  /** True when the last decision had no error and kept nothing: {@link resolveFiles} may decide alone. */
  private clean = false;
  /** file → how many objects it read as at its last load read whole (the highest position plus one). */
  private counts = new Map<string, number>();

  /**
   * Decide what to serve from `read` and `results` (`results[i]` is the
   * parse of `read.objects[i]`), and remember it for the next call. The
   * files in `holding` serve what they served at the last call: what they read
   * as now is left out.
   */
  resolve(read: ResolveRead, results: readonly ParseResult[], holding: ReadonlySet<string> = new Set()): Resolved {
    const out: Resolved = { objects: [], errors: [...read.errors], warnings: [], ignored: [], byFile: new Map() };
    const validNow = new Set<string>();
    results.forEach((r, i) => {
      if (r.status === 'ok' && !holding.has(read.objects[i]!.file)) validNow.add(r.object.identity);
    });
    const nextValid = new Map<string, ParsedObject>();
    const nextByFile = new Map<string, FileHeld>();
    const place = (file: string, index: number, object: ParsedObject) => {
      const identity = object.identity;
      out.objects.push(object);
      const served = out.byFile.get(file);
      if (served) served.push(object);
      else out.byFile.set(file, [object]);
      let held = nextByFile.get(file);
      if (!held) nextByFile.set(file, (held = { byIndex: new Map(), all: new Set() }));
      // A kept object of a partly unreadable file may share its old position with a current one: the current one keeps the position.
      if (!held.byIndex.has(index)) held.byIndex.set(index, identity);
      held.all.add(identity);
    };
    const warningsOf = new Map<string, ManifestError[]>();
    let kept = 0;
    const keep = (identity: string | undefined, file: string, index: number): boolean => {
      const last = identity === undefined ? undefined : this.lastValid.get(identity);
      if (identity === undefined || last === undefined || nextValid.has(identity) || validNow.has(identity)) return false;
      kept++;
      nextValid.set(identity, last);
      place(file, index, last);
      return true;
    };

    /** Keep every object `file` held at the last load, at its old position. */
    const keepAll = (file: string) => {
      const held = this.lastByFile.get(file);
      if (!held) return;
      const indexOf = new Map([...held.byIndex].map(([index, identity]) => [identity, index]));
      for (const identity of held.all) keep(identity, file, indexOf.get(identity) ?? -1);
    };

    read.objects.forEach((o, i) => {
      if (holding.has(o.file)) return;
      const r = results[i]!;
      const before = this.lastByFile.get(o.file)?.byIndex.get(o.index);
      if (r.status === 'ok') {
        for (const w of r.warnings) out.warnings.push(w);
        if (r.warnings.length > 0) {
          const list = warningsOf.get(o.file);
          if (list) list.push(...r.warnings);
          else warningsOf.set(o.file, [...r.warnings]);
        }
        if (!nextValid.has(r.object.identity)) nextValid.set(r.object.identity, r.object);
        place(o.file, o.index, r.object);
      } else if (r.status === 'error') {
        if (keep(r.identity, o.file, o.index)) out.errors.push(r.error.withNote(KEEP_NOTE));
        else if (before !== r.identity && keep(before, o.file, o.index)) out.errors.push(r.error.withNote(positionNote(before!, o.index)));
        else out.errors.push(r.error);
      } else if (keep(before, o.file, o.index)) {
        out.errors.push(new ManifestError({ file: o.file, index: o.index, detail: `${r.reason}; ${positionNote(before!, o.index)}` }));
      } else {
        out.ignored.push({ file: o.file, index: o.index, reason: r.reason });
      }
    });

    // Files that could not be read, whole or in part, and files held: keep what they held last time.
    const failed = new Set(read.errors.map((e) => e.file));
    for (const file of new Set([...failed, ...holding])) keepAll(file);
    // A file that held objects and now reads as empty is most likely being
    // rewritten (`kubectl get ... > file` truncates first): keep its objects.
    const withObjects = new Set(read.objects.map((o) => o.file));
    for (const file of read.files) {
      const held = this.lastByFile.get(file);
      if (held === undefined || held.all.size === 0 || failed.has(file) || holding.has(file) || withObjects.has(file)) continue;
      keepAll(file);
      out.warnings.push(new ManifestError({ file, detail: `file is empty; keeping the ${held.all.size} objects it held (delete the file to remove them)` }));
    }
    const counts = new Map<string, number>();
    const now = countsOf(read);
    for (const file of read.files) {
      const n = failed.has(file) || holding.has(file) ? this.counts.get(file) : now.get(file);
      if (n !== undefined && n > 0) counts.set(file, n);
    }
    this.counts = counts;

    this.lastValid = nextValid;
    this.lastByFile = nextByFile;
    this.holders = new Map();
    for (const held of nextByFile.values()) for (const identity of held.all) this.holders.set(identity, (this.holders.get(identity) ?? 0) + 1);
    this.warningsOf = warningsOf;
    this.clean = out.errors.length === 0 && kept === 0 && holding.size === 0;
    return out;
  }

  /**
   * The files of `read` that read as fewer objects than at their last load
   * read whole, but not as none (an emptied file is kept by the empty-file
   * rule), and without read errors (a file with one keeps what it held
   * anyway), sorted, each with both counts. Changes nothing.
   */
  shrunk(read: ResolveRead): Array<{ readonly file: string; readonly before: number; readonly now: number }> {
    const failed = new Set(read.errors.map((e) => e.file));
    const out: Array<{ file: string; before: number; now: number }> = [];
    for (const [file, now] of countsOf(read)) {
      const before = this.counts.get(file);
      if (before !== undefined && now < before && !failed.has(file)) out.push({ file, before, now });
    }
    return out.sort((a, b) => compareStrings(a.file, b.file));
  }

  /** How many objects `file` read as at its last load read whole (undefined: none, or never read whole). */
  countOf(file: string): number | undefined {
    return this.counts.get(file);
  }

  /** True when `file` served something at the last decision. */
  serves(file: string): boolean {
    return this.lastByFile.has(file);
  }

  /**
   * Decide what the files in `reads` serve now that they were read again
   * (undefined: the file is gone), as {@link resolve} would decide for the
   * whole read with every other file unchanged, and remember it; or return
   * undefined, changing nothing, when that takes more than these files (see
   * the module comment). Costs what the files hold, before and after.
   */
  resolveFiles(reads: ReadonlyMap<string, FileReread | undefined>): ResolvedFiles | undefined {
    if (!this.clean) return undefined;
    // identity → how many files serve it once these files are read again.
    const count = new Map<string, number>();
    const add = (identity: string, n: number) => count.set(identity, (count.get(identity) ?? this.holders.get(identity) ?? 0) + n);
    for (const [file, read] of reads) {
      const held = this.lastByFile.get(file);
      for (const identity of held?.all ?? []) add(identity, -1);
      if (read === undefined) continue;
      if (read.errors.length > 0) return undefined;
      if (read.objects.length === 0 && held !== undefined) return undefined; // emptied: the empty-file rule keeps what it held
      const inFile = new Set<string>();
      for (const { index, result } of read.objects) {
        if (result.status === 'error') return undefined;
        if (result.status === 'ignored') {
          if (held?.byIndex.has(index)) return undefined; // the position rule may keep what was there
          continue;
        }
        if (inFile.has(result.object.identity)) return undefined;
        inFile.add(result.object.identity);
        add(result.object.identity, 1);
      }
    }
    for (const [identity, n] of count) if (n > 1 || (n === 1 && this.lastValid.has(identity) && !this.heldOnlyBy(identity, reads))) return undefined;

    const out: ResolvedFiles = { byFile: new Map(), ignored: [] };
    for (const [file, read] of reads) {
      for (const identity of this.lastByFile.get(file)?.all ?? []) {
        const n = (this.holders.get(identity) ?? 1) - 1;
        if (n > 0) this.holders.set(identity, n);
        else this.holders.delete(identity);
        this.lastValid.delete(identity);
      }
      this.lastByFile.delete(file);
      this.warningsOf.delete(file);
      const served: ParsedObject[] = [];
      const held: FileHeld = { byIndex: new Map(), all: new Set() };
      const warnings: ManifestError[] = [];
      for (const { index, result } of read?.objects ?? []) {
        if (result.status === 'ignored') {
          out.ignored.push({ file, index, reason: result.reason });
          continue;
        }
        if (result.status !== 'ok') continue; // excluded above
        const o = result.object;
        served.push(o);
        held.byIndex.set(index, o.identity);
        held.all.add(o.identity);
        this.lastValid.set(o.identity, o);
        this.holders.set(o.identity, (this.holders.get(o.identity) ?? 0) + 1);
        for (const w of result.warnings) warnings.push(w);
      }
      if (served.length > 0) this.lastByFile.set(file, held);
      if (warnings.length > 0) this.warningsOf.set(file, warnings);
      const n = highestIndex(read?.objects ?? []) + 1;
      if (n > 0) this.counts.set(file, n);
      else this.counts.delete(file);
      out.byFile.set(file, served);
    }
    return out;
  }

  /** True when every file that served `identity` at the last decision is among `files`. */
  private heldOnlyBy(identity: string, files: ReadonlyMap<string, unknown>): boolean {
    let n = 0;
    for (const file of files.keys()) if (this.lastByFile.get(file)?.all.has(identity)) n++;
    return n === (this.holders.get(identity) ?? 0);
  }

  /** The warnings of the valid objects served now, in file order (what {@link resolve} returns in `warnings` when it keeps nothing). */
  warnings(): ManifestError[] {
    const files = [...this.warningsOf.keys()].sort(compareStrings);
    return files.flatMap((file) => this.warningsOf.get(file)!);
  }
}

/** The highest position among `objects`, or -1 for none. */
export function highestIndex(objects: ReadonlyArray<{ readonly index: number }>): number {
  let max = -1;
  for (const o of objects) if (o.index > max) max = o.index;
  return max;
}

/** How many objects each file of `read` reads as (its highest position plus one); files with none are left out. */
function countsOf(read: ResolveRead): Map<string, number> {
  const out = new Map<string, number>();
  for (const o of read.objects) out.set(o.file, Math.max(out.get(o.file) ?? 0, o.index + 1));
  return out;
}
