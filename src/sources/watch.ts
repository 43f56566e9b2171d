/**
 * Watching a manifest file or folder for the file source, with one inotify
 * watch per folder (Node's fs.watch on a folder, which reports every entry
 * of the folder created, changed, renamed or removed), not one per file: at
 * 20,000 files a watch per file costs about 90 MB and 4 s to set up.
 *
 *   - A single file is watched through its folder, so editors that replace
 *     it by renaming still work.
 *   - The folders watched are those the folder scan reads, named as it
 *     names them (tree.ts: symlinks followed by the link rule of links.ts,
 *     so nothing outside the source folder is watched unless external
 *     links are allowed; each real folder once), down to
 *     {@link MAX_WATCH_DEPTH} levels of subfolders. Files
 *     deeper than that are still read (the folder scan has no such limit),
 *     but only seen at a full read. A symlink to a manifest file gets a
 *     watch of its own, on its target.
 *   - A watched folder or link target that was replaced (another device or
 *     inode at the same path) is watched anew whenever the watches are
 *     brought up to date: after a folder event, a link event, and at each
 *     full read ({@link ManifestWatcher.refresh}); a replaced link target
 *     is then reported as a change of the link, a replaced folder as `all`.
 *   - An event names a file: a manifest file is reported by its path, and
 *     among the files `written` when the event says its content or
 *     attributes changed in place (inotify IN_MODIFY or IN_ATTRIB, Node's
 *     `change`): a file only created, renamed into place or removed is not
 *     (the file source applies such a file at once, see file.ts). An
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
import { lstatSync, watch as fsWatch, type BigIntStats, type FSWatcher } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import type { Logger } from '../util/log.ts';
import type { LinkPolicy } from './links.ts';
import { isManifestFileName } from './names.ts';
import { walkManifestTree } from './tree.ts';

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
  /** Which symlinks lead to folders and files that are watched (links.ts; default `inside`). */
  readonly links?: LinkPolicy;
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
  /** Those of `files` that were written in place (a `change` event: IN_MODIFY or IN_ATTRIB), and the symlinked files whose target changed. */
  readonly written: ReadonlySet<string>;
  readonly all: boolean;
}

/** What identifies a folder: device, inode and birth time (0 where the file system does not record it). */
interface FolderId {
  readonly dev: bigint;
  readonly ino: bigint;
  readonly birthtimeNs: bigint;
}

/** What one watch is on: a folder, or the target of a symlinked manifest file, with the device and inode it had. */
interface Watched {
  readonly kind: 'folder' | 'link';
  /** "dev:ino" of the folder or of the link's target. */
  readonly id: string;
}

/** "dev:ino" of a stat. */
const idOf = (st: BigIntStats) => `${st.dev}:${st.ino}`;

/** A running watch of a manifest path; see the module comment. */
export class ManifestWatcher {
  /** The folder watched: the path itself, or the folder of a single file. */
  readonly root: string;
  private readonly id: FolderId | undefined;
  /** The single file watched, or undefined when a folder is. */
  private readonly target: string | undefined;
  private readonly opts: WatcherOptions;
  private readonly errors: ErrorLogLimit;
  /** Folder or symlinked file → its fs.watch, and what it watches. */
  private readonly watches = new Map<string, Watched & { readonly watcher: FSWatcher }>();
  private timer: NodeJS.Timeout | undefined;
  /** The files and the `all` flag of the next `onChange` call. */
  private files = new Set<string>();
  private written = new Set<string>();
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

  /** True when the watched path is a folder (not a single file). */
  get isFolder(): boolean {
    return this.target === undefined;
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
    for (const w of this.watches.values()) w.watcher.close();
    this.watches.clear();
    await this.refreshing;
  }

  /** Report `file` (or everything, for undefined) at the next debounced `onChange`; `written`: it was written in place. */
  private notify(file: string | undefined, written = false): void {
    if (this.closed) return;
    if (file === undefined) this.all = true;
    else this.files.add(file);
    if (file !== undefined && written) this.written.add(file);
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const changes = { files: this.files, written: this.written, all: this.all };
      this.files = new Set();
      this.written = new Set();
      this.all = false;
      this.opts.onChange(changes);
    }, this.opts.debounceMs);
  }

  /**
   * Bring the watches up to date with the folders and symlinked manifest
   * files there are now (see the module comment). Calls made while one runs
   * make one more pass after it. Never rejects.
   */
  refresh(): Promise<void> {
    if (this.refreshing !== undefined) {
      this.refreshAgain = true;
      return this.refreshing;
    }
    const run = async () => {
      do {
        this.refreshAgain = false;
        const want = await this.wanted().catch(() => new Map<string, Watched>());
        if (this.closed) return;
        for (const [path, w] of this.watches) {
          const now = want.get(path);
          if (now !== undefined && now.kind === w.kind && now.id === w.id) continue;
          w.watcher.close();
          this.watches.delete(path);
          if (now === undefined) continue;
          // Replaced: a link's file is another file now; a folder's files may all differ.
          this.notify(now.kind === 'link' ? path : undefined, true);
        }
        for (const [path, w] of want) {
          if (this.watches.has(path)) continue;
          if (w.kind === 'folder') this.watchPath(path, w, (event, name) => this.onFolderEvent(path, event, name));
          else this.watchPath(path, w, () => this.onLinkEvent(path));
        }
      } while (this.refreshAgain && !this.closed);
    };
    this.refreshing = run().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  /** What to watch now: the folders and symlinked manifest files of the root (or the folder of the single file, and the file when it is a symlink). */
  private async wanted(): Promise<Map<string, Watched>> {
    const out = new Map<string, Watched>();
    if (this.target !== undefined) {
      const folder = await stat(this.root, { bigint: true }).catch(() => undefined);
      if (folder?.isDirectory()) out.set(this.root, { kind: 'folder', id: idOf(folder) });
      const target = lstatSync(this.target, { throwIfNoEntry: false })?.isSymbolicLink() ? await stat(this.target, { bigint: true }).catch(() => undefined) : undefined;
      if (target?.isFile()) out.set(this.target, { kind: 'link', id: idOf(target) });
      return out;
    }
    const tree = await walkManifestTree(this.root, { maxDepth: MAX_WATCH_DEPTH, links: this.opts.links ?? 'inside' });
    for (const f of tree.folders) out.set(f.path, { kind: 'folder', id: idOf(f.stat) });
    for (const f of tree.files) if (f.link && f.stat !== undefined) out.set(f.path, { kind: 'link', id: idOf(f.stat) });
    return out;
  }

  /** fs.watch `path`; a watch that cannot start or fails later is logged, and everything is read again. */
  private watchPath(path: string, what: Watched, listener: (event: string, name: string | null) => void): void {
    let watcher: FSWatcher;
    try {
      watcher = fsWatch(path, listener);
    } catch (e) {
      this.failed(path, e as NodeJS.ErrnoException);
      return;
    }
    this.watches.set(path, { ...what, watcher });
    watcher.on('error', (e: NodeJS.ErrnoException) => {
      watcher.close();
      if (this.watches.get(path)?.watcher === watcher) this.watches.delete(path);
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
      if (path === this.target) this.notify(path, event === 'change');
      // A symlinked file may point elsewhere now (a ConfigMap volume swaps its `..data` link): the refresh tells.
      if (this.watches.get(this.target)?.kind === 'link' || path === this.target) void this.refresh();
      return;
    }
    this.opts.logger.debug({ event, path }, `manifest folder event ${event}: ${path}`);
    const manifest = isManifestFileName(name);
    if (manifest) this.notify(path, event === 'change');
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
      void this.refresh(); // a folder added or replaced; or a dotted one such as `..data`, which may move symlinked files' targets
    } else if (isManifestFileName(name) && lstatSync(path, { throwIfNoEntry: false })?.isSymbolicLink()) {
      void this.refresh(); // a symlinked file, new or pointing elsewhere: watch its target
    }
  }

  /** An event of a symlinked manifest file's target. */
  private onLinkEvent(link: string): void {
    this.notify(link, true); // the event's kind is of the target: taken as written in place
    void this.refresh(); // the target may have been replaced: watch the new one
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
