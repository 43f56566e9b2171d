/**
 * The link rule of the file source: a manifest folder never leads drover
 * out of itself. Every symlink met in the folder (to a file or to a folder)
 * is resolved to its real path (realpath(3)) and judged against the real
 * path of the source folder (the root):
 *
 *   - a target inside the root is followed;
 *   - the root itself, or one of its parent folders (`ln -s .. up`,
 *     `ln -s / all`), is never followed: it would read the source again,
 *     and with it every folder beside it;
 *   - a target outside the root is followed only when external links are
 *     allowed (`--file-follow-external-links`).
 *
 * A link that is not followed is skipped: nothing under it is read or
 * watched. The file source names each such link in one warning
 * ({@link skippedLinkWarning}).
 */
import { lstat, realpath } from 'node:fs/promises';
import { sep } from 'node:path';
import { ManifestError } from '../model/errors.ts';

/** Which symlinks a folder walk follows: only those into the root (the default), or also those out of it. */
export type LinkPolicy = 'inside' | 'external';

/** Why a symlink is not followed: it leads to the root or one of its parents (`loop`), or out of the root (`outside`). */
export type SkipReason = 'loop' | 'outside';

/** A symlink the walk did not follow: its path as named, its real target, and why. */
export interface SkippedLink {
  readonly path: string;
  readonly target: string;
  readonly reason: SkipReason;
}

/** True when the real path `path` is `folder` or lies below it (both real, absolute paths). */
export function isWithin(path: string, folder: string): boolean {
  return path === folder || path.startsWith(folder.endsWith(sep) ? folder : folder + sep);
}

/**
 * Whether a symlink whose real target is `target` may be followed from the
 * root whose real path is `root` under `policy`: undefined when it may,
 * else the reason it is skipped (see the module comment). Both paths are
 * absolute real paths.
 */
export function linkVerdict(target: string, root: string, policy: LinkPolicy): SkipReason | undefined {
  if (isWithin(root, target)) return 'loop';
  if (isWithin(target, root)) return undefined;
  return policy === 'external' ? undefined : 'outside';
}

/**
 * True when one of `paths` (files named inside the folder `root`) is a
 * symlink that a walk of `root` under `policy` would not follow; a path
 * that is gone, or a root that is not a folder, gives false for it. For a
 * watcher's events: a file read on its own must not bypass the walk's rule.
 */
export async function anySkippedLink(paths: readonly string[], root: string, policy: LinkPolicy): Promise<boolean> {
  const rootReal = await realpath(root).catch(() => undefined);
  if (rootReal === undefined) return false;
  for (const path of paths) {
    if ((await lstat(path).catch(() => undefined))?.isSymbolicLink() !== true) continue;
    const target = await realpath(path).catch(() => undefined);
    if (target !== undefined && linkVerdict(target, rootReal, policy) !== undefined) return true;
  }
  return false;
}

/**
 * The one warning for a skipped link, naming the link (as the file source
 * names its files), where it leads and why it is not followed, e.g.
 * `manifests/up: symlink to /srv (the source folder or one of its parent folders) is not followed: it would read the source folder again`.
 */
export function skippedLinkWarning(link: SkippedLink): ManifestError {
  const detail =
    link.reason === 'loop'
      ? `symlink to ${JSON.stringify(link.target)} (the source folder or one of its parent folders) is not followed: it would read the source folder again`
      : `symlink to ${JSON.stringify(link.target)}, outside the source folder, is not followed (--file-follow-external-links allows it)`;
  return new ManifestError({ file: link.path, detail });
}
