/**
 * The file source: manifests on disk → Snapshot, with file watching and the
 * last-known-good rule of last-good.ts ("the bad object is skipped; every
 * other service keeps being served; nothing already programmed is lost").
 *
 * It is a transport over decoder.ts: it reads the files, and hands the
 * objects each file serves to the {@link Decoder} as one group per file,
 * naming only the files whose served objects changed. Each load says which
 * service ports changed since the previous load (`changed`), so the
 * proxier does not compare whole snapshots.
 *
 * While it watches, a load reads only the files the watcher reported
 * added, changed or removed since the last load (watch.ts), and decides
 * what they serve from those files alone (last-good.ts resolveFiles), so a
 * change to one file of a large folder costs about what that file's text
 * costs, plus the Snapshot rebuild (decoder.ts). A load reads everything
 * again (a full read) when asked to (`load({ full: true })`, which the
 * proxier does at each full sync), at the first load after the watch
 * (re)starts, after a watcher error or a folder event, after a load that
 * failed, and whenever the files read again cannot be decided alone (while
 * any object is invalid or kept from an earlier version, or an identity is
 * in two files). A full read skips an unchanged file by its stat
 * (manifests.ts ManifestCache), and in a changed file only the objects
 * whose text changed are validated again (by their digest, manifests.ts
 * Decode). Only the validation results are kept, never the raw objects.
 *
 * A file that does not parse and was modified in the last
 * {@link RACY_MS} may have been caught half-written: the source reads it
 * again {@link REREAD_MS} later, whatever events come, and keeps what the
 * file held meanwhile.
 *
 * Files written in pieces (the settle rule, while watching): a file is
 * applied only once it has stopped changing. A file written in place (the
 * watcher saw its content or attributes change) is read only once its
 * mtime and ctime are `settleMs` in the past and did not move while it was
 * read (manifests.ts SettleOptions); until then it serves what it served
 * at the last load (nothing, for a new file), and it is read again once
 * it has settled; the watcher's callback is not passed on before then. A
 * file not reported written in place that served something is read the
 * same way at a full read (its events may still be on their way); a new
 * one is read as it is. A file that reads as fewer objects than at its last load read
 * whole (but not as none: the empty-file rule of last-good.ts keeps those)
 * is taken as caught half-written too, even after it settled: it keeps
 * serving what it served, reported as an error (so the source is
 * incomplete), until it has not changed for `shrinkHoldMs`, then what it
 * reads as is applied (the objects a user removed are removed). A file
 * renamed into place (the watcher saw no write to it since its last read)
 * is complete: it is applied at once, fewer objects included.
 *
 * Symlinks (links.ts): a folder's symlinks are followed only into the
 * source folder (or out of it too with `followExternalLinks`), never to
 * the source folder or one of its parents; each link skipped is named in
 * one warning, at the full read that first finds it.
 */
import type { Logger } from '../util/log.ts';
import { ManifestError } from '../model/errors.ts';
import type { Allocation } from '../model/normalise.ts';
import { parseObject, type ParseResult } from '../model/parse.ts';
import type { ManifestObject, ParsedObject } from '../model/parsed.ts';
import type { Snapshot } from '../model/types.ts';
import { Decoder, type AllocationMemory, type DecodeResult } from './decoder.ts';
import { stat } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import type { NodePortRange } from '../model/claims.ts';
import { compareStrings } from '../model/order.ts';
import { RACY_MS } from './cache.ts';
import { highestIndex, LastKnownGood, type FileReread } from './last-good.ts';
import { anySkippedLink, skippedLinkWarning, type SkippedLink } from './links.ts';
import { isUnsettled, ManifestCache, readManifests, rereadManifestFiles, type SettleOptions, type Unsettled } from './manifests.ts';
import { RereadSchedule } from './reread.ts';
import { ManifestWatcher, type WatchedChanges } from './watch.ts';
import { DEFAULT_FILE_SETTLE_MS } from './defaults.ts';

/** How long after a load a file that did not parse while being written is read again, in milliseconds. */
export const REREAD_MS = 250;

export { DEFAULT_FILE_SETTLE_MS };

/** How long a file that reads as fewer objects than it held keeps serving what it held, after its last change, in milliseconds. */
export const SHRINK_HOLD_MS = 10_000;

/** Options of {@link FileSource}. */
export interface FileSourceOptions {
  /** Service CIDR for ClusterIP allocation, e.g. "10.96.0.0/12". */
  readonly serviceCIDR: string;
  readonly logger: Logger;
  /** Quiet time after the last file event before `onChange` fires, in milliseconds (default 60: a file still being written sends an event for each write, so it is read once its writes pause that long). */
  readonly debounceMs?: number;
  /** Where allocated ClusterIPs outlive the process (allocation-state.ts); none: in memory only. */
  readonly allocations?: AllocationMemory;
  /** This node's name (`--hostname-override`); none: a lone Node object in the files is this node's, and without one no endpoint is local. */
  readonly nodeName?: string;
  /** The settle time while watching, in milliseconds (default {@link DEFAULT_FILE_SETTLE_MS}; 0: files are read as they are); see the module comment. */
  readonly settleMs?: number;
  /** How long a file that reads as fewer objects keeps what it served, in milliseconds (default {@link SHRINK_HOLD_MS}); see the module comment. */
  readonly shrinkHoldMs?: number;
  /** Follow symlinks out of the source folder too (`--file-follow-external-links`; never to the folder or its parents). */
  readonly followExternalLinks?: boolean;
  /** Milliseconds since the epoch (for tests). */
  readonly now?: () => number;
  /** NodePorts allowed (`--service-node-port-range`); default model/claims.ts DEFAULT_NODE_PORT_RANGE, 30000-32767. */
  readonly nodePortRange?: NodePortRange | undefined;
}

/** Outcome of one {@link FileSource.load}. */
export interface LoadResult {
  readonly snapshot: Snapshot;
  /** Everything skipped or kept from an earlier version, one line each (also logged at warn). */
  readonly errors: ManifestError[];
  /**
   * Entries dropped from otherwise valid objects (e.g. a bad endpoint
   * address), endpoint addresses read from a non-canonical form, endpoint
   * objects without their Service, endpoint ports that match no port of
   * their Service or one of another protocol (also logged at warn).
   */
  readonly warnings: ManifestError[];
  /**
   * Frontends refused (model/claims.ts): a Service whose ClusterIP an
   * earlier one has, a NodePort out of range or taken, an external address
   * taken. Each is logged at warn once, when it first appears; they never
   * make the read incomplete.
   */
  readonly refusals: readonly ManifestError[];
  /** Every drover-allocated ClusterIP, by "namespace/name", sorted. */
  readonly allocations: Allocation[];
  /**
   * The messages of `errors`: while any file, document or object could not
   * be read, what is programmed may belong to it, so the proxier deletes no
   * service port (proxier.ts). Empty when the source was read whole.
   */
  readonly incomplete: readonly string[];
  /**
   * ServicePortNames ("namespace/name:port") added, removed or modified
   * since the previous load of this source; undefined at the first load.
   * A load that throws changes nothing, so the next one reports everything
   * since the last load that succeeded.
   */
  readonly changed: ReadonlySet<string> | undefined;
  /**
   * The files read at this load when it read only those the watcher
   * reported (named as a full read names them, sorted); undefined when it
   * read everything.
   */
  readonly reread?: readonly string[];
}

/**
 * The {@link LoadResult} of one Decoder apply: the transport's own `errors`
 * and `warnings` (these arrays are extended, not copied) followed by the
 * Decoder's, and the read is incomplete while there is any error.
 */
export function loadResult(built: DecodeResult, errors: ManifestError[], warnings: ManifestError[]): LoadResult {
  for (const e of built.errors) errors.push(e);
  for (const w of built.warnings) warnings.push(w);
  return { snapshot: built.snapshot, errors, warnings, refusals: built.refusals, allocations: built.allocations, incomplete: errors.map((e) => e.message), changed: built.changed };
}

/** What the file source keeps of one object read: where it is, its digest (manifests.ts Decode) and its validation. */
interface ReadObject {
  readonly file: string;
  readonly index: number;
  /** `file`, `index` and digest: equal keys mean the same object. */
  readonly key: string;
  readonly result: ParseResult;
}

/** Watches and reads a manifest file or folder; see the module comment. */
/** How long a file may keep changing, left unread, before one warning names it (ms); see FileSource.deferUnsettled. */
export const UNSETTLED_WARN_MS = 10_000;

export class FileSource {
  private readonly path: string;
  private readonly logger: Logger;
  private readonly debounceMs: number;
  private readonly lastGood = new LastKnownGood();
  private readonly cache = new ManifestCache<ReadObject>();
  /** Validation of every object read at the last load, by file, then by {@link ReadObject.key}. */
  private results = new Map<string, Map<string, ParseResult>>();
  /** Files the watcher reported since the last load began (absolute paths). */
  private pending = new Set<string>();
  /** True when the next load must read everything (see the module comment). */
  private fullNext = true;
  /** The files to read again by themselves (caught being written), whatever events come. */
  private readonly rereads: RereadSchedule;
  private readonly settleMs: number;
  private readonly shrinkHoldMs: number;
  private readonly links: 'inside' | 'external';
  private readonly now: () => number;
  /** Files (named as a full read names them) reported since their last read only as created or renamed into place, never written in place. */
  private renamed = new Set<string>();
  /** Files (named as a full read names them) reported written in place since their last read. */
  private inPlace = new Set<string>();
  /** Files held because they read as fewer objects than they served: since when (ms, this.now). */
  private readonly shrunkSince = new Map<string, number>();
  /** Files left unread because they kept changing: since when (ms, this.now), and whether that was warned about. */
  private readonly unsettledSince = new Map<string, { since: number; warned: boolean }>();
  /** The symlinks skipped at the last full read, by path, with their target and reason: each is warned about once while it stays. */
  private skippedLinks = new Map<string, string>();
  private readonly decoder: Decoder;
  /** What each file served at the last load (the Decoder's groups). */
  private served = new Map<string, readonly ParsedObject[]>();
  /** "namespace/name" → ClusterIP already announced in the log. */
  private announced = new Map<string, string>();
  /** The notes (normalise.ts) already logged: each is logged once while it holds. */
  private noted = new Set<string>();
  private queue: Promise<unknown> = Promise.resolve();
  private watcher: ManifestWatcher | undefined;
  /** The callback of the current {@link watch}, undefined when not watching. */
  private onChange: (() => void) | undefined;
  /** True when the watched folder was missing at the last load (it is watched again once it is back). */
  private rootMissing = false;

  /** Throws Error when `opts.serviceCIDR` is not a valid service CIDR (allocate.ts parseServiceCIDR). */
  constructor(path: string, opts: FileSourceOptions) {
    this.decoder = new Decoder({
      serviceCIDR: opts.serviceCIDR,
      ...(opts.allocations ? { allocations: opts.allocations } : {}),
      ...(opts.nodeName !== undefined ? { nodeName: opts.nodeName } : {}),
      ...(opts.nodePortRange !== undefined ? { nodePortRange: opts.nodePortRange } : {}),
    });
    this.path = path;
    this.logger = opts.logger;
    this.debounceMs = opts.debounceMs ?? 60;
    this.settleMs = opts.settleMs ?? DEFAULT_FILE_SETTLE_MS;
    this.shrinkHoldMs = opts.shrinkHoldMs ?? SHRINK_HOLD_MS;
    this.links = opts.followExternalLinks === true ? 'external' : 'inside';
    this.now = opts.now ?? Date.now;
    this.rereads = new RereadSchedule((files) => {
      for (const file of files) this.pending.add(file);
      this.onChange?.();
    }, this.now);
  }

  /**
   * Read everything and build a Snapshot. Calls are serialised (a call made
   * while another runs starts after it). Rejects with Error when the path
   * is missing; the caller then keeps whatever it programmed last. While
   * watching, a load first restarts the watcher if the watched folder was
   * replaced (see {@link watch}).
   */
  load(opts: { readonly full?: boolean } = {}): Promise<LoadResult> {
    const run = this.queue.then(() => this.loadNow(opts.full === true));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async loadNow(full: boolean): Promise<LoadResult> {
    await this.rewatchIfReplaced();
    const pending = this.pending;
    this.pending = new Set();
    const whole = full || this.fullNext || this.watcher === undefined;
    this.fullNext = false;
    try {
      const result = (whole ? undefined : await this.loadFiles(pending)) ?? (await this.loadAll());
      await this.rereadSoon(result.errors);
      return result;
    } catch (e) {
      this.fullNext = true;
      throw e;
    }
  }

  /** A full read: every file (see the module comment). */
  private async loadAll(): Promise<LoadResult> {
    // A full read also brings the watches up to date (a symlinked file whose target appeared, a folder replaced unseen).
    const refreshed = this.watcher?.refresh();
    const read = await readManifests(this.path, { cache: this.cache, decode: (o, digest) => this.decode(o, digest), links: this.links, ...this.settleOptions() });
    await refreshed;
    this.results = new Map();
    for (const o of read.objects) this.resultsOf(o.file).set(o.key, o.result);
    const results = read.objects.map((o) => o.result);
    const holding = new Set<string>();
    const holdErrors: ManifestError[] = [];
    for (const u of read.unsettled) {
      holding.add(u.file);
      this.deferUnsettled(u);
    }
    for (const f of [...this.unsettledSince.keys()]) if (!holding.has(f)) this.unsettledSince.delete(f);
    // Only while watching: a one-shot read has no earlier read to compare with.
    const shrunkNow = new Set<string>();
    for (const s of this.watcher === undefined ? [] : this.lastGood.shrunk(read)) {
      if (this.renamed.has(s.file)) continue;
      shrunkNow.add(s.file);
      const changedAt = await this.changedAt(s.file);
      // The hold runs from the last change, and never longer than the hold from when the file was first seen shrunk:
      // a file rewritten in place, smaller, more often than the hold would otherwise be held (with every deletion) forever.
      const now = this.now();
      const since = this.shrunkSince.get(s.file) ?? now;
      this.shrunkSince.set(s.file, since);
      if (changedAt === undefined || now - changedAt >= this.shrinkHoldMs || now - since >= this.shrinkHoldMs) continue;
      holding.add(s.file);
      this.rereadAt(resolve(s.file), Math.min(changedAt, since) + this.shrinkHoldMs);
      const detail = `reads as ${s.now} object${s.now === 1 ? '' : 's'} where it held ${s.before}: it may still be being written; keeping what it served until it has not changed for ${seconds(this.shrinkHoldMs)} (rename a file into place to apply it at once)`;
      holdErrors.push(new ManifestError({ file: s.file, detail }));
    }
    for (const f of [...this.shrunkSince.keys()]) if (!holding.has(f) || !shrunkNow.has(f)) this.shrunkSince.delete(f);
    const present = new Set(read.files);
    for (const set of [this.renamed, this.inPlace]) for (const f of [...set]) if (!holding.has(f) || !present.has(f)) set.delete(f);
    const { objects, errors, warnings, ignored, byFile } = this.lastGood.resolve(read, results, holding);
    this.logIgnored(ignored);
    const built = this.decoder.apply(fileChanges(this.served, byFile));
    this.served = byFile;
    return this.finish(built, [...holdErrors, ...errors], [...this.newSkippedLinks(read.skippedLinks), ...warnings], objects);
  }

  /** The settle options of a read: only while watching (a one-shot read takes files as they are). */
  private settleOptions(): { settle?: SettleOptions } {
    if (this.watcher === undefined || this.settleMs <= 0) return {};
    // A file not reported written in place is read as it is, unless it served something (its events may still be on their way).
    const exempt = (file: string) => !this.inPlace.has(file) && (this.renamed.has(file) || !this.lastGood.serves(file));
    return { settle: { ms: this.settleMs, exempt, now: this.now } };
  }

  /**
   * A file left unread while it settles: read again once it has been
   * unchanged for the settle time. One that keeps changing for longer than
   * {@link UNSETTLED_WARN_MS} (or 10 settle times, if longer) is named in one
   * warning, so that a file that never settles (appended to, or touched,
   * more often than the settle time) is not left unread unseen.
   */
  private deferUnsettled(u: Unsettled): void {
    this.logger.debug({ file: u.file, changedAt: u.changedAt }, `${u.file} is still being written; reading it once it has not changed for ${this.settleMs} ms`);
    const now = this.now();
    const seen = this.unsettledSince.get(u.file) ?? { since: now, warned: false };
    this.unsettledSince.set(u.file, seen);
    if (!seen.warned && now - seen.since >= Math.max(UNSETTLED_WARN_MS, 10 * this.settleMs)) {
      seen.warned = true;
      this.logger.warn({ file: u.file }, `${u.file} has kept changing for ${seconds(now - seen.since)}: it is applied once it has not changed for ${this.settleMs} ms (--file-settle); until then it serves what it served`);
    }
    this.rereadAt(resolve(u.file), u.changedAt + this.settleMs);
  }

  /** When the file at `file` last changed (the later of its mtime and ctime), or undefined when it is gone. */
  private async changedAt(file: string): Promise<number | undefined> {
    const st = await stat(file).catch(() => undefined);
    return st === undefined ? undefined : Math.max(st.mtimeMs, st.ctimeMs);
  }

  /** The warnings of the symlinks skipped at this full read that were not skipped at the last one (or led elsewhere then). */
  private newSkippedLinks(links: readonly SkippedLink[]): ManifestError[] {
    const now = new Map(links.map((l) => [l.path, `${l.reason}:${l.target}`]));
    const fresh = links.filter((l) => this.skippedLinks.get(l.path) !== now.get(l.path));
    this.skippedLinks = now;
    return fresh.map(skippedLinkWarning);
  }

  /**
   * Read only `paths` (absolute, from the watcher) again, or return
   * undefined when what they serve cannot be decided from them alone
   * (last-good.ts resolveFiles); the caller then reads everything.
   */
  private async loadFiles(paths: ReadonlySet<string>): Promise<LoadResult | undefined> {
    const asked = [...paths].map((p) => this.sourcePath(p)).sort(compareStrings);
    // A link the folder scan would not follow is the full read's to skip (and to warn about).
    if (this.watcher?.isFolder === true && (await anySkippedLink(asked, this.path, this.links))) return undefined;
    const reads = await rereadManifestFiles(asked, { cache: this.cache, decode: (o, digest) => this.decode(o, digest), ...this.settleOptions() });
    const rereads = new Map<string, FileReread | undefined>();
    // The source path itself gone: a full read says so (it throws), and keeps what was programmed.
    if (reads.has(this.path) && reads.get(this.path) === undefined) return undefined;
    const files: string[] = [];
    let shrunk = false;
    for (const [file, read] of reads) {
      if (read !== undefined && isUnsettled(read)) {
        // Still being written: left as it was, and read again once it has settled.
        this.pending.add(resolve(file));
        this.deferUnsettled(read);
        continue;
      }
      files.push(file);
      this.results.delete(file);
      if (read === undefined) {
        rereads.set(file, undefined);
        continue;
      }
      for (const o of read.objects) this.resultsOf(file).set(o.key, o.result);
      rereads.set(file, { objects: read.objects, errors: read.errors });
      // Fewer objects than it held: a full read decides whether it is held (see the module comment).
      const count = highestIndex(read.objects) + 1;
      if (this.watcher !== undefined && count > 0 && count < (this.lastGood.countOf(file) ?? 0) && !this.renamed.has(file)) shrunk = true;
    }
    if (shrunk) return undefined;
    const resolved = this.lastGood.resolveFiles(rereads);
    if (resolved === undefined) return undefined;
    for (const file of files) {
      this.renamed.delete(file);
      this.inPlace.delete(file);
    }
    this.logIgnored(resolved.ignored);
    const upsert: Array<[string, ParsedObject[]]> = [];
    const objects: ParsedObject[] = [];
    for (const [file, served] of resolved.byFile) {
      upsert.push([file, served]);
      if (served.length > 0) this.served.set(file, served);
      else this.served.delete(file);
      for (const o of served) objects.push(o);
    }
    const built = this.decoder.apply({ upsert, remove: [] });
    this.logger.debug({ files }, `read ${files.length} changed manifest file${files.length === 1 ? '' : 's'}`);
    return { ...this.finish(built, [], this.lastGood.warnings(), objects), reread: files };
  }

  /** The LoadResult of a decoder apply, logged; `objects` are the objects read at this load, for their debug log. */
  private finish(built: DecodeResult, errors: ManifestError[], warnings: ManifestError[], objects: readonly ParsedObject[]): LoadResult {
    const result = loadResult(built, errors, warnings);
    // A whole read: the records of the state file for services not in it are of services gone.
    if (result.errors.length === 0) this.decoder.forgetAbsent();
    this.logResult(result.errors, result.warnings, built.allocations);
    for (const e of built.newRefusals) this.logger.warn({ file: e.file, kind: e.kind, object: e.object, field: e.field }, e.message);
    this.logNotes(built.notes);
    for (const o of objects) {
      if (o.kind === 'Service' && o.unproxiedReason) this.logger.debug({ service: `${o.namespace}/${o.name}` }, `service ${o.namespace}/${o.name} is ${o.unproxiedReason}`);
    }
    return result;
  }

  private logIgnored(ignored: ReadonlyArray<{ readonly file: string; readonly index: number; readonly reason: string }>): void {
    for (const o of ignored) {
      this.logger.debug({ file: o.file, index: o.index, reason: o.reason }, `ignored object #${o.index + 1} in ${o.file}: ${o.reason}`);
    }
  }

  /** The path under which a full read names the file at absolute path `abs` (the source path joined with the part below the watched path). */
  private sourcePath(abs: string): string {
    const below = relative(resolve(this.path), abs);
    return below === '' ? this.path : join(this.path, below);
  }

  /** The validation results of `file`'s objects, by key. */
  private resultsOf(file: string): Map<string, ParseResult> {
    let m = this.results.get(file);
    if (!m) this.results.set(file, (m = new Map()));
    return m;
  }

  /**
   * While watching, read again {@link REREAD_MS} from now the files among
   * `errors` that were modified in the last {@link RACY_MS}: a syntax error
   * there may be a write caught half-way.
   */
  private async rereadSoon(errors: readonly ManifestError[]): Promise<void> {
    if (this.onChange === undefined) return;
    // Errors of a whole file or document (syntax, unreadable) name no kind.
    for (const file of new Set(errors.filter((e) => e.kind === '').map((e) => e.file))) {
      const st = await stat(file).catch(() => undefined);
      if (st !== undefined && Date.now() - st.mtimeMs < RACY_MS && !this.rereads.has(resolve(file))) this.rereadAt(resolve(file), this.now() + REREAD_MS);
    }
  }

  /** While watching, read `file` (an absolute path) again at `at` (ms since the epoch), whatever events come (reread.ts). */
  private rereadAt(file: string, at: number): void {
    if (this.onChange !== undefined) this.rereads.at(file, at);
  }

  /** Validate `o`, or reuse the validation of the last load when its text is the same. */
  private decode(o: ManifestObject, digest: string): ReadObject {
    const key = `${o.index}:${digest}:${o.file}`;
    return { file: o.file, index: o.index, key, result: this.results.get(o.file)?.get(key) ?? parseObject(o) };
  }

  private logResult(errors: readonly ManifestError[], warnings: readonly ManifestError[], allocations: readonly Allocation[]): void {
    for (const e of [...errors, ...warnings]) {
      this.logger.warn({ file: e.file, kind: e.kind, object: e.object, field: e.field }, e.message);
    }
    const current = new Map(allocations.map((a) => [a.key, a.clusterIP]));
    for (const [key, ip] of current) {
      if (this.announced.get(key) !== ip) this.logger.info({ service: key, clusterIP: ip }, `allocated ClusterIP ${ip} to ${key}`);
    }
    this.announced = current;
  }

  /** Log each note (e.g. "Service ns/a uses its EndpointSlices; the 2 Pods its selector matches are not used") when it first appears. */
  private logNotes(notes: readonly string[]): void {
    for (const n of notes) if (!this.noted.has(n)) this.logger.info(n);
    this.noted = new Set(notes);
  }

  /**
   * Watch the path and call `onChange` (debounced by `debounceMs`) after
   * manifest files are added, changed or removed (watch.ts: a single file
   * is watched through its folder; at most 8 levels of subfolders). Resolves
   * once the watcher is ready (events before that are not reported).
   * Calling it twice replaces the previous watcher. When the watched folder
   * is deleted and recreated or swapped for another, the next {@link load}
   * (e.g. the periodic resync) notices and watches the new folder with the
   * same `onChange`.
   */
  async watch(onChange: () => void): Promise<void> {
    await this.stopWatching();
    this.onChange = onChange;
    await this.startWatcher(onChange);
  }

  private async startWatcher(onChange: () => void): Promise<void> {
    const noted = (changes: WatchedChanges) => void this.noteChanges(changes, onChange);
    const w = await ManifestWatcher.start(this.path, { logger: this.logger, debounceMs: this.debounceMs, onChange: noted, links: this.links });
    if (this.onChange !== onChange) {
      await w.close(); // closed or replaced meanwhile
      return;
    }
    this.watcher = w;
    this.fullNext = true; // what changed before the watcher was ready is not among its events
  }

  /**
   * Take in what the watcher saw, and call `onChange` unless all it saw is
   * files written in place that have not settled yet: those are read
   * again once they have (so a sync is not spent on a file still being
   * written).
   */
  private async noteChanges(changes: WatchedChanges, onChange: () => void): Promise<void> {
    if (changes.all) this.fullNext = true;
    let now = changes.all;
    for (const file of changes.files) {
      this.pending.add(file);
      const name = this.sourcePath(file);
      if (!changes.written.has(file)) {
        // Only created, renamed into place or removed since its last read: complete as it is.
        if (!this.inPlace.has(name)) this.renamed.add(name);
        now = true;
        continue;
      }
      this.renamed.delete(name);
      this.inPlace.add(name);
      const changedAt = this.settleMs > 0 ? await this.changedAt(file) : undefined;
      if (changedAt !== undefined && this.now() - changedAt < this.settleMs) this.rereadAt(file, changedAt + this.settleMs);
      else now = true;
    }
    if (now && this.onChange === onChange) onChange();
  }

  /** Restart the watcher when its folder was replaced or is back after missing; log when it goes missing. */
  private async rewatchIfReplaced(): Promise<void> {
    const w = this.watcher;
    const onChange = this.onChange;
    if (w === undefined || onChange === undefined) return;
    const state = await w.state();
    const wasMissing = this.rootMissing;
    this.rootMissing = state === 'missing';
    if (state !== 'current' || wasMissing) this.fullNext = true; // the watcher's events no longer tell what is there
    if (state === 'missing' && !wasMissing) {
      this.logger.warn({ path: w.root }, `watched folder ${w.root} is gone; watching again once it is back`);
    }
    // A folder recreated with the same inode and no birth time looks "current": having seen it missing tells.
    if (state === 'missing' || (state === 'current' && !wasMissing)) return;
    this.logger.info({ path: w.root }, `watched folder ${w.root} was replaced; watching the new one`);
    this.watcher = undefined;
    await w.close();
    await this.startWatcher(onChange);
  }

  /** Stop watching (pending debounced calls are dropped). Safe to call more than once. */
  async close(): Promise<void> {
    await this.stopWatching();
  }

  private async stopWatching(): Promise<void> {
    this.onChange = undefined;
    this.rereads.clear();
    this.renamed.clear();
    this.inPlace.clear();
    const w = this.watcher;
    this.watcher = undefined;
    if (w) await w.close();
  }
}

/**
 * The Decoder changes from what each file served at the last load to what
 * it serves now: files whose list of served objects differs (compared by
 * reference: an unchanged file yields the same objects) are upserted, files
 * that serve nothing any more are removed.
 */
export function fileChanges(
  before: ReadonlyMap<string, readonly ParsedObject[]>,
  after: ReadonlyMap<string, readonly ParsedObject[]>,
): { upsert: Array<[string, readonly ParsedObject[]]>; remove: string[] } {
  const upsert: Array<[string, readonly ParsedObject[]]> = [];
  for (const [file, objects] of after) {
    const old = before.get(file);
    if (old === undefined || old.length !== objects.length || old.some((o, i) => o !== objects[i])) upsert.push([file, objects]);
  }
  const remove = [...before.keys()].filter((file) => !after.has(file));
  return { upsert, remove };
}

/** `ms` in words for a message: "10 s", "1.5 s", "200 ms". */
function seconds(ms: number): string {
  return ms >= 1000 ? `${Math.round(ms / 100) / 10} s` : `${ms} ms`;
}
