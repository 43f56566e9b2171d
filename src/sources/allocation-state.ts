/**
 * The allocation state file: the ClusterIPs drover allocated (allocate.ts)
 * to services that come without one (Shepherd Services, hand-written
 * manifests), kept across restarts so that a restarted drover hands every
 * service the address it had, and two services whose hash candidates
 * collide do not swap addresses.
 *
 * Every source that allocates reads it at start and, when it programs the
 * kernel (`drover run`, `drover sync --once`), rewrites it after each load
 * that changed an allocation; `render`, `diff` and `status` only read it, so
 * that they show the addresses `run` programs. The file is JSON,
 * `version` 1, keyed by "namespace/name":
 *
 *     { "version": 1, "allocations": { "default/web": "10.101.23.7", "shop/api": "10.96.140.2" } }
 *
 * It is written atomically (util/atomic-file.ts), so a crash mid-write
 * leaves the previous version. A missing file is a fresh start. A file that
 * cannot be read or is not an allocation state file is warned about once
 * and ignored (a fresh start; the next write replaces it); an entry whose
 * key or address is not valid is dropped with the same one warning. drover
 * never fails to start because of it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { parseWith } from '../model/schema.ts';
import { checkUnicastIPv4 } from '../model/validate.ts';
import { writeFileAtomic } from '../util/atomic-file.ts';
import type { Logger } from '../util/log.ts';
import type { AllocationMemory } from './decoder.ts';

import { ALLOCATION_FILE, DEFAULT_STATE_DIR } from './defaults.ts';

export { ALLOCATION_FILE, DEFAULT_STATE_DIR };

const stateSchema = z.object({
  version: z.literal(1),
  allocations: z.record(z.string(), z.string()),
});

/** Options of {@link AllocationStateFile.open}. */
export interface AllocationStateOptions {
  readonly logger: Logger;
  /** Rewrite the file when allocations change (`run`, `sync`); false: only read it (`render`, `diff`, `status`). */
  readonly writable: boolean;
}

/** The allocation state file of one source; see the module comment. An {@link AllocationMemory} for the Decoder. */
export class AllocationStateFile implements AllocationMemory {
  readonly initial: ReadonlyMap<string, string>;
  /** The allocations waiting to be written (the latest wins), undefined when none wait. */
  private next: ReadonlyMap<string, string> | undefined;
  private writing: Promise<void> | undefined;
  /** True after a failed write was logged, until a write succeeds (one warning per outage). */
  private failing = false;

  private constructor(
    readonly path: string,
    initial: ReadonlyMap<string, string>,
    private readonly opts: AllocationStateOptions,
  ) {
    this.initial = initial;
  }

  /**
   * Read the state file `ALLOCATION_FILE` in `stateDir` (synchronously: once,
   * at start). Never throws: see the module comment for a missing or bad file.
   */
  static open(stateDir: string, opts: AllocationStateOptions): AllocationStateFile {
    const path = join(stateDir, ALLOCATION_FILE);
    return new AllocationStateFile(path, readState(path, opts.logger), opts);
  }

  /** Queue an atomic write of `allocations` (only the latest of several queued is written). Never throws; a failed write is logged. */
  save(allocations: ReadonlyMap<string, string>): void {
    if (!this.opts.writable) return;
    this.next = allocations;
    this.writing ??= this.drain();
  }

  /** Resolves once every queued write has finished (or failed and been logged). */
  async idle(): Promise<void> {
    while (this.writing !== undefined) await this.writing;
  }

  private async drain(): Promise<void> {
    while (this.next !== undefined) {
      const allocations = this.next;
      this.next = undefined;
      try {
        await writeFileAtomic(this.path, formatState(allocations), { durable: true });
        this.failing = false;
      } catch (err) {
        if (!this.failing) {
          this.opts.logger.warn({ path: this.path, err: (err as Error).message }, `could not write the allocation state file ${this.path}; allocated ClusterIPs may change at the next restart`);
        }
        this.failing = true;
      }
    }
    this.writing = undefined;
  }
}

/** The file's text for `allocations`. */
export function formatState(allocations: ReadonlyMap<string, string>): string {
  return `${JSON.stringify({ version: 1, allocations: Object.fromEntries(allocations) }, null, 2)}\n`;
}

/** The allocations in the file at `path`; empty (after one warning) when it cannot be used, empty and silent when it is missing. */
function readState(path: string, logger: Logger): Map<string, string> {
  const ignore = (why: string) => {
    logger.warn({ path }, `allocation state file ${path} ${why}; starting with no remembered ClusterIPs`);
    return new Map<string, string>();
  };
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Map();
    return ignore(`cannot be read (${(err as Error).message})`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    return ignore(`is not JSON (${(err as Error).message})`);
  }
  const parsed = parseWith(stateSchema, raw);
  if (!parsed.ok) return ignore(`is not an allocation state file (${parsed.field}: ${parsed.detail})`);
  const out = new Map<string, string>();
  const bad: string[] = [];
  for (const [key, ip] of Object.entries(parsed.data.allocations)) {
    if (/^[^/]+\/[^/]+$/.test(key) && checkUnicastIPv4(ip) === undefined) out.set(key, ip);
    else bad.push(key);
  }
  if (bad.length > 0) logger.warn({ path, entries: bad }, `allocation state file ${path}: ${bad.length} invalid ${bad.length === 1 ? 'entry' : 'entries'} ignored`);
  return out;
}
