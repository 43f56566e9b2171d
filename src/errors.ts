/**
 * The common base of drover's errors: {@link DroverError}, and {@link Origin},
 * where an input problem came from.
 *
 * Every error class drover throws extends DroverError, so a caller can tell
 * drover's own errors (whose messages are written for the user and safe to
 * print as they are) from anything else with one `instanceof` check.
 *
 * Input-side errors ({@link ManifestError} in model/errors.ts) carry an
 * `origin` (the manifest file and the object's position in it) and a `field`
 * path; kernel-side errors (iptables-restore, ipset, IPVS netlink, ...) have
 * no origin and keep their own properties (command, errno, line, ...).
 */
import { hasNonPrintable, quote } from './model/quote.ts';

/**
 * An object in a manifest file: the file as the user named it, and where in
 * it the object (or the problem) is. Every position is optional: a problem
 * with the whole file has none.
 */
export interface FileOrigin {
  readonly type: 'file';
  /** Manifest file path as the user gave it (joined with the folder), e.g. "examples/bad.yaml". */
  readonly file: string;
  /** Position of the object in its file (0-based, after List flattening). */
  readonly index?: number;
  /** 1-based line in the file, for syntax errors. */
  readonly line?: number;
  /** 1-based column on that line; only meaningful with `line`. */
  readonly column?: number;
}

/**
 * A resource of an HTTP API that drover reads (a Shepherd API server's
 * namespace or service list), named by its URL.
 */
export interface UrlOrigin {
  readonly type: 'url';
  /** The URL requested, e.g. "http://10.0.0.1:9876/api/v1/namespaces/default/services". */
  readonly url: string;
}

/**
 * Where an input problem came from, told apart by `type`: manifest files
 * ({@link FileOrigin}) and HTTP API resources ({@link UrlOrigin}); each
 * further source of objects is one more member of this union, and
 * {@link describeOrigin} describes each.
 */
export type Origin = FileOrigin | UrlOrigin;

/**
 * A {@link FileOrigin} for `file`, with those positions of `at` that are
 * defined (undefined ones are left out, so two origins of the same place
 * compare deep-equal).
 */
export function fileOrigin(file: string, at: { readonly index?: number | undefined; readonly line?: number | undefined; readonly column?: number | undefined } = {}): FileOrigin {
  return {
    type: 'file',
    file,
    ...(at.index !== undefined ? { index: at.index } : {}),
    ...(at.line !== undefined ? { line: at.line } : {}),
    ...(at.column !== undefined ? { column: at.column } : {}),
  };
}

/**
 * The origin as it opens an error message, one printable line:
 * - a file: `file`, `file:line` or `file:line:column` (the column only with a
 *   line), the file name shown by {@link displayFile}. The object's index is
 *   not part of it: the message names the object next (`Kind ns/name`, or
 *   `Kind #n` when it has no readable name);
 * - a URL: the URL, shown as a file name is.
 */
export function describeOrigin(origin: Origin): string {
  switch (origin.type) {
    case 'file': {
      let where = displayFile(origin.file);
      if (origin.line !== undefined) where += `:${origin.line}`;
      if (origin.line !== undefined && origin.column !== undefined) where += `:${origin.column}`;
      return where;
    }
    case 'url':
      return displayFile(origin.url);
  }
}

/** A file name as shown in a message: as is, or JSON-quoted when it holds a non-printable character. */
export function displayFile(file: string): string {
  return hasNonPrintable(file) ? quote(file, Infinity) : file;
}

/** The optional second argument of the {@link DroverError} constructor. */
export interface DroverErrorOptions {
  /** Where the problem came from; left out for problems that are not about an input object. */
  readonly origin?: Origin | undefined;
  /** Field path in the object, e.g. "spec.ports[0].port"; left out (or "") for the object as a whole. */
  readonly field?: string | undefined;
  /** The error this one wraps, as `Error.prototype.cause`. */
  readonly cause?: unknown;
}

/**
 * Base class of every error drover throws. `message` is the whole message,
 * exactly as the subclass built it (DroverError adds no prefix); `name` is
 * the subclass's name. `origin` and `field` say where the problem came from,
 * when it came from an input object.
 */
export class DroverError extends Error {
  /** Where the problem came from (see {@link Origin}); undefined for problems not tied to an input object. */
  readonly origin: Origin | undefined;
  /** Field path in the object ("" or undefined: the object as a whole). */
  readonly field: string | undefined;

  constructor(message: string, options: DroverErrorOptions = {}) {
    super(message, 'cause' in options ? { cause: options.cause } : undefined);
    this.name = 'DroverError';
    this.origin = options.origin;
    this.field = options.field;
  }
}

/**
 * A kernel read-back that a backend gave up past its bound (a full sync
 * marked ChangeSet.deferrable; modes/shared/read-back.ts); nothing was
 * written. Part of the contract between the proxier, which puts such a
 * full sync off, and the modes that throw it.
 */
export class ReadBackTimeoutError extends DroverError {
  constructor(
    /** What was reading, e.g. `iptables-nft-save -t nat`. */
    readonly what: string,
    /** The bound it ran past, ms. */
    readonly boundMs: number,
  ) {
    super(`the kernel read-back (${what}) did not finish within ${(boundMs / 1000).toFixed(1)} s`);
    this.name = 'ReadBackTimeoutError';
  }
}

/**
 * An nfacct request failed (kernel/nfacct/): the kernel refused it, with the
 * errno name in `code` (e.g. "EPERM" without CAP_NET_ADMIN,
 * "EPROTONOSUPPORT" or "ENOENT" from a kernel without
 * CONFIG_NETFILTER_NETLINK_ACCT), or the reply could not be read.
 */
export class NfacctError extends DroverError {
  constructor(
    message: string,
    /** The errno name the kernel answered, when it answered one. */
    readonly code?: string,
  ) {
    super(message);
    this.name = 'NfacctError';
  }
}

/** The nfacct object named does not exist in the network namespace (NFNL_MSG_ACCT_GET answered ENOENT). */
export class NfacctNotFoundError extends NfacctError {
  constructor(
    /** The object's name. */
    readonly counter: string,
  ) {
    super(`no nfacct object ${JSON.stringify(counter)}`, 'ENOENT');
    this.name = 'NfacctNotFoundError';
  }
}

/** An nfacct object name drover refuses before it reaches a message (see kernel/nfacct/codec.ts checkCounterName). */
export class NfacctNameError extends DroverError {
  constructor(name: unknown) {
    super(`not a valid nfacct counter name: ${JSON.stringify(name)} (1-31 characters of a-z, 0-9 and _)`);
    this.name = 'NfacctNameError';
  }
}

/**
 * A command's one-line error for the user (a flag, a missing namespace, no
 * root); cli/program.ts prints it and exits 1. Thrown by the commands and by
 * the modes when they cannot run here.
 */
export class UsageError extends DroverError {
  override name = 'UsageError';
}

/**
 * `drover takeover` stopped before it removed anything: kube-proxy still
 * runs, the survey found state whose takeover is not built, or the check
 * found a frontend the old and the new state send to different endpoints.
 * The message says which, first line first.
 */
export class TakeoverRefusedError extends DroverError {
  override name = 'TakeoverRefusedError';
}
