/**
 * The one error type of drover's input side: a problem with one manifest
 * file or one object in it, reported as a single line that names the file,
 * the object and the field, e.g.
 *
 *     examples/bad.yaml: Service default/web: spec.ports[0].port: 70000 is out of range 1-65535
 *
 * A ManifestError never stops drover: the object (or file) it names is
 * skipped, everything else keeps being served.
 *
 * The message is safe to print on a terminal or in a plain-text log: a file
 * name with a control or other non-printable character is shown JSON-quoted
 * (as invalid object names are, see {@link displayName}), and whatever such
 * characters remain in the detail are escaped, so no input can forge a line
 * or send an escape sequence.
 */
import { DroverError, describeOrigin, displayFile, fileOrigin, type FileOrigin } from '../errors.ts';
import { escapeNonPrintable, quote } from './quote.ts';

/** How a file name is shown in a message (defined with {@link describeOrigin} in src/errors.ts). */
export { displayFile };

/** Where and what: the constructor argument of {@link ManifestError}. */
export interface ManifestErrorInit {
  /** Manifest file path as the user gave it (joined with the folder), e.g. "examples/bad.yaml". */
  readonly file: string;
  /** Object kind ("Service", "EndpointSlice", ...), or "" for a whole-file problem or an unknown kind. */
  readonly kind?: string;
  /** "namespace/name", or "" when unknown (then `index` identifies the object). */
  readonly object?: string;
  /** Field path such as "spec.ports[0].port"; "" for the object or file as a whole. */
  readonly field?: string;
  /** Position of the object in its file (0-based, after List flattening); used only when `object` is "". */
  readonly index?: number;
  /** 1-based line and column in the file, for syntax errors. */
  readonly line?: number;
  readonly column?: number;
  /** What is wrong, one line, e.g. "70000 is out of range 1-65535". */
  readonly detail: string;
}

/**
 * A problem with one manifest file or object: the input-side
 * {@link DroverError}, whose `origin` is always the file (with the object's
 * index and the line and column when known) and whose `field` is the field
 * path ("" for the object or file as a whole). `message` (and `toString()`)
 * is the one-line form `file[:line:col]: Kind namespace/name: field: detail`,
 * leaving out the parts that are empty; an object with no readable name is
 * shown as `Kind #n` (n = 1-based position in the file). The properties keep
 * the raw values; only `message` is made printable (see the module comment).
 */
export class ManifestError extends DroverError {
  /** The file, index, line and column below, as a {@link FileOrigin}. */
  declare readonly origin: FileOrigin;
  readonly file: string;
  readonly kind: string;
  readonly object: string;
  declare readonly field: string;
  readonly index: number | undefined;
  readonly line: number | undefined;
  readonly column: number | undefined;
  readonly detail: string;

  constructor(init: ManifestErrorInit) {
    const origin = fileOrigin(init.file, init);
    super(formatManifestError(origin, init), { origin, field: init.field ?? '' });
    this.name = 'ManifestError';
    this.file = init.file;
    this.kind = init.kind ?? '';
    this.object = init.object ?? '';
    this.index = init.index;
    this.line = init.line;
    this.column = init.column;
    this.detail = init.detail;
  }

  /** A copy of this error with `note` appended to the detail ("...; note"). */
  withNote(note: string): ManifestError {
    return new ManifestError({ ...this.init(), detail: `${this.detail}; ${note}` });
  }

  /** The one-line message (no "ManifestError:" prefix, unlike Error's default). */
  override toString(): string {
    return this.message;
  }

  private init(): ManifestErrorInit {
    return {
      file: this.file,
      kind: this.kind,
      object: this.object,
      field: this.field,
      index: this.index,
      line: this.line,
      column: this.column,
      detail: this.detail,
    };
  }
}

/** A ManifestError about a parsed object (parsed.ts), e.g. a cross-object problem found in normalise.ts. */
export function objectError(
  o: { readonly file: string; readonly kind: string; readonly namespace: string; readonly name: string; readonly index: number },
  field: string,
  detail: string,
): ManifestError {
  return new ManifestError({ file: o.file, kind: o.kind, object: `${o.namespace}/${o.name}`, index: o.index, field, detail });
}

/** Build the one-line message of a {@link ManifestError}: where (see {@link describeOrigin}), then who, field and detail. */
function formatManifestError(origin: FileOrigin, e: ManifestErrorInit): string {
  const parts = [describeOrigin(origin)];
  const kind = e.kind ?? '';
  const object = e.object ?? '';
  if (kind !== '' || object !== '' || e.index !== undefined) {
    const who = object !== '' ? object : e.index !== undefined ? `#${e.index + 1}` : '';
    parts.push([kind === '' ? 'object' : kind, who].filter((s) => s !== '').join(' '));
  }
  if (e.field) parts.push(e.field);
  parts.push(oneLine(e.detail));
  return parts.join(': ');
}

/** Collapse line breaks and escape other non-printable characters, so that a message always stays one harmless line. */
function oneLine(s: string): string {
  return escapeNonPrintable(s.replace(/\s*[\r\n]+\s*/g, ' ').trim());
}

/**
 * Render a user-supplied name (possibly invalid) for an error message: as is
 * when it is made of name-safe characters, otherwise JSON-quoted and cut to
 * 80 characters so that spaces, quotes, newlines and other non-printable
 * characters stay visible and harmless.
 */
export function displayName(value: unknown): string {
  if (typeof value === 'string' && /^[A-Za-z0-9._-]{1,253}$/.test(value)) return value;
  return quote(typeof value === 'string' ? value : String(value));
}
