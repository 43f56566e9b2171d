/**
 * Writing a file so that a reader never sees half of it: a temporary file in
 * the same folder, then rename(2) over the target (atomic within one file
 * system). Used for the status file (proxier/status-file.ts) and the
 * allocation state file (sources/allocation-state.ts).
 */
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

/**
 * Write `text` to `path` atomically: create the folder, write a temporary
 * file next to `path` (mode `mode`, default 0644), rename it over `path`.
 * @throws the file system's error (the temporary file is removed).
 */
export async function writeFileAtomic(path: string, text: string, mode = 0o644): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  try {
    await writeFile(tmp, text, { mode });
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}
