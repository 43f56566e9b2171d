/** Choosing and reading the source of a command (`--source`), as a sync of `drover run` with the same flags would. */
import type { RenderCliOptions } from '../config/render-cli.ts';
import type { Snapshot } from '../model/types.ts';
import { silentLogger } from '../util/log.ts';
import { createSource } from './select.ts';

export { createSource };

/** A source's snapshot and the objects skipped. */
export interface LoadedSource {
  readonly snapshot: Snapshot;
  /** One line per skipped object, dropped entry or refused frontend (as `drover render` prints them). */
  readonly problems: string[];
  /** The parts of the source that could not be read (files, documents, objects); empty when it was read whole. */
  readonly incomplete: readonly string[];
}

/** How long a one-shot read waits for an API source's first lists when no `--list-timeout` is given, ms. */
export const DEFAULT_LIST_TIMEOUT_MS = 30_000;

/**
 * Read the source once, as a sync of `drover run` with the same flags would
 * (the allocation state file is read, not written), and close it.
 * @throws Error when the source path is missing, the source server cannot
 *   be read (an API source: within the list timeout), or the service CIDR is invalid.
 */
export async function loadSource(opts: RenderCliOptions): Promise<LoadedSource> {
  const source = await createSource({ ...opts, listTimeout: opts.listTimeout ?? DEFAULT_LIST_TIMEOUT_MS }, silentLogger(), { persist: false });
  try {
    const loaded = await source.load();
    return { snapshot: loaded.snapshot, problems: [...loaded.errors, ...loaded.warnings, ...(loaded.refusals ?? [])].map((e) => e.message), incomplete: loaded.incomplete };
  } finally {
    await source.close();
  }
}
