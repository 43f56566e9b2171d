/**
 * The walk of a manifest folder that the folder scan (manifests.ts) and the
 * watcher (watch.ts) share, so that both name every file and folder the
 * same way.
 *
 * Entries are taken in name order (order.ts compareStrings); names that are
 * never read (dotfiles, editor files: manifests.ts isIgnoredName) are
 * skipped. Symlinks, to folders and to files, are followed as the link
 * rule of links.ts says: into the root, never to the root or one of its
 * parents (`ln -s . self`, `sub/up -> ..`), and out of the root only with
 * the `external` policy; the others are skipped and listed in
 * {@link Tree.skippedLinks}. Each real folder is visited once, under the
 * first path that reaches it in that order, so a folder reached through a
 * symlink and by its own name is named by the first.
 */
import type { BigIntStats, Dirent } from 'node:fs';
import { readdir, realpath, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { compareStrings } from '../model/order.ts';
import { linkVerdict, type LinkPolicy, type SkippedLink } from './links.ts';
import { isIgnoredName, isManifestFileName } from './names.ts';

/** A folder of the walk: its path as named, and its stat (dev and ino tell it from a folder put in its place). */
export interface TreeFolder {
  readonly path: string;
  readonly stat: BigIntStats;
}

/** A manifest file of the walk: its path as named, whether it is a symlink, and its stat (of the target for a symlink). */
export interface TreeFile {
  readonly path: string;
  readonly link: boolean;
  /** Always for a symlink; for a regular file only with {@link WalkOptions.statFiles}. */
  readonly stat?: BigIntStats;
}

/** Options of {@link walkManifestTree}. */
export interface WalkOptions {
  /** Levels of subfolders entered below the root (default: no limit). */
  readonly maxDepth?: number;
  /** Stat every regular manifest file too (the folder scan compares stats to its cache). */
  readonly statFiles?: boolean;
  /** Which symlinks are followed (links.ts; default `inside`: none out of the root). */
  readonly links?: LinkPolicy;
}

/** What {@link walkManifestTree} found: folders in visiting order, files sorted by path, and the symlinks not followed, sorted by path. */
export interface Tree {
  readonly folders: TreeFolder[];
  readonly files: TreeFile[];
  readonly skippedLinks: SkippedLink[];
}

/** How many entries of one folder are stat'ed at once. */
const STAT_CONCURRENCY = 32;

/**
 * Walk the folder `root` (see the module comment). Throws the error of
 * reading `root` itself (or resolving its real path); a subfolder or entry that vanishes or cannot be
 * read meanwhile is skipped, as is a dangling symlink.
 */
export async function walkManifestTree(root: string, opts: WalkOptions = {}): Promise<Tree> {
  const maxDepth = opts.maxDepth ?? Infinity;
  const policy = opts.links ?? 'inside';
  const out: Tree = { folders: [], files: [], skippedLinks: [] };
  const visited = new Set<string>();
  const rootReal = await realpath(root);
  /** Whether the symlink at `path` may be followed; a dangling one (no real path) is skipped silently. */
  const follow = async (path: string): Promise<boolean> => {
    const target = await realpath(path).catch(() => undefined);
    if (target === undefined) return false;
    const reason = linkVerdict(target, rootReal, policy);
    if (reason !== undefined) out.skippedLinks.push({ path, target, reason });
    return reason === undefined;
  };
  const visit = async (folder: string, depth: number, st: BigIntStats, isRoot: boolean): Promise<void> => {
    const real = isRoot ? rootReal : await realpath(folder).catch(() => undefined);
    if (real === undefined || visited.has(real)) return;
    visited.add(real);
    out.folders.push({ path: folder, stat: st });
    let entries: Dirent[];
    try {
      entries = await readdir(folder, { withFileTypes: true });
    } catch (e) {
      if (isRoot) throw e;
      return;
    }
    const names = entries.filter((e) => !isIgnoredName(e.name)).sort((a, b) => compareStrings(a.name, b.name));
    // A regular file needs a stat only when asked; a symlink or an entry of unknown type always (to tell a folder from a file).
    const needs = (e: Dirent) => (e.isFile() ? opts.statFiles === true && isManifestFileName(e.name) : true);
    const stats = await inBatches(names, STAT_CONCURRENCY, (e) => (needs(e) ? stat(join(folder, e.name), { bigint: true }).catch(() => undefined) : Promise.resolve(undefined)));
    for (const [i, e] of names.entries()) {
      const path = join(folder, e.name);
      const s = stats[i];
      // A link is judged only when it leads to something the walk would take.
      const wanted = s?.isDirectory() === true || (s?.isFile() === true && isManifestFileName(e.name));
      if (e.isSymbolicLink() && wanted && !(await follow(path))) continue;
      if (e.isFile()) {
        if (isManifestFileName(e.name)) out.files.push(s !== undefined ? { path, link: false, stat: s } : { path, link: false });
      } else if (s?.isDirectory()) {
        if (depth < maxDepth) await visit(path, depth + 1, s, false);
      } else if (s?.isFile() && isManifestFileName(e.name)) {
        out.files.push({ path, link: e.isSymbolicLink(), stat: s });
      }
    }
  };
  await visit(root, 0, await stat(root, { bigint: true }), true);
  out.files.sort((a, b) => compareStrings(a.path, b.path));
  out.skippedLinks.sort((a, b) => compareStrings(a.path, b.path));
  return out;
}

/** `fn` of every item, at most `size` at a time, results in the order of `items`. */
export async function inBatches<T, R>(items: readonly T[], size: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += size) {
    for (const r of await Promise.all(items.slice(i, i + size).map(fn))) out.push(r);
  }
  return out;
}
