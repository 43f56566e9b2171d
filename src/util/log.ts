/**
 * drover's logger: pino, one line per event on stderr, written synchronously
 * so that a fatal error is never lost on exit. Two formats (`--log-format`):
 * - `json` (default): one JSON object per line, `{"level":"info","time":"…",
 *   "app":"drover", …fields, "msg":"…"}`, the level by name, so that logs can
 *   be shipped as they are;
 * - `text`: kube-proxy's own text format, klog's header and structured
 *   key=value pairs (k8s.io/klog/v2, `I0102 15:04:05.000000 1234 drover]
 *   "full sync done" mode="iptables" full=true`), so that tools reading
 *   kube-proxy's logs read drover's.
 */
import { writeSync } from 'node:fs';
import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

/** Log levels accepted by `--log-level`, most verbose first. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Log formats accepted by `--log-format`. */
export const LOG_FORMATS = ['json', 'text'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** The format {@link createLogger} uses when not told (set once per command by {@link setDefaultLogFormat}). */
let defaultFormat: LogFormat = 'json';

/** Make `format` what every later {@link createLogger} without a format writes (a command's `--log-format`). */
export function setDefaultLogFormat(format: LogFormat): void {
  defaultFormat = format;
}

/**
 * The level of kube-proxy's `-v N` (klog verbosity), after Kubernetes'
 * logging conventions (community sig-instrumentation/logging.md): 0 to 3
 * are the default operator view, steady state and changes (drover's
 * `info`, which logs every sync that changes something); 4 is "debug level
 * verbosity" (`debug`); 5 and more "trace level verbosity" (`trace`).
 * @throws RangeError for a negative or fractional N.
 */
export function levelForVerbosity(v: number): LogLevel {
  if (!Number.isInteger(v) || v < 0) throw new RangeError(`verbosity ${v} is not a whole number from 0`);
  if (v >= 5) return 'trace';
  if (v >= 4) return 'debug';
  return 'info';
}

/** The more verbose of two levels (`silent` is the least). */
export function moreVerbose(a: LogLevel, b: LogLevel): LogLevel {
  return LOG_LEVELS.indexOf(a) <= LOG_LEVELS.indexOf(b) ? a : b;
}

/**
 * Create the process logger at `level`, in `format` (default: the one set
 * by {@link setDefaultLogFormat}, else JSON). Writes to stderr (fd 2)
 * synchronously.
 */
export function createLogger(level: LogLevel = 'info', format: LogFormat = defaultFormat): Logger {
  return pino(
    { level, base: { app: 'drover' }, timestamp: pino.stdTimeFunctions.isoTime, formatters: { level: (label) => ({ level: label }) } },
    format === 'text' ? klogStream((line) => writeSync(2, line)) : pino.destination({ dest: 2, sync: true }),
  );
}

/** A logger that drops everything, for tests and library use. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/** klog's severity letter for a level: verbose levels are klog's V(n) Info lines. */
const SEVERITY: Readonly<Record<string, string>> = { trace: 'I', debug: 'I', info: 'I', warn: 'W', error: 'E', fatal: 'F' };

/** Fields of pino's JSON line that the klog header carries, or that say nothing in it. */
const HEADER_FIELDS = new Set(['level', 'time', 'msg', 'app', 'pid', 'hostname']);

/**
 * One pino JSON line (level by name, ISO time) as a klog text line:
 * `Lmmdd hh:mm:ss.uuuuuu PID drover] "msg" key=value …\n` (klog's header
 * with the process id for its thread id and "drover" for its file:line;
 * strings quoted as Go's %q would, numbers and booleans bare, other values
 * as JSON), in UTC.
 */
export function klogLine(json: string, pid: number = process.pid): string {
  const o = JSON.parse(json) as Record<string, unknown>;
  const t = new Date(typeof o.time === 'string' || typeof o.time === 'number' ? o.time : Date.now());
  const two = (n: number) => String(n).padStart(2, '0');
  const stamp = `${two(t.getUTCMonth() + 1)}${two(t.getUTCDate())} ${two(t.getUTCHours())}:${two(t.getUTCMinutes())}:${two(t.getUTCSeconds())}.${String(t.getUTCMilliseconds() * 1000).padStart(6, '0')}`;
  const pairs = Object.entries(o)
    .filter(([k]) => !HEADER_FIELDS.has(k))
    .map(([k, v]) => `${k}=${typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v)}`);
  return `${SEVERITY[String(o.level)] ?? 'I'}${stamp} ${String(pid).padStart(7)} drover] ${JSON.stringify(String(o.msg ?? ''))}${pairs.length > 0 ? ` ${pairs.join(' ')}` : ''}\n`;
}

/** A pino destination that rewrites each JSON line with {@link klogLine} and hands it to `write`. */
function klogStream(write: (line: string) => void): DestinationStream {
  return { write: (line: string) => write(klogLine(line)) };
}
