/** Reading the source of a command once, as a sync of `drover run` with the same flags would. */
import type { RenderCliOptions } from '../cli/options.ts';
import type { Snapshot } from '../model/types.ts';
import { silentLogger } from '../util/log.ts';
import { createSource } from './select.ts';

export { createSource };

/** A source's snapshot and the objects skipped. */
export interface LoadedSource {
  readonly snapshot: Snapshot;
  /** One line per skipped object or dropped entry (as `drover render` prints them). */
  readonly problems: string[];
  /** The parts of the source that could not be read (files, documents, objects); empty when it was read whole. */
  readonly incomplete: readonly string[];
}

/**
 * Read the source as a sync of `drover run` with the same flags would (the
 * allocation state file is read, not written).
 * @throws Error when the source path is missing, the source server cannot
 *   be read, or the service CIDR is invalid.
 */
export async function loadSource(opts: RenderCliOptions): Promise<LoadedSource> {
  const loaded = await createSource(opts, silentLogger(), { persist: false }).load();
  return { snapshot: loaded.snapshot, problems: [...loaded.errors, ...loaded.warnings].map((e) => e.message), incomplete: loaded.incomplete };
}
