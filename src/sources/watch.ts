/**
 * Watching a manifest file or folder for the file source, with one inotify
 * watch per folder (Node's fs.watch on a folder, which reports every entry
 * of the folder created, changed, renamed or removed), not one per file: at
 * 20,000 files a watch per file costs about 90 MB and 4 s to set up.
 *
 *   - A single file is watched through its folder, so editors that replace
 *     it by renaming still work.
 *   - Subfolders are watched down to {@link MAX_WATCH_DEPTH} levels. Files
 *     deeper than that are still read (the folder scan has no such limit),
 *     but only seen at a full read.
 *   - A symlink to a folder is followed, except when it points inside the
 *     watched folder (that folder is watched already) or to one of its own
 *     ancestors (a loop); each real folder is watched once. A symlink to a
 *     manifest file gets a watch of its own, on its target.
 *   - An event names a file: a manifest file is reported by its path. An
 *     event that names a folder (created, removed, renamed, or a dotted one
 *     such as the `..data` link a Kubernetes ConfigMap volume swaps), a
 *     watch that fails, or an event without a name is reported as `all`,
 *     and the set of watched folders is brought up to date.
 *   - Watcher errors are logged at most once per {@link ERROR_LOG_INTERVAL_MS}
 *     per error code, with the number of repeats left out.
 *   - The watched folder is remembered by device, inode and birth time
 *     (a folder deleted and recreated at once often gets the same inode
 *     number back), so that {@link ManifestWatcher.state} can tell when the
 *     folder at the path was deleted and recreated, or swapped
 *     (`mv src src.old; mv new src`): the watcher then still watches the old
 *     one, and must be restarted.
 */
import { lstatSync, realpathSync, statSync, watch as fsWatch, type FSWatcher } from 'node:fs';
import { readdir, realpath, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve, sep } from 'node:path';
import type { Logger } from '../util/log.ts';
import { isIgnoredName, isManifestFileName } from './manifests.ts';

/** Levels of subfolders watched below a source folder. */
export const MAX_WATCH_DEPTH = 8;

/** Least time between two logs of the same watcher error code, in milliseconds. */
export const ERROR_LOG_INTERVAL_MS = 60_000;

/** Options of {@link ManifestWatcher.start}. */
export interface WatcherOptions {
  readonly logger: Logger;
  /** Quiet time after the last file event before `onChange` fires, in milliseconds. */
  readonly debounceMs: number;
  /** Called (debounced) after manifest files are added, changed or removed, with what changed since the last call. */
  readonly onChange: (changes: WatchedChanges) => void;
  /** Milliseconds since the epoch, for tests of the error log limit. */
  readonly now?: () => number;
}

/**
 * What a watcher saw between two calls of its `onChange`: the manifest
 * files added, changed or removed, as absolute paths; `all` when something
 * else happened that a list of files cannot say (a folder added or removed,
 * a watch that failed, an event without a name), so that everything must
 * be read again.
 */
export interface WatchedChanges {
  readonly files: ReadonlySet<string>;
  readonly all: boolean;
}

/** What identifies a folder: device, inode and birth time (0 where the file system does not record it). */
interface FolderId {
  readonly dev: bigint;
  readonly ino: bigint;
  readonly birthtimeNs: bigint;
}

/** The folders and symlinked manifest files to watch below a root (absolute paths). */
interface WatchSet {
  readonly folders: Set<string>;
  readonly links: Set<string>;
}

/** A running watch of a manifest path; see the module comment. */
export class ManifestWatcher {
  /** The folder watched: the path itself, or the folder of a single file. */
  readonly root: string;
  private readonly id: FolderId | undefined;
  /** The single file watched, or undefined when a folder is. */
  private readonly target: string | undefined;
  private readonly opts: WatcherOptions;
  private readonly errors: ErrorLogLimit;
  /** Folder or symlinked file → its fs.watch. */
  private readonly watches = new Map<string, FSWatcher>();
  private timer: NodeJS.Timeout | undefined;
  /** The files and the `all` flag of the next `onChange` call. */
  private files = new Set<string>();
  private all = false;
  private closed = false;
  /** The bringing up to date of the watched folders under way, and whether another is asked for after it. */
  private refreshing: Promise<void> | undefined;
  private refreshAgain = false;

  private constructor(root: string, id: FolderId | undefined, target: string | undefined, opts: WatcherOptions) {
    this.root = root;
    this.id = id;
    this.target = target;
    this.opts = opts;
    this.errors = new ErrorLogLimit(ERROR_LOG_INTERVAL_MS, opts.now);
  }

  /** Start watching `path`; resolves once every folder is watched (events before that are not reported). */
  static async start(path: string, opts: WatcherOptions): Promise<ManifestWatcher> {
    const target = resolve(path);
    const isFile = (await stat(target).catch(() => undefined))?.isFile() ?? false;
    const root = isFile ? dirname(target) : target;
    const self = new ManifestWatcher(root, await folderId(root), isFile ? target : undefined, opts);
    await self.refresh();
    return self;
  }

  /**
   * Whether the folder at {@link root} is still the one this watcher
   * started on: "current"; "replaced" (deleted and recreated, or swapped,
   * or created after the watcher started); "missing" (nothing there now).
   */
  async state(): Promise<'current' | 'replaced' | 'missing'> {
    const now = await folderId(this.root);
    if (now === undefined) return 'missing';
    const same = this.id !== undefined && now.dev === this.id.dev && now.ino === this.id.ino && now.birthtimeNs === this.id.birthtimeNs;
    return same ? 'current' : 'replaced';
  }

  /** Stop watching; a pending debounced call is dropped. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    for (const w of this.watches.values()) w.close();
    this.watches.clear();
    await this.refreshing;
  }

  /** Report `file` (or everything, for undefined) at the next debounced `onChange`. */
  private notify(file: string | undefined): void {
    if (this.closed) return;
    if (file === undefined) this.all = true;
    else this.files.add(file);
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const changes = { files: this.files, all: this.all };
      this.files = new Set();
      this.all = false;
      this.opts.onChange(changes);
    }, this.opts.debounceMs);
  }

  /** Bring the watches up to date with the folders and symlinked files there are now; calls made meanwhile make one more pass. */
  private refresh(): Promise<void> {
    if (this.refreshing !== undefined) {
      this.refreshAgain = true;
      return this.refreshing;
    }
    const run = async () => {
      do {
        this.refreshAgain = false;
        const want = this.target !== undefined ? await singleFileSet(this.root, this.target) : await folderSet(this.root);
        if (this.closed) return;
        for (const [path, w] of this.watches) {
          if (want.folders.has(path) || want.links.has(path)) continue;
          w.close();
          this.watches.delete(path);
        }
        for (const folder of want.folders) if (!this.watches.has(folder)) this.watchPath(folder, (event, name) => void this.onFolderEvent(folder, event, name));
        for (const link of want.links) if (!this.watches.has(link)) this.watchPath(link, () => this.onLinkEvent(link));
      } while (this.refreshAgain && !this.closed);
    };
    this.refreshing = run().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  /** fs.watch `path`; a watch that cannot start or fails later is logged, and everything is read again. */
  private watchPath(path: string, listener: (event: string, name: string | null) => void): void {
    let w: FSWatcher;
    try {
      w = fsWatch(path, listener);
    } catch (e) {
      this.failed(path, e as NodeJS.ErrnoException);
      return;
    }
    this.watches.set(path, w);
    w.on('error', (e: NodeJS.ErrnoException) => {
      w.close();
      if (this.watches.get(path) === w) this.watches.delete(path);
      this.failed(path, e);
      void this.refresh();
    });
  }

  private failed(path: string, err: NodeJS.ErrnoException): void {
    this.notify(undefined); // an event may have been lost
    if (err.code === 'ENOENT') return; // gone meanwhile: the next event or read tells
    const repeats = this.errors.admit(err.code ?? err.message);
    if (repeats === undefined) return;
    const more = repeats > 0 ? ` (and ${repeats} more ${err.code ?? 'such'} errors since the last one logged)` : '';
    this.opts.logger.warn({ err, path }, `watching ${path}: ${err.message}; changes there are read at the next full sync${more}`);
  }

  /**
   * An event of a watched folder about its entry `name` (see the module
   * comment). A manifest file is reported at once, so that the debounce
   * counts from the event itself; an entry created, removed or renamed, and
   * any other entry, is then looked at, to tell a folder or a symlink.
   */
  private onFolderEvent(folder: string, event: string, name: string | null): void {
    if (this.closed) return;
    if (name === null) {
      this.notify(undefined);
      return;
    }
    const path = join(folder, name);
    if (this.target !== undefined) {
      if (path === this.target) this.notify(path);
      return;
    }
    this.opts.logger.debug({ event, path }, `manifest folder event ${event}: ${path}`);
    const manifest = isManifestFileName(name);
    if (manifest) this.notify(path);
    if (event === 'rename' || !manifest) void this.lookAt(folder, name);
  }

  /** What the entry `name` of `folder` is now: a folder (or one gone, or the watched folder itself) makes everything read again. */
  private async lookAt(folder: string, name: string): Promise<void> {
    const path = join(folder, name);
    const st = await stat(path).catch(() => undefined);
    if (this.closed) return;
    if (st === undefined) {
      // Gone: a watched folder, or the watched folder itself (its own name).
      if (this.watches.has(path) || (folder === this.root && name === basename(folder))) {
        this.notify(undefined);
        void this.refresh();
      }
    } else if (st.isDirectory()) {
      this.notify(undefined);
      if (!isIgnoredName(name)) void this.refresh();
    } else if (isManifestFileName(name) && !this.watches.has(path) && lstatSync(path, { throwIfNoEntry: false })?.isSymbolicLink()) {
      void this.refresh(); // a new symlinked file: watch its target
    }
  }

  /** An event of a symlinked manifest file's target. */
  private onLinkEvent(link: string): void {
    this.notify(link);
    void this.refresh(); // the target may have been replaced: watch the new one
  }
}

/** The watch set of a single file: its folder, and the file itself when it is a symlink. */
async function singleFileSet(root: string, target: string): Promise<WatchSet> {
  const isLink = lstatSync(target, { throwIfNoEntry: false })?.isSymbolicLink() ?? false;
  return { folders: new Set([root]), links: new Set(isLink ? [target] : []) };
}

/** The watch set of a folder: it, its subfolders (see the module comment) and its symlinked manifest files. */
async function folderSet(root: string): Promise<WatchSet> {
  const out: WatchSet = { folders: new Set(), links: new Set() };
  const realRoot = await realpath(root).catch(() => root);
  const visited = new Set<string>();
  const walk = async (folder: string, depth: number): Promise<void> => {
    const real = await realpath(folder).catch(() => undefined);
    if (real === undefined || visited.has(real)) return;
    visited.add(real);
    out.folders.add(folder);
    const entries = await readdir(folder, { withFileTypes: true }).catch(() => []);
    for (const e of entries) {
      if (isIgnoredName(e.name)) continue;
      const path = join(folder, e.name);
      if (e.isDirectory()) {
        if (depth < MAX_WATCH_DEPTH) await walk(path, depth + 1);
      } else if (e.isSymbolicLink()) {
        const st = await stat(path).catch(() => undefined);
        if (st?.isDirectory() && depth < MAX_WATCH_DEPTH && !isAliasedFolder(path, realRoot)) await walk(path, depth + 1);
        else if (st?.isFile() && isManifestFileName(e.name)) out.links.add(path);
      }
    }
  };
  await walk(root, 0);
  return out;
}

/** True when `path` is `dir` or inside it. */
function within(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith(sep) ? dir : dir + sep);
}

/**
 * True for a symlink to a folder inside `realRoot` (watched already through
 * its real path) or to an ancestor of the link itself (a loop). Anything
 * that cannot be examined (gone, dangling) is not an alias.
 */
function isAliasedFolder(path: string, realRoot: string): boolean {
  try {
    if (!lstatSync(path).isSymbolicLink()) return false;
    const real = realpathSync(path);
    if (!statSync(real).isDirectory()) return false;
    return within(real, realRoot) || within(realpathSync(dirname(path)), real);
  } catch {
    return false;
  }
}

/** The {@link FolderId} of the folder at `path`, or undefined when there is none. */
async function folderId(path: string): Promise<FolderId | undefined> {
  const st = await stat(path, { bigint: true }).catch(() => undefined);
  return st?.isDirectory() ? { dev: st.dev, ino: st.ino, birthtimeNs: st.birthtimeNs } : undefined;
}

/**
 * Lets one message per key through per interval. {@link admit} returns
 * undefined to drop a message, else how many of that key were dropped since
 * the last one let through.
 */
export class ErrorLogLimit {
  private readonly last = new Map<string, { at: number; dropped: number }>();
  private readonly intervalMs: number;
  private readonly now: () => number;

  constructor(intervalMs: number, now: () => number = Date.now) {
    this.intervalMs = intervalMs;
    this.now = now;
  }

  /** Decide about one message of `key`; see the class comment. */
  admit(key: string): number | undefined {
    const t = this.now();
    const seen = this.last.get(key);
    if (seen !== undefined && t - seen.at < this.intervalMs) {
      seen.dropped++;
      return undefined;
    }
    this.last.set(key, { at: t, dropped: 0 });
    return seen?.dropped ?? 0;
  }
}
