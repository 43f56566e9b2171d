/**
 * Reading manifest files: a file or a folder of `.json`, `.yaml`, `.yml`
 * files (recursively, sorted by path; dotfiles, dot-folders and editor
 * temp files skipped), each holding one object, a List (`kind: List` or any
 * `*List` with `items`, as `kubectl get -o yaml` prints) or several YAML
 * documents. JSON is read with the YAML parser (YAML 1.2 is a superset of
 * JSON), so syntax errors carry a line and column either way.
 *
 * Only syntax is checked here; what the objects mean is parse.ts's job.
 *
 * A file larger than {@link MAX_MANIFEST_FILE_BYTES} is skipped with an
 * error before it is read. With a {@link ManifestCache}, a file whose
 * device, inode, size, mtime and ctime have not changed since it was last
 * read is not read or parsed again.
 */
import { constants } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { open, readdir, realpath, stat } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { LineCounter, parseAllDocuments } from 'yaml';
import { ManifestError } from '../model/errors.ts';
import type { ManifestObject } from '../model/parsed.ts';
import { compareStrings } from '../model/order.ts';
import { ManifestCache, type FileRead } from './cache.ts';

export type { ManifestObject };
export { ManifestCache };

/**
 * Outcome of {@link readManifests}: objects in file then position order; one
 * error per unreadable file or skipped document. Every error marks a part of
 * the source that could not be read, so the objects are then an incomplete
 * view of it.
 */
export interface ReadResult {
  readonly objects: ManifestObject[];
  readonly errors: ManifestError[];
  /** Every file that was read (including empty ones and skipped ones), sorted; not those that vanished meanwhile. */
  readonly files: string[];
}

/** Options of {@link readManifests}. */
export interface ReadOptions {
  /** Remembers what unchanged files held; entries of files no longer found are dropped. */
  readonly cache?: ManifestCache;
  /** Largest file read, in bytes (default {@link MAX_MANIFEST_FILE_BYTES}). */
  readonly maxFileBytes?: number;
}

/** Default size limit of one manifest file: 32 MiB. A larger file is skipped with an error, unread. */
export const MAX_MANIFEST_FILE_BYTES = 32 * 1024 * 1024;

const MiB = 1024 * 1024;

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
 * unreadable, too large) becomes a ManifestError naming it, and that file's
 * objects (or only the document with a syntax error, see
 * {@link parseManifestText}) are skipped while the other files are still read.
 */
export async function readManifests(path: string, opts: ReadOptions = {}): Promise<ReadResult> {
  const st = await stat(path).catch((e: NodeJS.ErrnoException) => {
    throw new Error(e.code === 'ENOENT' ? `manifest path not found: ${path}` : `cannot read manifest path ${path}: ${e.message}`);
  });
  if (!st.isFile() && !st.isDirectory()) throw new Error(`manifest path ${path} is neither a file nor a folder`);
  const listed = st.isFile() ? [path] : (await listManifestFiles(path)).sort(compareStrings);
  const objects: ManifestObject[] = [];
  const errors: ManifestError[] = [];
  const files: string[] = [];
  for (const file of listed) {
    const r = await readManifestFile(file, opts.cache, opts.maxFileBytes ?? MAX_MANIFEST_FILE_BYTES);
    if (r === undefined) continue;
    files.push(file);
    for (const o of r.objects) objects.push(o);
    for (const e of r.errors) errors.push(e);
  }
  opts.cache?.retain(files);
  return { objects, errors, files };
}

/** Manifest files under `dir` (recursive, symlinks followed, each real folder visited once), appended to `out`. */
async function listManifestFiles(dir: string, visited = new Set<string>(), out: string[] = []): Promise<string[]> {
  const real = await realpath(dir);
  if (visited.has(real)) return out;
  visited.add(real);
  for (const name of await readdir(dir)) {
    if (isIgnoredName(name)) continue;
    const full = join(dir, name);
    const st = await stat(full).catch(() => undefined); // vanished or dangling symlink: skip
    if (st?.isDirectory()) await listManifestFiles(full, visited, out);
    else if (st?.isFile() && isManifestFileName(name)) out.push(full);
  }
  return out;
}

/**
 * Read and syntax-check one file, or take it from `cache` when unchanged.
 * A vanished file (ENOENT) yields undefined: it is simply gone.
 */
async function readManifestFile(file: string, cache: ManifestCache | undefined, maxBytes: number): Promise<FileRead | undefined> {
  let fh: FileHandle | undefined;
  try {
    // Non-blocking, so that a FIFO put in a file's place cannot hang the read.
    fh = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
    // Stat and read the same open file: if it changes after the stat, the
    // content read is newer than the stamp, and the next stat differs.
    const st = await fh.stat({ bigint: true });
    if (!st.isFile()) return { objects: [], errors: [new ManifestError({ file, detail: 'not a regular file; file skipped' })] };
    if (st.size > BigInt(maxBytes)) {
      const size = Math.ceil((Number(st.size) / MiB) * 10) / 10;
      return { objects: [], errors: [new ManifestError({ file, detail: `file is ${size} MiB, larger than the ${maxBytes / MiB} MiB limit; file skipped` })] };
    }
    const cached = cache?.get(file, st);
    if (cached) return cached;
    const read = parseManifestText(file, await fh.readFile('utf8'));
    cache?.set(file, st, read);
    return read;
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'ENOENT') return undefined;
    return { objects: [], errors: [new ManifestError({ file, detail: `cannot read file: ${err.message}` })] };
  } finally {
    await fh?.close();
  }
}

/** A line that starts a YAML document (`---`) or ends one (`...`) at column 0 (YAML 1.2, 9.1.4). */
const DOCUMENT_MARKER = /^(---|\.\.\.)(\s|$)/;

/**
 * True when the text of a document holds a document marker after its first
 * line: the parser ran over the start of the next document (an unterminated
 * quoted scalar does), so the documents of this file cannot be told apart.
 */
function swallowsMarker(text: string): boolean {
  return text.split(/\r?\n/).slice(1).some((line) => DOCUMENT_MARKER.test(line));
}

/**
 * Syntax-check the text of `file` and split it into objects. A document with
 * a syntax error is skipped with one error naming it, and the other
 * documents are kept, as long as the documents can still be told apart (the
 * yaml library reports errors per document). When they cannot (an error
 * runs over a `---` line) the whole file is skipped. A skipped document
 * takes one position, so the objects after it keep theirs.
 */
function parseManifestText(file: string, text: string): FileRead {
  const lineCounter = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter, prettyErrors: false });
  const list = Array.isArray(docs) ? docs : [];
  const raws: unknown[] = [];
  const errors: ManifestError[] = [];
  for (const [n, doc] of list.entries()) {
    const first = doc.errors[0];
    const docName = list.length > 1 ? `document #${n + 1} (from line ${lineCounter.linePos(doc.range[0]).line}): ` : '';
    if (first) {
      const pos = lineCounter.linePos(first.pos[0]);
      const whole = list.length === 1 || swallowsMarker(text.slice(doc.range[0], doc.range[2]));
      const detail = `${docName}syntax error: ${first.message}; ${whole ? 'file' : 'document'} skipped`;
      const error = new ManifestError({ file, line: pos.line, column: pos.col, detail });
      if (whole) return { objects: [], errors: [error] };
      errors.push(error);
      raws.push(SKIPPED);
      continue;
    }
    try {
      flattenLists(doc.toJS({ maxAliasCount: 100 }), raws);
    } catch (e) {
      // toJS fails on alias bombs (maxAliasCount) and similar structural problems.
      const whole = list.length === 1;
      const error = new ManifestError({ file, detail: `${docName}${(e as Error).message}; ${whole ? 'file' : 'document'} skipped` });
      if (whole) return { objects: [], errors: [error] };
      errors.push(error);
      raws.push(SKIPPED);
    }
  }
  const objects: ManifestObject[] = [];
  raws.forEach((raw, index) => {
    if (raw !== SKIPPED) objects.push({ file, index, raw });
  });
  return { objects, errors };
}

/** Stands for a skipped document among the objects of a file, so that the positions after it do not move. */
const SKIPPED = Symbol('skipped document');

/**
 * Append the objects of one document to `out`: itself, or the items of a
 * List (kind "List" or any kind ending in "List" that has `items`),
 * recursively. Empty documents (null) give nothing. Never spreads an array
 * into arguments, so a List of any length is fine.
 */
function flattenLists(doc: unknown, out: unknown[]): void {
  if (doc === null || doc === undefined) return;
  if (typeof doc === 'object' && !Array.isArray(doc)) {
    const { kind, items } = doc as { kind?: unknown; items?: unknown };
    if (typeof kind === 'string' && kind.endsWith('List') && (Array.isArray(items) || items === null || items === undefined)) {
      for (const item of (items ?? []) as unknown[]) flattenLists(item, out);
      return;
    }
  }
  out.push(doc);
}
