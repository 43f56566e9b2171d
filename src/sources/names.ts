/** Which file names a manifest folder's scan and watch read: the extensions, and the names never read. */
import { extname } from 'node:path';

/** File extensions read from a folder. */
export const MANIFEST_EXTENSIONS: readonly string[] = ['.json', '.yaml', '.yml'];

/**
 * True for a name that is never read from a folder: dotfiles (".x", also
 * editor locks ".#x"), backups ("x~"), vim swap files (".swp", ".swo",
 * ".swx"), emacs autosaves ("#x#").
 */
export function isIgnoredName(name: string): boolean {
  return name.startsWith('.') || name.endsWith('~') || /\.sw[a-p]$|\.swx$/.test(name) || /^#.*#$/.test(name);
}

/** True for a file name a folder scan reads: a manifest extension and not ignored. */
export function isManifestFileName(name: string): boolean {
  return !isIgnoredName(name) && MANIFEST_EXTENSIONS.includes(extname(name).toLowerCase());
}
