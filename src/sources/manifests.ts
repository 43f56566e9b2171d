/**
 * Reading manifest files: a file or a folder of `.json`, `.yaml`, `.yml`
 * files (recursively, sorted by path; dotfiles, dot-folders and editor
 * temp files skipped), each holding one object, a List (`kind: List` or any
 * `*List` with `items`, as `kubectl get -o yaml` prints) or several YAML
 * documents. JSON is read with the YAML parser (YAML 1.2 is a superset of
 * JSON), so syntax errors carry a line and column either way.
 *
 * Only syntax is checked here; what the objects mean is parse.ts's job.
 */
import { readdir, readFile, realpath, stat } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { LineCounter, parseAllDocuments } from 'yaml';
import { ManifestError } from '../model/errors.ts';
import type { ManifestObject } from '../model/parsed.ts';
import { compareStrings } from '../model/order.ts';

export type { ManifestObject };

/** Outcome of {@link readManifests}: objects in file then position order; one error per unreadable file. */
export interface ReadResult {
  readonly objects: ManifestObject[];
  readonly errors: ManifestError[];
  /** Every file that was read (including empty ones), sorted. */
  readonly files: string[];
}

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

/**
 * Read every manifest object under `path` (a file, read whatever its
 * extension, or a folder). Throws Error when `path` does not exist or is
 * neither a file nor a folder; every problem with a single file (syntax,
 * unreadable) becomes a ManifestError naming it, and that file's objects are
 * skipped while the other files are still read.
 */
export async function readManifests(path: string): Promise<ReadResult> {
  const st = await stat(path).catch((e: NodeJS.ErrnoException) => {
    throw new Error(e.code === 'ENOENT' ? `manifest path not found: ${path}` : `cannot read manifest path ${path}: ${e.message}`);
  });
  if (!st.isFile() && !st.isDirectory()) throw new Error(`manifest path ${path} is neither a file nor a folder`);
  const files = st.isFile() ? [path] : (await listManifestFiles(path)).sort(compareStrings);
  const objects: ManifestObject[] = [];
  const errors: ManifestError[] = [];
  for (const file of files) {
    const r = await readManifestFile(file);
    objects.push(...r.objects);
    errors.push(...r.errors);
  }
  return { objects, errors, files };
}

/** Manifest files under `dir` (recursive, symlinks followed, each real folder visited once). */
async function listManifestFiles(dir: string, visited = new Set<string>()): Promise<string[]> {
  const real = await realpath(dir);
  if (visited.has(real)) return [];
  visited.add(real);
  const out: string[] = [];
  for (const name of await readdir(dir)) {
    if (isIgnoredName(name)) continue;
    const full = join(dir, name);
    const st = await stat(full).catch(() => undefined); // vanished or dangling symlink: skip
    if (st?.isDirectory()) out.push(...(await listManifestFiles(full, visited)));
    else if (st?.isFile() && isManifestFileName(name)) out.push(full);
  }
  return out;
}

/** Read and syntax-check one file. A vanished file (ENOENT) yields nothing: it is simply gone. */
async function readManifestFile(file: string): Promise<{ objects: ManifestObject[]; errors: ManifestError[] }> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'ENOENT') return { objects: [], errors: [] };
    return { objects: [], errors: [new ManifestError({ file, detail: `cannot read file: ${err.message}` })] };
  }
  const lineCounter = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter, prettyErrors: false });
  const list = Array.isArray(docs) ? docs : [];
  for (const doc of list) {
    const first = doc.errors[0];
    if (first) {
      const pos = lineCounter.linePos(first.pos[0]);
      return {
        objects: [],
        errors: [new ManifestError({ file, line: pos.line, column: pos.col, detail: `syntax error: ${first.message}; file skipped` })],
      };
    }
  }
  const raws: unknown[] = [];
  try {
    for (const doc of list) raws.push(...flattenLists(doc.toJS({ maxAliasCount: 100 })));
  } catch (e) {
    // toJS fails on alias bombs (maxAliasCount) and similar structural problems.
    return { objects: [], errors: [new ManifestError({ file, detail: `${(e as Error).message}; file skipped` })] };
  }
  return { objects: raws.map((raw, index) => ({ file, index, raw })), errors: [] };
}

/**
 * The objects of one document: itself, or the items of a List (kind "List"
 * or any kind ending in "List" that has `items`), recursively. Empty
 * documents (null) give nothing.
 */
function flattenLists(doc: unknown): unknown[] {
  if (doc === null || doc === undefined) return [];
  if (typeof doc === 'object' && !Array.isArray(doc)) {
    const { kind, items } = doc as { kind?: unknown; items?: unknown };
    if (typeof kind === 'string' && kind.endsWith('List') && (Array.isArray(items) || items === null || items === undefined)) {
      return (items ?? []).flatMap(flattenLists);
    }
  }
  return [doc];
}
