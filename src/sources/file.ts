/**
 * The file source: manifests on disk → Snapshot, with file watching and the
 * last-known-good rule: "the bad object is skipped; every other service
 * keeps being served; nothing already programmed is lost". Concretely:
 *
 *   - per object identity ("Kind/namespace/name") the source remembers the
 *     last version that parsed; if that object becomes invalid, the last
 *     valid version is used and its error says "keeping the last valid
 *     version";
 *   - if a whole file fails to read (syntax error), the objects last read
 *     from it are kept (in their last valid versions);
 *   - an object whose file is removed, or which disappears from its file, is
 *     gone (as is one that becomes "ignored", e.g. changes kind).
 */
import { dirname, basename, resolve } from 'node:path';
import { watch as chokidarWatch, type FSWatcher } from 'chokidar';
import type { Logger } from '../util/log.ts';
import { parseServiceCIDR } from '../model/allocate.ts';
import { ManifestError } from '../model/errors.ts';
import { buildSnapshot, type Allocation } from '../model/normalise.ts';
import { parseObject } from '../model/parse.ts';
import type { ParsedObject } from '../model/parsed.ts';
import { EMPTY_SNAPSHOT, type Snapshot } from '../model/types.ts';
import { isIgnoredName, isManifestFileName, readManifests } from './manifests.ts';
import { stat } from 'node:fs/promises';

/** Options of {@link FileSource}. */
export interface FileSourceOptions {
  /** Service CIDR for ClusterIP allocation, e.g. "10.96.0.0/12". */
  readonly serviceCIDR: string;
  readonly logger: Logger;
  /** Quiet time after the last file event before `onChange` fires, in milliseconds (default 100). */
  readonly debounceMs?: number;
}

/** Outcome of one {@link FileSource.load}. */
export interface LoadResult {
  readonly snapshot: Snapshot;
  /** Everything skipped or kept from an earlier version, one line each (also logged at warn). */
  readonly errors: ManifestError[];
  /** Entries dropped from otherwise valid objects (also logged at warn). */
  readonly warnings: ManifestError[];
  /** Every drover-allocated ClusterIP, by "namespace/name", sorted. */
  readonly allocations: Allocation[];
}

const KEEP_NOTE = 'keeping the last valid version';

/** Watches and reads a manifest file or folder; see the module comment for the last-known-good rule. */
export class FileSource {
  private readonly path: string;
  private readonly serviceCIDR: string;
  private readonly logger: Logger;
  private readonly debounceMs: number;
  /** identity → last valid version (only identities present at the last load). */
  private lastValid = new Map<string, ParsedObject>();
  /** file → identities read from it at the last load that could read it. */
  private lastByFile = new Map<string, string[]>();
  private previous: Snapshot = EMPTY_SNAPSHOT;
  /** "namespace/name" → ClusterIP already announced in the log. */
  private announced = new Map<string, string>();
  private queue: Promise<unknown> = Promise.resolve();
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;

  /** Throws Error when `opts.serviceCIDR` is not a valid service CIDR (allocate.ts parseServiceCIDR). */
  constructor(path: string, opts: FileSourceOptions) {
    parseServiceCIDR(opts.serviceCIDR);
    this.path = path;
    this.serviceCIDR = opts.serviceCIDR;
    this.logger = opts.logger;
    this.debounceMs = opts.debounceMs ?? 100;
  }

  /**
   * Read everything and build a Snapshot. Calls are serialised (a call made
   * while another runs starts after it). Rejects with Error when the path
   * is missing; the caller then keeps whatever it programmed last.
   */
  load(): Promise<LoadResult> {
    const run = this.queue.then(() => this.loadNow());
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async loadNow(): Promise<LoadResult> {
    const read = await readManifests(this.path);
    const errors: ManifestError[] = [...read.errors];
    const warnings: ManifestError[] = [];
    const failedFiles = new Set(read.errors.map((e) => e.file));
    const nextValid = new Map<string, ParsedObject>();
    const nextByFile = new Map<string, string[]>();
    const objects: ParsedObject[] = [];
    const keep = (identity: string, file: string) => {
      const last = this.lastValid.get(identity);
      if (last === undefined || nextValid.has(identity)) return false;
      nextValid.set(identity, last);
      nextByFile.set(file, [...(nextByFile.get(file) ?? []), identity]);
      objects.push(last);
      return true;
    };

    for (const o of read.objects) {
      const r = parseObject(o);
      if (r.status === 'ignored') {
        this.logger.debug({ file: o.file, index: o.index, reason: r.reason }, `ignored object #${o.index + 1} in ${o.file}: ${r.reason}`);
      } else if (r.status === 'error') {
        const kept = r.identity !== undefined && keep(r.identity, o.file);
        errors.push(kept ? r.error.withNote(KEEP_NOTE) : r.error);
      } else {
        warnings.push(...r.warnings);
        objects.push(r.object);
        if (!nextValid.has(r.object.identity)) nextValid.set(r.object.identity, r.object);
        nextByFile.set(o.file, [...(nextByFile.get(o.file) ?? []), r.object.identity]);
      }
    }
    // Files that could not be read: keep what they held last time.
    for (const file of failedFiles) {
      for (const identity of this.lastByFile.get(file) ?? []) keep(identity, file);
    }
    // A file that held objects and now reads as empty is most likely being
    // rewritten (`kubectl get ... > file` truncates first): keep its objects.
    // Deleting the file removes them.
    for (const file of read.files) {
      const held = this.lastByFile.get(file) ?? [];
      if (held.length === 0 || nextByFile.has(file) || failedFiles.has(file)) continue;
      if (read.objects.some((o) => o.file === file)) continue;
      for (const identity of held) keep(identity, file);
      warnings.push(new ManifestError({ file, detail: `file is empty; keeping the ${held.length} objects it held (delete the file to remove them)` }));
    }

    const built = buildSnapshot(objects, { serviceCIDR: this.serviceCIDR, previous: this.previous });
    errors.push(...built.errors);
    this.lastValid = nextValid;
    this.lastByFile = nextByFile;
    this.previous = built.snapshot;
    this.logResult(errors, warnings, built.allocations);
    for (const o of objects) {
      if (o.kind === 'Service' && o.unproxiedReason) this.logger.debug({ service: `${o.namespace}/${o.name}` }, `service ${o.namespace}/${o.name} is ${o.unproxiedReason}`);
    }
    return { snapshot: built.snapshot, errors, warnings, allocations: built.allocations };
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

  /**
   * Watch the path and call `onChange` (debounced by `debounceMs`) after
   * manifest files are added, changed or removed. A single file is watched
   * through its folder, so editors that replace it by renaming still work.
   * Resolves once the watcher is ready (events before that are not
   * reported). Calling it twice replaces the previous watcher.
   */
  async watch(onChange: () => void): Promise<void> {
    await this.stopWatching();
    const target = resolve(this.path);
    const isFile = (await stat(target).catch(() => undefined))?.isFile() ?? false;
    const root = isFile ? dirname(target) : target;
    const relevant = (p: string): boolean => {
      const abs = resolve(p);
      if (isFile) return abs === target;
      return abs === root || !isIgnoredName(basename(abs));
    };
    const watcher = chokidarWatch(root, {
      ignoreInitial: true,
      // Report a write only once the file's size has been stable for 100 ms,
      // so that a file being written is not read half-way.
      awaitWriteFinish: { stabilityThreshold: 100, pollInterval: 25 },
      ...(isFile ? { depth: 0 } : {}),
      ignored: (p: string) => resolve(p) !== root && !relevant(p),
    });
    this.watcher = watcher;
    watcher.on('all', (event, p) => {
      const isFileEvent = event === 'add' || event === 'change' || event === 'unlink';
      if (isFileEvent && !isFile && !isManifestFileName(basename(p))) return;
      if (!relevant(p)) return;
      this.logger.debug({ event, path: p }, `manifest ${event}: ${p}`);
      if (this.timer) clearTimeout(this.timer);
      this.timer = setTimeout(() => {
        this.timer = undefined;
        onChange();
      }, this.debounceMs);
    });
    watcher.on('error', (e) => this.logger.warn({ err: e }, `watching ${this.path}: ${(e as Error).message}`));
    await new Promise<void>((ready) => watcher.once('ready', () => ready()));
  }

  /** Stop watching (pending debounced calls are dropped). Safe to call more than once. */
  async close(): Promise<void> {
    await this.stopWatching();
  }

  private async stopWatching(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const w = this.watcher;
    this.watcher = undefined;
    if (w) await w.close();
  }
}
