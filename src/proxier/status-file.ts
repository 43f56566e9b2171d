/**
 * The status file of a running drover (format: inspect/status.ts, which
 * also reads it back for `drover status`): a {@link StatusFileWriter}
 * listens to the proxier's `sync` events and rewrites the file after each
 * sync attempt, atomically (a temporary file in the same folder, then
 * rename(2)), so a reader never sees half a file.
 */
import type { DnsStatusRecord, RunInfo, StatusRecord, SyncRecord } from '../inspect/status.ts';
import { writeFileAtomic } from '../util/atomic-file.ts';
import type { Logger } from '../util/log.ts';
import type { LastSync, Proxier } from './proxier.ts';

/** The status file's record of a proxier sync attempt. */
export function syncRecord(last: LastSync): SyncRecord {
  return {
    at: new Date(last.at).toISOString(),
    kind: last.full ? 'full' : 'partial',
    durationMs: Math.round(last.durationMs * 10) / 10,
    error: last.error ?? null,
    services: last.result?.services ?? null,
    endpoints: last.result?.endpoints ?? null,
    incomplete: [...last.incomplete],
  };
}

/**
 * Write `record` to `path` atomically (util/atomic-file.ts: a temporary
 * file next to it, renamed over `path`; the folder is created).
 * @throws the file system's error (the temporary file is removed).
 */
export async function writeStatusFile(path: string, record: StatusRecord): Promise<void> {
  await writeFileAtomic(path, `${JSON.stringify(record, null, 2)}\n`);
}

/**
 * Keeps the status file of a running drover: `record` is a `sync`
 * listener of the proxier (see {@link StatusFileWriter.listen}). Writes are queued one after the other; a failed write
 * is logged (warn) and never disturbs the sync loop.
 */
export class StatusFileWriter {
  private lastSuccess: SyncRecord | null = null;
  private last: SyncRecord | undefined;
  private queue: Promise<void> = Promise.resolve();
  /** The node DNS's counters, read at each write; none: no `dns` part. */
  private dns: (() => DnsStatusRecord) | undefined;

  constructor(
    private readonly path: string,
    private readonly run: RunInfo,
    private readonly logger: Logger,
  ) {}

  /** Record a sync attempt (queues an atomic write). Never throws. */
  record(last: LastSync): void {
    const sync = syncRecord(last);
    if (sync.error === null) this.lastSuccess = sync;
    this.last = sync;
    this.write();
  }

  /** Read the node DNS's counters from `dns` at every write from now on. */
  withDns(dns: () => DnsStatusRecord): void {
    this.dns = dns;
  }

  /** Write the file again with the current DNS counters (nothing before the first sync attempt). Never throws. */
  refresh(): void {
    if (this.last !== undefined) this.write();
  }

  private write(): void {
    const record: StatusRecord = { version: 1, ...this.run, lastSync: this.last!, lastSuccess: this.lastSuccess, ...(this.dns ? { dns: this.dns() } : {}) };
    this.queue = this.queue
      .then(() => writeStatusFile(this.path, record))
      .catch((err: Error) => this.logger.warn({ err: err.message, path: this.path }, 'could not write the status file'));
  }

  /**
   * Record every sync attempt of `proxier` from now on.
   * @returns a function that stops listening.
   */
  listen(proxier: Pick<Proxier, 'on'>): () => void {
    return proxier.on('sync', (last) => this.record(last));
  }

  /** Resolves when every queued write has finished (or failed and been logged). */
  idle(): Promise<void> {
    return this.queue;
  }
}

