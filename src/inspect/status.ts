/**
 * drover's status file and `drover status`'s report.
 *
 * `drover run` writes the status file after every sync attempt (default
 * /run/drover/status.json): what it runs with (mode, source, render options,
 * network namespace) and how the last sync, and the last successful one,
 * went (proxier/status-file.ts, a listener of the proxier's sync
 * events). It is written atomically (a temporary file in the same folder,
 * then rename(2)), so a reader never sees half a file. `drover status` reads it
 * back, adds counts from the live kernel and the drift, and prints them.
 *
 * The file is JSON, `version` 1:
 * ```
 * { "version": 1, "pid": 4242, "mode": "iptables", "iptablesBackend": "auto", "netns": null,
 *   "source": "/etc/drover/manifests" (or "shepherd+http://10.0.0.1:9876"), "stateDir": "/var/lib/drover",
 *   "render": { "clusterCidr": "10.244.0.0/16", "masqueradeAll": false, "serviceCidr": "10.96.0.0/12" },
 *   "ipvs": null (iptables mode) or { "scheduler": "rr" },
 *   "lastSync": { "at": "2025-06-01T10:00:00.000Z", "kind": "full", "durationMs": 22.8,
 *                 "error": null, "services": 2, "endpoints": 3 },
 *   "lastSuccess": { ...same shape..., or null before the first successful sync } }
 * ```
 */
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { parseWith } from '../model/schema.ts';
import { DroverError } from '../errors.ts';
import { DEFAULT_STATUS_FILE } from './status-path.ts';

export { DEFAULT_STATUS_FILE };

const syncSchema = z.object({
  /** When the attempt ended, ISO 8601. */
  at: z.string(),
  kind: z.enum(['full', 'partial']),
  /** The whole attempt (reading the source included), ms. */
  durationMs: z.number(),
  /** The error message of a failed attempt; null when it succeeded. */
  error: z.string().nullable(),
  /** Service ports and serving endpoints programmed; null for a failed attempt. */
  services: z.number().int().nullable(),
  endpoints: z.number().int().nullable(),
  /** What the source could not read at this attempt (no service port was deleted); empty, or absent in older files, when it was whole. */
  incomplete: z.array(z.string()).optional(),
});

/** One sync attempt as the status file records it. */
export type SyncRecord = z.output<typeof syncSchema>;

/** The node DNS server's counters in the status file (dns/server.ts DnsStats). */
const dnsSchema = z.object({
  /** When the counters were read, ISO 8601. */
  at: z.string(),
  address: z.string(),
  port: z.number().int(),
  zone: z.string(),
  queries: z.number().int(),
  /** Answers sent, by rcode. */
  answers: z.record(z.string(), z.number().int()),
  /** Questions answered from the cluster zone. */
  zoneAnswers: z.number().int(),
  cacheHits: z.number().int(),
  forwardFailures: z.number().int(),
  dropped: z.number().int(),
});

/** The `dns` part of the status file. */
export type DnsStatusRecord = z.output<typeof dnsSchema>;

const statusSchema = z.object({
  version: z.literal(1),
  pid: z.number().int(),
  mode: z.string(),
  iptablesBackend: z.enum(['auto', 'nft', 'legacy']),
  netns: z.string().nullable(),
  /** Absolute path of `--source`, or its URL. */
  source: z.string(),
  /** Absolute path of `--state-dir`; absent in files of older versions. */
  stateDir: z.string().optional(),
  /** The render flags of `drover run`, as the CLI names them. */
  render: z.object({
    clusterCidr: z.string().nullable(),
    masqueradeAll: z.boolean(),
    serviceCidr: z.string(),
    /** `--nodeport-addresses` as given (CIDRs); absent when not given, and in files of older versions. */
    nodePortAddresses: z.array(z.string()).optional(),
    /** `--nodeport-localhost` (iptables mode); absent when off, and in files of older versions. */
    nodePortLocalhost: z.boolean().optional(),
    /** `--conntrack-tcp-be-liberal` (no drop of conntrack-INVALID packets); absent when off, and in files of older versions. */
    conntrackTcpBeLiberal: z.boolean().optional(),
  }),
  /** IPVS mode's options (`--ipvs-scheduler`); null in iptables mode, absent in files of older versions. */
  ipvs: z.object({ scheduler: z.string() }).nullable().optional(),
  lastSync: syncSchema,
  lastSuccess: syncSchema.nullable(),
  /** The node DNS server's counters (`run --dns-address`), as of `at`; absent when it is off, and in files of older versions. */
  dns: dnsSchema.optional(),
});

/** The whole status file (see the module comment). */
export type StatusRecord = z.output<typeof statusSchema>;

/** What `drover run` runs with: the status file without the sync records and the DNS counters. */
export type RunInfo = Omit<StatusRecord, 'version' | 'lastSync' | 'lastSuccess' | 'dns'>;

/** The `dns:` line of `drover status`, e.g. `169.254.20.10:53, zone cluster.local: 120 queries; answers NOERROR 100, NXDOMAIN 20; 110 from the zone, 3 cache hits, 0 forward failures, 0 dropped (5 s ago)`. */
export function dnsLine(d: DnsStatusRecord, now: number): string {
  const answers = Object.entries(d.answers).sort(([a], [b]) => (a < b ? -1 : 1)).map(([code, n]) => `${code} ${n}`).join(', ');
  return `${d.address.includes(':') ? `[${d.address}]` : d.address}:${d.port}, zone ${d.zone}: ${d.queries} queries; answers ${answers || 'none'}; ` +
    `${d.zoneAnswers} from the zone, ${d.cacheHits} cache hits, ${d.forwardFailures} forward failures, ${d.dropped} dropped (${ago(Date.parse(d.at), now)})`;
}

/** There is no status file: drover has not run (with this `--status-file`). */
export class NotRunError extends DroverError {
  override name = 'NotRunError';
}

/** Most parts of an incomplete source `drover status` names; the rest are counted. */
const INCOMPLETE_SHOWN = 3;

/** The `source read` lines of `drover status` when the last read was incomplete: what could not be read, and that deletions wait; none when it was whole. */
function sourceReadLines(sync: SyncRecord): Array<[string, string]> {
  const missing = sync.incomplete ?? [];
  if (missing.length === 0) return [];
  const more = missing.length - INCOMPLETE_SHOWN;
  return [
    ['source read', `incomplete: ${missing.length} ${missing.length === 1 ? 'part' : 'parts'} could not be read; no service port is deleted until it is whole`],
    ...missing.slice(0, INCOMPLETE_SHOWN).map((m): [string, string] => ['  missing', m]),
    ...(more > 0 ? [['  missing', `(${more} more in the log)`] as [string, string]] : []),
  ];
}

/**
 * Read and validate a status file.
 * @throws NotRunError when there is no file at `path`; Error naming the path
 *   (and the field) when it cannot be read or is not a status file.
 */
export async function readStatusFile(path: string): Promise<StatusRecord> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new NotRunError(`drover has not run: no status file at ${path}`);
    throw new Error(`${path}: ${(err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new Error(`${path}: not JSON: ${(err as Error).message}`);
  }
  const parsed = parseWith(statusSchema, raw);
  if (!parsed.ok) throw new Error(`${path}: not a drover status file: ${parsed.field}: ${parsed.detail}`);
  return parsed.data;
}


/**
 * drover-owned rules in the live kernel, counted by the mode per table (or
 * per kind of chain: iptables and IPVS mode's tables `filter` and `nat`,
 * nftables mode's filter and nat chains), in the order `drover status`
 * prints them.
 */
export type RuleCounts = Readonly<Record<string, number>>;

/** "31 drover-owned rules in the kernel (filter 6, nat 25)": the sum of `rules`, then each count by name. */
function rulesLine(rules: RuleCounts): string {
  const counts = Object.entries(rules);
  const total = counts.reduce((sum, [, n]) => sum + n, 0);
  return `${total} drover-owned rules in the kernel (${counts.map(([name, n]) => `${name} ${n}`).join(', ')})`;
}

/** Everything `drover status` prints. */
export interface StatusView {
  /** Path of the status file read. */
  readonly file: string;
  readonly record: StatusRecord;
  /** Whether the process `record.pid` is alive. */
  readonly running: boolean;
  /** The mode's count of drover-owned rules in the live kernel (ModeStatus.rules). */
  readonly rules: RuleCounts;
  /** The mode's own lines (`name: value`, e.g. IPVS mode's virtual servers), printed after `services`. */
  readonly modeLines?: ReadonlyArray<readonly [string, string]>;
  /** Number of differences (driftItems) with the recorded source and options, or why it could not be computed. */
  readonly drift: { readonly differences: number } | { readonly error: string };
  /** Now, ms since the epoch (for "… ago"). */
  readonly now: number;
}

/** "12 s ago", "3 min ago", "2 h ago", "4 d ago" (rounded down; future times count as 0 s). */
export function ago(thenMs: number, nowMs: number): string {
  const s = Math.max(0, Math.floor((nowMs - thenMs) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86_400)} d ago`;
}

function syncLine(sync: SyncRecord, now: number): string {
  const result = sync.error === null ? 'ok' : `error: ${sync.error}`;
  return `${sync.at} (${ago(Date.parse(sync.at), now)}), ${sync.kind}, ${sync.durationMs.toFixed(1)} ms, ${result}`;
}

/**
 * The text of `drover status`, one `name: value` line each: the status file
 * and its writer, mode, source and render flags, service ports and endpoints
 * of the last successful sync, the mode's own lines (in IPVS mode the virtual
 * and real servers, ipset entries and kube-ipvs0 addresses), drover-owned rules in the live kernel, the
 * last sync (and the last successful one when the last failed), and drift.
 */
export function formatStatus(view: StatusView): string {
  const { record: r, now } = view;
  const flags = [
    ...(r.render.clusterCidr !== null ? [`--cluster-cidr ${r.render.clusterCidr}`] : []),
    ...(r.render.masqueradeAll ? ['--masquerade-all'] : []),
    ...(r.render.conntrackTcpBeLiberal === true ? ['--conntrack-tcp-be-liberal'] : []),
    `--service-cidr ${r.render.serviceCidr}`,
  ];
  const ok = r.lastSuccess;
  const lines: Array<readonly [string, string]> = [
    ['status file', `${view.file} (pid ${r.pid}, ${view.running ? 'running' : 'not running'})`],
    ['mode', `${r.mode}${r.netns !== null ? `, network namespace ${r.netns}` : ''}`],
    ['source', `${r.source} (${flags.join(' ')})`],
    ...sourceReadLines(r.lastSync),
    ['services', ok ? `${ok.services ?? 0} service ports, ${ok.endpoints ?? 0} endpoints (last successful sync)` : 'unknown: no successful sync yet'],
    ...(view.modeLines ?? []),
    ['rules', rulesLine(view.rules)],
    ['last sync', syncLine(r.lastSync, now)],
  ];
  if (r.lastSync.error !== null) lines.push(['last ok', ok ? syncLine(ok, now) : 'never']);
  if (r.dns !== undefined) lines.push(['dns', dnsLine(r.dns, now)]);
  const d = view.drift;
  lines.push([
    'drift',
    'error' in d ? `unknown: ${d.error}` : d.differences === 0 ? 'no' : `yes, ${d.differences} difference${d.differences > 1 ? 's' : ''} (drover diff lists them)`,
  ]);
  return lines.map(([name, value]) => `${`${name}:`.padEnd(13)}${value}\n`).join('');
}
