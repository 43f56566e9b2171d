/**
 * Reading manifest files: a file or a folder of `.json`, `.yaml`, `.yml`
 * files (recursively, sorted by path; dotfiles, dot-folders and editor
 * temp files skipped), each holding one object, a List (`kind: List` or any
 * `*List` with `items`, as `kubectl get -o yaml` prints) or several YAML
 * documents. A `.json` file is read with JSON.parse, which is about a
 * hundred times faster than the YAML parser and builds no syntax tree; when
 * it fails, the file is read again with the YAML parser (YAML 1.2 is a
 * superset of JSON), so that a syntax error carries the same line, column
 * and message as in a YAML file, and a YAML document saved as `.json` is
 * still read. One difference follows: a key repeated in one JSON object is
 * not an error, the last one wins, as with JSON.parse and Go's
 * encoding/json.
 *
 * Only syntax is checked here; what the objects mean is parse.ts's job.
 * One shape is a syntax error too: a document that is a mapping with an
 * `items` list and no `kind` is a List cut short before its `kind` line
 * (`kubectl get -o yaml` prints `kind: List` after the items), and is
 * skipped with an error rather than read as one object.
 *
 * With {@link SettleOptions}, a file still being written is not read: one
 * whose content or attributes changed (its mtime or ctime) less than the
 * settle time ago, or that changed while it was read, is reported as
 * unsettled ({@link Unsettled}) instead of parsed half-written.
 *
 * A file larger than {@link MAX_MANIFEST_FILE_BYTES} is skipped with an
 * error before it is read. With a {@link ManifestCache}, a file whose
 * device, inode, size, mtime and ctime have not changed since it was last
 * read is not read or parsed again: a folder scan stats each file once and
 * opens only those whose stat changed. {@link rereadManifestFiles} reads
 * given files again, for a watcher's events.
 *
 * With a {@link Decode} function, each object is turned into what the
 * caller keeps (the file source keeps its validation result, not the raw
 * object) before it is returned or cached, and comes with a digest of its
 * text, so that the caller can tell which objects of a changed file are
 * unchanged (see {@link Decode}).
 */
import * as crypto from 'node:crypto';
import { constants, type BigIntStats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { open, stat } from 'node:fs/promises';
import { extname } from 'node:path';
import { LineCounter, parseAllDocuments } from 'yaml';
import { ManifestError } from '../model/errors.ts';
import type { ManifestObject } from '../model/parsed.ts';
import { ManifestCache, type FileRead } from './cache.ts';
import type { LinkPolicy, SkippedLink } from './links.ts';
import { inBatches, walkManifestTree, type TreeFile } from './tree.ts';

export type { ManifestObject };
export { ManifestCache };

/**
 * Outcome of {@link readManifests}: objects in file then position order; one
 * error per unreadable file or skipped document. Every error marks a part of
 * the source that could not be read, so the objects are then an incomplete
 * view of it.
 */
export interface ReadResult<T = ManifestObject> {
  readonly objects: T[];
  readonly errors: ManifestError[];
  /** Every file that was read (including empty ones, skipped ones and unsettled ones), sorted; not those that vanished meanwhile. */
  readonly files: string[];
  /** The files not read because they were still changing (only with {@link ReadOptions.settle}), in `files` order. */
  readonly unsettled: Unsettled[];
  /** The symlinks of the folder that were not followed (links.ts), sorted by path. */
  readonly skippedLinks: SkippedLink[];
}

/**
 * When a file counts as still being written ({@link ReadOptions.settle}):
 * when it changed less than `ms` ago, unless `exempt` says it is complete
 * (a file renamed into place).
 */
export interface SettleOptions {
  /** The settle time, in milliseconds: how long a file's mtime and ctime must be in the past before it is read. */
  readonly ms: number;
  /** True for a file read whatever its times say. */
  readonly exempt?: (file: string) => boolean;
  /** Milliseconds since the epoch (for tests). */
  readonly now?: () => number;
}

/** A file left unread because it was still changing: when it last changed (the later of its mtime and ctime, ms since the epoch). */
export interface Unsettled {
  readonly file: string;
  readonly changedAt: number;
}

/**
 * Turns one object read into what {@link readManifests} returns and a
 * {@link ManifestCache} keeps, so that the raw object can be dropped at
 * once. `digest` (a base64 SHA-1) identifies the object's text: of a JSON
 * file, the object re-serialised by JSON.stringify (which gives back
 * exactly what JSON.parse read); of a YAML document, the document's text
 * and the object's position in it. Two objects with the same file, index
 * and digest are the same object. Must not throw.
 */
export type Decode<T> = (o: ManifestObject, digest: string) => T;

/** Options of {@link readManifests}. */
export interface ReadOptions<T = ManifestObject> {
  /** Remembers what unchanged files held; entries of files no longer found are dropped. */
  readonly cache?: ManifestCache<T>;
  /** Largest file read, in bytes (default {@link MAX_MANIFEST_FILE_BYTES}). */
  readonly maxFileBytes?: number;
  /** What to keep of each object instead of the object itself (see {@link Decode}); digests are computed only with it. */
  readonly decode?: Decode<T>;
  /** Leave files still being written unread (see {@link SettleOptions}); absent: every file is read as it is. */
  readonly settle?: SettleOptions;
  /** Which symlinks of a folder are followed (links.ts; default `inside`). */
  readonly links?: LinkPolicy;
}

/** Default size limit of one manifest file: 32 MiB. A larger file is skipped with an error, unread. */
export const MAX_MANIFEST_FILE_BYTES = 32 * 1024 * 1024;

const MiB = 1024 * 1024;

export { isIgnoredName, isManifestFileName, MANIFEST_EXTENSIONS } from './names.ts';

/**
 * Read every manifest object under `path` (a file, read whatever its
 * extension, or a folder). Throws Error when `path` does not exist or is
 * neither a file nor a folder; every problem with a single file (syntax,
 * unreadable, too large) becomes a ManifestError naming it, and that file's
 * objects (or only the document with a syntax error, see
 * {@link parseManifestText}) are skipped while the other files are still read.
 */
export async function readManifests(path: string, opts?: ReadOptions): Promise<ReadResult>;
export async function readManifests<T>(path: string, opts: ReadOptions<T> & { readonly decode: Decode<T> }): Promise<ReadResult<T>>;
export async function readManifests<T>(path: string, opts: ReadOptions<T> = {}): Promise<ReadResult<T>> {
  const st = await stat(path).catch((e: NodeJS.ErrnoException) => {
    throw new Error(e.code === 'ENOENT' ? `manifest path not found: ${path}` : `cannot read manifest path ${path}: ${e.message}`);
  });
  if (!st.isFile() && !st.isDirectory()) throw new Error(`manifest path ${path} is neither a file nor a folder`);
  // A folder's listing brings each file's stat, so that an unchanged file is taken from the cache without being opened.
  const tree = st.isFile() ? undefined : await walkManifestTree(path, { statFiles: true, links: opts.links ?? 'inside' });
  const listed: TreeFile[] = tree?.files ?? [{ path, link: false }];
  const objects: T[] = [];
  const errors: ManifestError[] = [];
  const files: string[] = [];
  const unsettled: Unsettled[] = [];
  // A few files at a time, so that a folder of many small files is not one round trip to the thread pool after another.
  const reads = await inBatches(listed, READ_CONCURRENCY, (f) => readManifestFile(f.path, opts, f.stat));
  for (const [i, { path: file }] of listed.entries()) {
    const r = reads[i];
    if (r === undefined) continue;
    files.push(file);
    if (isUnsettled(r)) {
      unsettled.push(r);
      continue;
    }
    for (const o of r.objects) objects.push(o);
    for (const e of r.errors) errors.push(e);
  }
  opts.cache?.retain(files);
  return { objects, errors, files, unsettled, skippedLinks: tree?.skippedLinks ?? [] };
}

/** True when `r` is a file left unread because it was still changing. */
export function isUnsettled<T>(r: FileRead<T> | Unsettled): r is Unsettled {
  return 'changedAt' in r;
}

/** How many files {@link readManifests} reads at once. */
const READ_CONCURRENCY = 32;

/**
 * Read these manifest files again, whatever the cache says (a watcher
 * reported them changed), and put what they hold now into `opts.cache`.
 * Each path maps to its objects and errors as {@link readManifests} would
 * give them, or to undefined when the file is gone (its cache entry is then
 * dropped), or, with `opts.settle`, to an {@link Unsettled} when it is still
 * changing. Paths are read as files whatever their names; the caller passes
 * only paths a folder scan would read. Never throws.
 */
export async function rereadManifestFiles<T>(paths: readonly string[], opts: ReadOptions<T> & { readonly decode: Decode<T> }): Promise<Map<string, FileRead<T> | Unsettled | undefined>> {
  const reads = await inBatches(paths, READ_CONCURRENCY, (file) => readManifestFile(file, { ...opts, cache: undefined }));
  const out = new Map<string, FileRead<T> | Unsettled | undefined>();
  for (const [i, file] of paths.entries()) {
    const r = reads[i];
    out.set(file, r);
    if (r === undefined) opts.cache?.forget(file);
  }
  return out;
}

/**
 * Read and syntax-check one file, or take it from `opts.cache` when
 * unchanged. A vanished file (ENOENT) yields undefined: it is simply gone.
 * With `opts.settle`, a file still changing yields an {@link Unsettled}.
 */
async function readManifestFile<T>(file: string, opts: ReadOptions<T>, listed?: BigIntStats): Promise<FileRead<T> | Unsettled | undefined> {
  const { cache, decode, settle } = opts;
  const maxBytes = opts.maxFileBytes ?? MAX_MANIFEST_FILE_BYTES;
  // The stat of the folder scan finds an unchanged file without opening it (a cache entry is never one of a racily written file, see cache.ts).
  const unchanged = listed !== undefined && listed.size <= BigInt(maxBytes) ? cache?.get(file, listed) : undefined;
  if (unchanged) return unchanged;
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
    const settling = settle !== undefined && settle.exempt?.(file) !== true ? settle : undefined;
    if (settling !== undefined) {
      const changedAt = changedAtOf(st);
      if ((settling.now ?? Date.now)() - changedAt < settling.ms) return { file, changedAt };
    }
    const text = await fh.readFile('utf8');
    if (settling !== undefined) {
      // Written to while it was read: what was read may be half of it.
      const after = await fh.stat({ bigint: true });
      if (after.size !== st.size || after.mtimeNs !== st.mtimeNs || after.ctimeNs !== st.ctimeNs) return { file, changedAt: changedAtOf(after) };
    }
    const read = (extname(file).toLowerCase() === '.json' ? parseJSONText(file, text, decode) : undefined) ?? parseManifestText(file, text, decode);
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

/** When a file last changed, by its stat: the later of its mtime and ctime (ctime also moves when a tool sets the mtime back after writing), ms since the epoch. */
function changedAtOf(st: BigIntStats): number {
  return Math.max(Number(st.mtimeMs), Number(st.ctimeMs));
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
function parseManifestText<T>(file: string, text: string, decode: Decode<T> | undefined): FileRead<T> {
  const lineCounter = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter, prettyErrors: false });
  const list = Array.isArray(docs) ? docs : [];
  const raws: unknown[] = [];
  /** The digest of each entry of `raws`: its document's text and its position in it (only with `decode`). */
  const digests: string[] = [];
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
      digests.push('');
      continue;
    }
    try {
      const from = raws.length;
      flattenLists(doc.toJS({ maxAliasCount: 100 }), raws);
      if (decode !== undefined) {
        const docDigest = digestOf(text.slice(doc.range[0], doc.range[2]));
        for (let k = from; k < raws.length; k++) digests.push(`${docDigest}#${k - from}`);
      }
    } catch (e) {
      // toJS fails on alias bombs (maxAliasCount) and similar structural problems.
      const whole = list.length === 1;
      const error = new ManifestError({ file, detail: `${docName}${(e as Error).message}; ${whole ? 'file' : 'document'} skipped` });
      if (whole) return { objects: [], errors: [error] };
      errors.push(error);
      raws.push(SKIPPED);
      digests.push('');
    }
  }
  return { objects: fileObjects(file, raws, decode, (i) => digests[i]!), errors };
}

/**
 * Read `text` as JSON (one document; a List is flattened), or undefined
 * when it is not JSON (the caller reads it as YAML then, for the error
 * message, see the module comment).
 */
function parseJSONText<T>(file: string, text: string, decode: Decode<T> | undefined): FileRead<T> | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return undefined;
  }
  const raws: unknown[] = [];
  try {
    flattenLists(doc, raws);
  } catch (e) {
    return { objects: [], errors: [new ManifestError({ file, detail: `${(e as Error).message}; file skipped` })] };
  }
  doc = undefined; // so that each raw object is garbage once decoded (fileObjects)
  return { objects: fileObjects(file, raws, decode, (i) => digestOf(JSON.stringify(raws[i]))), errors: [] };
}

/** The objects of `file` from its flattened documents (skipped ones keep their position), through `decode` when given. */
function fileObjects<T>(file: string, raws: unknown[], decode: Decode<T> | undefined, digest: (index: number) => string): T[] {
  const objects: T[] = [];
  for (let index = 0; index < raws.length; index++) {
    const raw = raws[index];
    if (raw === SKIPPED) continue;
    const o: ManifestObject = { file, index, raw };
    objects.push(decode === undefined ? (o as T) : decode(o, digest(index)));
    raws[index] = undefined; // the raw object is garbage once decoded
  }
  return objects;
}

/** One-shot hashing (Node.js 20.12 and later): several times faster than createHash for short texts. */
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'base64') => string }).hash;

/** Base64 SHA-1 of `text`: identifies a text, not a secret. */
function digestOf(text: string): string {
  return oneShot !== undefined ? oneShot('sha1', text, 'base64') : crypto.createHash('sha1').update(text).digest('base64');
}

/** Stands for a skipped document among the objects of a file, so that the positions after it do not move. */
const SKIPPED = Symbol('skipped document');

/**
 * Append the objects of one document to `out`: itself, or the items of a
 * List (kind "List" or any kind ending in "List" that has `items`),
 * recursively. Empty documents (null) give nothing. Never spreads an array
 * into arguments, so a List of any length is fine.
 * @throws Error when the document (`top`) is a mapping with an `items`
 *   list and no `kind`: a List cut short before its `kind` line.
 */
function flattenLists(doc: unknown, out: unknown[], top = true): void {
  if (doc === null || doc === undefined) return;
  if (typeof doc === 'object' && !Array.isArray(doc)) {
    const { kind, items } = doc as { kind?: unknown; items?: unknown };
    if (top && kind === undefined && Array.isArray(items)) {
      throw new Error(`has items but no kind: a List cut short before its kind line (kubectl prints "kind: List" after the items), or written without it`);
    }
    if (typeof kind === 'string' && kind.endsWith('List') && (Array.isArray(items) || items === null || items === undefined)) {
      for (const item of (items ?? []) as unknown[]) flattenLists(item, out, false);
      return;
    }
  }
  out.push(doc);
}
