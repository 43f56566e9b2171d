/**
 * Writing a file so that a reader never sees half of it: a temporary file in
 * the same folder, then rename(2) over the target (atomic within one file
 * system). Used for the status file (proxier/status-file.ts) and the
 * allocation state file (sources/allocation-state.ts).
 */
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';

/** Options of {@link writeFileAtomic}. */
export interface AtomicWriteOptions {
  /** File mode of a newly written file [0o644]. */
  readonly mode?: number;
  /**
   * Also survive a crash or power loss: fsync(2) the temporary file before
   * the rename and the folder after it, so the target holds either the old
   * or the new text once the call returns, never an empty file [false].
   */
  readonly durable?: boolean;
}

/**
 * Write `text` to `path` atomically: create the folder, write a temporary
 * file next to `path`, rename it over `path` (with `durable`, fsync both
 * the file and its folder).
 * @throws the file system's error (the temporary file is removed).
 */
export async function writeFileAtomic(path: string, text: string, opts: AtomicWriteOptions = {}): Promise<void> {
  const folder = dirname(path);
  await mkdir(folder, { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  try {
    const file = await open(tmp, 'w', opts.mode ?? 0o644);
    try {
      await file.writeFile(text);
      if (opts.durable) await file.sync();
    } finally {
      await file.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  if (opts.durable) {
    const dir = await open(folder, 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  }
}
