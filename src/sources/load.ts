/** Reading the source of a command once, as a sync of `drover run` with the same flags would. */
import type { RenderCliOptions } from '../cli/options.ts';
import type { Snapshot } from '../model/types.ts';
import { silentLogger, type Logger } from '../util/log.ts';
import { FileSource } from './file.ts';

/** A source's snapshot and the objects skipped. */
export interface LoadedSource {
  readonly snapshot: Snapshot;
  /** One line per skipped object or dropped entry (as `drover render` prints them). */
  readonly problems: string[];
  /** The parts of the source that could not be read (files, documents, objects); empty when it was read whole. */
  readonly incomplete: readonly string[];
}

/**
 * Read the source as a sync of `drover run` with the same flags would.
 * @throws Error when the source path is missing or the service CIDR is invalid.
 */
export async function loadSource(opts: RenderCliOptions): Promise<LoadedSource> {
  const loaded = await createSource(opts, silentLogger()).load();
  return { snapshot: loaded.snapshot, problems: [...loaded.errors, ...loaded.warnings].map((e) => e.message), incomplete: loaded.incomplete };
}

/** The file source for `--source`. */
export function createSource(opts: RenderCliOptions, logger: Logger): FileSource {
  return new FileSource(opts.source, { serviceCIDR: opts.serviceCidr, logger });
}
