/**
 * Watching a manifest file or folder with chokidar, for the file source.
 *
 *   - A single file is watched through its folder, so editors that replace
 *     it by renaming still work.
 *   - Symlink loops (`ln -s . self`) would make chokidar walk an
 *     ever-growing tree (exponential with two such links). So a symlink to
 *     a folder is not followed when it points inside the watched folder
 *     (that folder is watched already) or to one of its own ancestors (a
 *     loop), and a folder is watched down to {@link MAX_WATCH_DEPTH} levels
 *     of subfolders at most. Files deeper than that are still read (the
 *     folder scan copes with loops), but only seen at a full resync or
 *     after another change.
 *   - Watcher errors are logged at most once per {@link ERROR_LOG_INTERVAL_MS}
 *     per error code, with the number of repeats left out.
 *   - The watched folder is remembered by device, inode and birth time
 *     (a folder deleted and recreated at once often gets the same inode
 *     number back), so that {@link ManifestWatcher.state} can tell when the
 *     folder at the path was deleted and recreated, or swapped
 *     (`mv src src.old; mv new src`): the watcher then still watches the old
 *     one, and must be restarted.
 */
import { lstatSync, realpathSync, statSync } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import { basename, dirname, resolve, sep } from 'node:path';
import { watch as chokidarWatch, type FSWatcher } from 'chokidar';
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
 * the watched folder itself, a watcher error), so that everything must be
 * read again.
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

/** A running chokidar watcher on a manifest path; see the module comment. */
export class ManifestWatcher {
  /** The folder watched: the path itself, or the folder of a single file. */
  readonly root: string;
  private readonly id: FolderId | undefined;
  private readonly watcher: FSWatcher;
  private timer: NodeJS.Timeout | undefined;
  /** The files and the `all` flag of the next `onChange` call. */
  private files = new Set<string>();
  private all = false;

  private constructor(root: string, id: FolderId | undefined, watcher: FSWatcher) {
    this.root = root;
    this.id = id;
    this.watcher = watcher;
  }

  /** Start watching `path`; resolves once the watcher is ready (events before that are not reported). */
  static async start(path: string, opts: WatcherOptions): Promise<ManifestWatcher> {
    const target = resolve(path);
    const isFile = (await stat(target).catch(() => undefined))?.isFile() ?? false;
    const root = isFile ? dirname(target) : target;
    const id = await folderId(root);
    const realRoot = await realpath(root).catch(() => root);
    const relevant = (p: string): boolean => {
      const abs = resolve(p);
      if (isFile) return abs === target;
      return abs === root || (!isIgnoredName(basename(abs)) && !isAliasedFolder(abs, realRoot));
    };
    // No awaitWriteFinish: a file caught half-written is a syntax error, and
    // the file source keeps what the file held until the write's next
    // event, and reads such a file again shortly after (file.ts).
    const watcher = chokidarWatch(root, {
      ignoreInitial: true,
      depth: isFile ? 0 : MAX_WATCH_DEPTH,
      ignored: (p: string) => resolve(p) !== root && !relevant(p),
    });
    const self = new ManifestWatcher(root, id, watcher);
    const notify = (file: string | undefined) => {
      if (file === undefined) self.all = true;
      else self.files.add(file);
      if (self.timer) clearTimeout(self.timer);
      self.timer = setTimeout(() => {
        self.timer = undefined;
        const changes = { files: self.files, all: self.all };
        self.files = new Set();
        self.all = false;
        opts.onChange(changes);
      }, opts.debounceMs);
    };
    watcher.on('all', (event, p) => {
      const isFileEvent = event === 'add' || event === 'change' || event === 'unlink';
      if (isFileEvent && !isFile && !isManifestFileName(basename(p))) return;
      if (!relevant(p)) return;
      opts.logger.debug({ event, path: p }, `manifest ${event}: ${p}`);
      notify(isFileEvent ? resolve(p) : undefined);
    });
    const limit = new ErrorLogLimit(ERROR_LOG_INTERVAL_MS, opts.now);
    watcher.on('error', (e) => {
      notify(undefined); // an event may have been lost
      const err = e as NodeJS.ErrnoException;
      const repeats = limit.admit(err.code ?? err.message);
      if (repeats === undefined) return;
      const more = repeats > 0 ? ` (and ${repeats} more ${err.code ?? 'such'} errors since the last one logged)` : '';
      opts.logger.warn({ err }, `watching ${path}: ${err.message}${more}`);
    });
    await new Promise<void>((ready) => watcher.once('ready', () => ready()));
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
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.watcher.close();
  }
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
