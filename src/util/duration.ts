/**
 * Durations as kube-proxy takes them: Go's `time.ParseDuration` grammar,
 * for drover's flags and kube-proxy's configuration file alike (kube-proxy's
 * flags are pflag `DurationVar`s and its file's fields `metav1.Duration`,
 * both `time.ParseDuration`).
 *
 * The grammar (Go's src/time/format.go, ParseDuration):
 * `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or `0` with an optional sign. Each
 * number needs a digit before or after its point, and a unit: `ns`, `us`,
 * `µs` (U+00B5), `μs` (U+03BC), `ms`, `s`, `m`, `h`. Numbers and units may
 * repeat (`1h2m3.5s`, `10.5s4m`). The value is a whole number of
 * nanoseconds from -2^63 to 2^63-1; fractions finer than a nanosecond are
 * truncated, as Go truncates them. "3" (no unit), "1d", "1 s" are not
 * durations.
 *
 * A small parser that follows Go's algorithm step by step, not a library:
 * the libraries that parse "human" durations (parse-duration and the like)
 * accept what Go refuses ("3", "1d", "1 hour", spaces) and compute in
 * floating point, so they cannot give Go's answers; wrapping one would
 * need this grammar check anyway.
 */
import { DroverError } from '../errors.ts';

/** A text that is not a Go duration, or one out of Go's range. */
export class DurationError extends DroverError {
  constructor(message: string) {
    super(message);
    this.name = 'DurationError';
  }
}

/** Nanoseconds per unit (Go's unitMap). */
const UNITS: ReadonlyMap<string, bigint> = new Map([
  ['ns', 1n],
  ['us', 1_000n],
  ['\u00b5s', 1_000n], // µ MICRO SIGN
  ['\u03bcs', 1_000n], // μ GREEK SMALL LETTER MU
  ['ms', 1_000_000n],
  ['s', 1_000_000_000n],
  ['m', 60_000_000_000n],
  ['h', 3_600_000_000_000n],
]);

const MAX_MAGNITUDE = 1n << 63n;
const MAX_INT64 = MAX_MAGNITUDE - 1n;

const isDigit = (c: string | undefined): boolean => c !== undefined && c >= '0' && c <= '9';

/**
 * Parse a Go duration into nanoseconds, exactly as Go's
 * `time.ParseDuration` does (see the module comment).
 * @returns the duration in nanoseconds, from -(2^63) to 2^63-1
 * @throws DurationError naming the text: not of the grammar, no unit, an unknown unit, or out of range
 */
export function parseGoDuration(text: string): bigint {
  const invalid = (why: string) => new DurationError(`${JSON.stringify(text)} is not a duration: ${why} (e.g. 30s, 1m0s, 500ms, 1h2m3.5s)`);
  let s = text;
  let neg = false;
  if (s[0] === '-' || s[0] === '+') {
    neg = s[0] === '-';
    s = s.slice(1);
  }
  if (s === '0') return 0n;
  if (s === '') throw invalid('it is empty');
  let total = 0n;
  while (s !== '') {
    if (!(s[0] === '.' || isDigit(s[0]))) throw invalid(`expected a number at ${JSON.stringify(s)}`);
    // Whole part: [0-9]*, at most 2^63.
    let i = 0;
    let v = 0n;
    while (isDigit(s[i])) {
      if (v > MAX_MAGNITUDE / 10n) throw invalid('out of range');
      v = v * 10n + BigInt(s.charCodeAt(i) - 48);
      if (v > MAX_MAGNITUDE) throw invalid('out of range');
      i++;
    }
    const pre = i > 0;
    s = s.slice(i);
    // Fraction: (\.[0-9]*)?, digits past int64's precision are read and dropped (Go's leadingFraction).
    let f = 0n;
    let scale = 1;
    let post = false;
    if (s[0] === '.') {
      s = s.slice(1);
      let j = 0;
      let overflow = false;
      while (isDigit(s[j])) {
        if (!overflow) {
          if (f > MAX_INT64 / 10n) overflow = true;
          else {
            const y = f * 10n + BigInt(s.charCodeAt(j) - 48);
            if (y > MAX_MAGNITUDE) overflow = true;
            else {
              f = y;
              scale *= 10;
            }
          }
        }
        j++;
      }
      post = j > 0;
      s = s.slice(j);
    }
    if (!pre && !post) throw invalid('a number needs a digit');
    // Unit: everything up to the next number.
    let k = 0;
    while (k < s.length && s[k] !== '.' && !isDigit(s[k])) k++;
    if (k === 0) throw invalid('a unit is missing (ns, us, ms, s, m, h)');
    const unitName = s.slice(0, k);
    const unit = UNITS.get(unitName);
    if (unit === undefined) throw invalid(`unknown unit ${JSON.stringify(unitName)} (ns, us, ms, s, m, h)`);
    s = s.slice(k);
    if (v > MAX_MAGNITUDE / unit) throw invalid('out of range');
    v *= unit;
    if (f > 0n) {
      // As Go: float64 arithmetic, exact to the nanosecond for fractions of an hour, truncated.
      v += BigInt(Math.trunc(Number(f) * (Number(unit) / scale)));
      if (v > MAX_MAGNITUDE) throw invalid('out of range');
    }
    total += v;
    if (total > MAX_MAGNITUDE) throw invalid('out of range');
  }
  if (neg) return -total;
  if (total > MAX_INT64) throw invalid('out of range');
  return total;
}

/** The longest duration a flag or field takes: Node's longest timer, 2^31-1 ms, rounded down to whole days (24). */
export const MAX_DURATION_MS = 24 * 86_400_000;

/** What {@link parseDurationMs} accepts beyond the grammar. */
export interface DurationBounds {
  /** Accept a negative duration (default: refused). */
  readonly negative?: boolean;
  /** The longest accepted, ms (default: none). */
  readonly maxMs?: number;
  /** How to say the maximum in an error, e.g. "24 days" (default: "<maxMs> ms"). */
  readonly maxText?: string;
}

/**
 * A Go duration (see {@link parseGoDuration}) in whole milliseconds, the
 * unit drover's timers take: a fraction of a millisecond is rounded away
 * from zero, so a duration that is not zero never becomes 0.
 * @throws DurationError naming the text: not a Go duration, negative (unless allowed), or longer than `maxMs`
 */
export function parseDurationMs(text: string, bounds: DurationBounds = {}): number {
  const ns = parseGoDuration(text);
  if (ns < 0n && bounds.negative !== true) throw new DurationError(`${JSON.stringify(text)} is negative; a duration here is 0 or more`);
  const magnitude = ns < 0n ? -ns : ns;
  const ms = Number(magnitude / 1_000_000n) + (magnitude % 1_000_000n === 0n ? 0 : 1);
  if (bounds.maxMs !== undefined && ms > bounds.maxMs) {
    throw new DurationError(`${JSON.stringify(text)} is longer than the longest duration drover takes, ${bounds.maxText ?? `${bounds.maxMs} ms`}`);
  }
  return ns < 0n ? -ms : ms;
}

/**
 * A duration in whole ms as Go's time.Duration String() writes it:
 * "0s", "500ms", "30s", "1m0s", "1m30.5s", "1h0m0s".
 */
export function goDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms < 1000) return `${ms}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = (ms % 60_000) / 1000;
  return `${h > 0 ? `${h}h` : ''}${h > 0 || m > 0 ? `${m}m` : ''}${s}s`;
}
