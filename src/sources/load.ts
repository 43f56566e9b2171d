/** Choosing and reading the source of a command (`--source`), as a sync of `drover run` with the same flags would. */
import type { RenderCliOptions } from '../cli/options.ts';
import type { Snapshot } from '../model/types.ts';
import { silentLogger, type Logger } from '../util/log.ts';
import { FileSource, type LoadResult } from './file.ts';
import { createKubernetesSource, KUBERNETES_SOURCE } from './kubernetes/create.ts';

/** A source's snapshot and the objects skipped. */
export interface LoadedSource {
  readonly snapshot: Snapshot;
  /** One line per skipped object or dropped entry (as `drover render` prints them). */
  readonly problems: string[];
  /** The parts of the source that could not be read (files, documents, objects); empty when it was read whole. */
  readonly incomplete: readonly string[];
}

/** What every source offers: the proxier's SnapshotSource (proxier.ts), whose reads are {@link LoadResult}s. */
export interface Source {
  load(): Promise<LoadResult>;
  watch(onChange: () => void): Promise<void> | void;
  close(): Promise<void> | void;
}

/** How long a one-shot read waits for an API source's first lists when no `--list-timeout` is given, ms. */
export const DEFAULT_LIST_TIMEOUT_MS = 30_000;

/**
 * Read the source once, as a sync of `drover run` with the same flags
 * would, and close it.
 * @throws Error when the source path is missing, the service CIDR is
 *   invalid, or an API source cannot be read within the list timeout.
 */
export async function loadSource(opts: RenderCliOptions): Promise<LoadedSource> {
  const source = createSource({ ...opts, listTimeout: opts.listTimeout ?? DEFAULT_LIST_TIMEOUT_MS }, silentLogger());
  try {
    const loaded = await source.load();
    return { snapshot: loaded.snapshot, problems: [...loaded.errors, ...loaded.warnings].map((e) => e.message), incomplete: loaded.incomplete };
  } finally {
    await source.close();
  }
}

/**
 * The source of `--source`: the Kubernetes API for `kubernetes`
 * (sources/kubernetes/), else the manifest file or folder at that path.
 * @throws Error as the chosen source's constructor does (bad service CIDR, unreadable kubeconfig).
 */
export function createSource(opts: RenderCliOptions, logger: Logger): Source {
  if (opts.source === KUBERNETES_SOURCE) return createKubernetesSource(opts, logger);
  return new FileSource(opts.source, { serviceCIDR: opts.serviceCidr, logger });
}

/** The file or folder of a `--source` that names one; undefined for an API source (`kubernetes`, or any `scheme://…`). */
export function sourcePath(source: string): string | undefined {
  return source === KUBERNETES_SOURCE || /^[a-z][a-z0-9+.-]*:\/\//i.test(source) ? undefined : source;
}
