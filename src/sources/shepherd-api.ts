/**
 * Reading a Shepherd API server over HTTP(S): the transport of the Shepherd
 * source (shepherd.ts), apart from decoding.
 *
 * Shepherd (internal/shepherd/apiserver.go) has no watch and no
 * resourceVersion, so a read lists everything:
 *
 *   GET /api/v1/namespaces                 → {"namespaces": ["default", "shop"]}
 *   GET /api/v1/namespaces/{ns}/services   → [Service, ...], or null for none
 *                                            (Go encodes an empty list as null)
 *
 * with `Authorization: Bearer <token>` when a token is given (Shepherd
 * answers 401 without it when its SHEPHERD_API_TOKEN is set). Each request
 * has a timeout, and an answer larger than {@link MAX_ANSWER_BYTES} is
 * not read (a server answering garbage must not take the node's memory;
 * 10,000 Services in one namespace are about 5 MB). A read never throws: a namespace list that fails makes the
 * whole read fail; a service list that fails fails its namespace only.
 * Every failure is a {@link ShepherdApiError} naming the URL.
 */
import { describeOrigin, DroverError, type UrlOrigin } from '../errors.ts';
import { escapeNonPrintable, quote } from '../model/quote.ts';

/** The `--source` scheme prefix of a Shepherd API server: `shepherd+http://HOST:PORT` or `shepherd+https://HOST:PORT`. */
export const SHEPHERD_SCHEME = 'shepherd+';

/**
 * A request to a Shepherd API server that failed, or whose answer is not
 * what Shepherd serves; `origin` is the URL. The message is one printable
 * line, `URL: detail`.
 */
export class ShepherdApiError extends DroverError {
  declare readonly origin: UrlOrigin;
  /** What went wrong, without the URL. */
  readonly detail: string;

  constructor(url: string, detail: string) {
    const origin: UrlOrigin = { type: 'url', url };
    super(`${describeOrigin(origin)}: ${escapeNonPrintable(detail.replace(/\s*[\r\n]+\s*/g, ' '))}`, { origin });
    this.name = 'ShepherdApiError';
    this.detail = detail;
  }

  /** The same error with `note` appended to the detail ("...; note"). */
  withNote(note: string): ShepherdApiError {
    return new ShepherdApiError(this.origin.url, `${this.detail}; ${note}`);
  }
}

/**
 * The base URL of `value`, a `--source` of the form `shepherd+http://HOST:PORT`
 * or `shepherd+https://HOST:PORT` (an optional path prefix is kept; a
 * trailing slash is dropped).
 * @throws DroverError naming the value when it is not such a URL.
 */
export function shepherdBaseURL(value: string): string {
  const bad = (why: string) => new DroverError(`--source ${quote(value, 120)}: ${why} (expected shepherd+http://HOST:PORT or shepherd+https://HOST:PORT)`);
  if (!value.toLowerCase().startsWith(SHEPHERD_SCHEME)) throw bad('not a Shepherd URL');
  let url: URL;
  try {
    url = new URL(value.slice(SHEPHERD_SCHEME.length));
  } catch {
    throw bad('not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw bad(`unsupported scheme ${url.protocol.replace(/:$/, '')}`);
  if (url.username !== '' || url.password !== '') throw bad('credentials in the URL are not supported; set SHEPHERD_API_TOKEN');
  if (url.search !== '' || url.hash !== '') throw bad('a query or fragment is not allowed');
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}

/**
 * Check a bearer token before it is used: an HTTP header value may not hold
 * a control character (CR, LF, NUL, ...) nor one above U+00FF (RFC 9110
 * 5.5), and the HTTP client's error for such a header quotes the whole
 * value, which would put the token in the log and the status file.
 * @throws DroverError naming SHEPHERD_API_TOKEN and the position of the
 * first bad character, never the token.
 */
export function checkShepherdToken(token: string): void {
  const at = [...token].findIndex((c) => {
    const code = c.codePointAt(0)!;
    return code < 0x20 || code === 0x7f || code > 0xff;
  });
  if (at >= 0) throw new DroverError(`SHEPHERD_API_TOKEN: character ${at + 1} cannot be sent in an HTTP header (a control character or one above U+00FF)`);
}

/** Default size limit of one answer: 64 MiB. A larger one is a failed request, not read further. */
export const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

/** How to reach one Shepherd API server. */
export interface ShepherdApiOptions {
  /** Base URL from {@link shepherdBaseURL}, e.g. "http://10.0.0.1:9876". */
  readonly baseURL: string;
  /** Bearer token (SHEPHERD_API_TOKEN); none: no Authorization header. */
  readonly token?: string | undefined;
  /** Longest wait for one whole answer, headers and body, in milliseconds. */
  readonly timeoutMs: number;
  /** Aborts every request in flight (e.g. when the source is closed). */
  readonly signal?: AbortSignal;
  /** Largest answer read, bytes (default {@link MAX_ANSWER_BYTES}). */
  readonly maxBytes?: number;
}

/** One namespace's service list: its URL, and the raw objects (empty for Shepherd's `null`) or why it failed. */
export type NamespaceRead =
  | { readonly url: string; readonly items: readonly unknown[]; readonly error?: undefined }
  | { readonly url: string; readonly error: ShepherdApiError; readonly items?: undefined };

/** One read of the whole server: every namespace's services, or why the namespace list failed. */
export type ShepherdRead =
  | { readonly namespaces: ReadonlyMap<string, NamespaceRead>; readonly error?: undefined }
  | { readonly error: ShepherdApiError; readonly namespaces?: undefined };

/** Read every namespace's services (see the module comment). Never throws. */
export async function readShepherd(opts: ShepherdApiOptions): Promise<ShepherdRead> {
  const listURL = `${opts.baseURL}/api/v1/namespaces`;
  let names: string[];
  try {
    names = namespaceNames(listURL, await getJSON(listURL, opts));
  } catch (err) {
    return { error: asApiError(listURL, err) };
  }
  const reads = await Promise.all(
    names.map(async (ns): Promise<[string, NamespaceRead]> => {
      const url = `${listURL}/${encodeURIComponent(ns)}/services`;
      try {
        return [ns, { url, items: serviceItems(url, await getJSON(url, opts)) }];
      } catch (err) {
        return [ns, { url, error: asApiError(url, err) }];
      }
    }),
  );
  return { namespaces: new Map(reads) };
}

/** The names of `{"namespaces": [...]}`, without duplicates. @throws ShepherdApiError for any other shape. */
function namespaceNames(url: string, body: unknown): string[] {
  const list = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as { namespaces?: unknown }).namespaces : undefined;
  if (list === null) return [];
  if (!Array.isArray(list) || !list.every((n): n is string => typeof n === 'string' && n !== '')) {
    throw new ShepherdApiError(url, 'not a Shepherd namespace list (expected {"namespaces": ["name", ...]})');
  }
  return [...new Set(list)];
}

/** The objects of a service list (`null`: none). @throws ShepherdApiError when it is not a list. */
function serviceItems(url: string, body: unknown): readonly unknown[] {
  if (body === null) return [];
  if (!Array.isArray(body)) throw new ShepherdApiError(url, `not a Shepherd service list (expected a JSON list, got ${body === null ? 'null' : typeof body === 'object' ? 'an object' : typeof body})`);
  return body;
}

/** GET `url` and parse the answer as JSON. @throws ShepherdApiError (or the abort reason, turned into one by the caller). */
async function getJSON(url: string, opts: ShepherdApiOptions): Promise<unknown> {
  const timeout = AbortSignal.timeout(opts.timeoutMs);
  const signal = opts.signal ? AbortSignal.any([timeout, opts.signal]) : timeout;
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (opts.token !== undefined) headers.Authorization = `Bearer ${opts.token}`;
  const maxBytes = opts.maxBytes ?? MAX_ANSWER_BYTES;
  let text: string;
  let res: Response;
  try {
    res = await fetch(url, { headers, signal, redirect: 'error' });
    text = await readText(res, maxBytes);
  } catch (err) {
    if (err === TOO_LARGE) throw new ShepherdApiError(url, `answer larger than ${formatBytes(maxBytes)}; not read`);
    throw new ShepherdApiError(url, timeout.aborted ? `no answer within ${opts.timeoutMs} ms` : describeFetchError(err));
  }
  if (res.status !== 200) {
    const hint = res.status === 401 ? (opts.token === undefined ? '; set SHEPHERD_API_TOKEN' : '; check SHEPHERD_API_TOKEN') : '';
    const body = text.trim().split('\n')[0] ?? '';
    throw new ShepherdApiError(url, `HTTP ${res.status}${body !== '' ? ` ${quote(body, 80)}` : ''}${hint}`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new ShepherdApiError(url, `answer is not JSON: ${(err as Error).message}`);
  }
}

/** Thrown by {@link readText} for an answer over its limit. */
const TOO_LARGE = new Error('answer too large');

/**
 * The body of `res` as UTF-8 text, read up to `maxBytes`.
 * @throws {@link TOO_LARGE} (the body is cancelled) when its Content-Length or what arrives is larger; the stream's error otherwise.
 */
async function readText(res: Response, maxBytes: number): Promise<string> {
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (declared > maxBytes) {
    await res.body?.cancel();
    throw TOO_LARGE;
  }
  const reader = res.body?.getReader();
  if (reader === undefined) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel();
      throw TOO_LARGE;
    }
    chunks.push(value);
  }
  return new TextDecoder().decode(Buffer.concat(chunks));
}

/** `n` bytes as "64 MiB" (or "1000 bytes" below a MiB). */
function formatBytes(n: number): string {
  const MiB = 1024 * 1024;
  return n >= MiB ? `${Math.round((n / MiB) * 10) / 10} MiB` : `${n} bytes`;
}

/** A one-line description of a failed fetch: the system error code when there is one (ECONNREFUSED, ENOTFOUND, ...). */
function describeFetchError(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
  if (cause?.code === 'UND_ERR_SOCKET') return 'the server closed the connection';
  if (typeof cause?.code === 'string') return `cannot connect (${cause.code})`;
  if (typeof cause?.message === 'string') return `request failed: ${cause.message}`;
  return `request failed: ${(err as Error).message}`;
}

/** `err` as a ShepherdApiError for `url`. */
function asApiError(url: string, err: unknown): ShepherdApiError {
  return err instanceof ShepherdApiError ? err : new ShepherdApiError(url, `request failed: ${(err as Error).message}`);
}
