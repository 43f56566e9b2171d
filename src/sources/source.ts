/**
 * What a source of desired state offers: {@link SnapshotSource}, the part
 * the proxier reads (proxier/proxier.ts), and {@link Source}, the whole of
 * it the commands use, with what each read skipped.
 */
import type { DroverError } from '../errors.ts';
import type { Snapshot } from '../model/types.ts';

/** One read of a source: the desired state, and what of the source could not be read. */
export interface SourceRead {
  readonly snapshot: Snapshot;
  /**
   * One line per part of the source that could not be read (a file, a
   * document, an invalid object); empty or absent when the read is whole.
   * While it is not empty the snapshot may lack service ports that are
   * programmed, so no service port is deleted.
   */
  readonly incomplete?: readonly string[];
  /**
   * ServicePortNames ("namespace/name:port", normalise.ts servicePortKey)
   * added, removed or modified since the previous read of this source; a
   * superset is allowed, a missing key is not. Undefined (or absent) when
   * the source cannot tell, e.g. at its first read: the proxier then
   * compares the snapshot with the last one applied.
   */
  readonly changed?: ReadonlySet<string> | undefined;
  /**
   * ServicePortName → the times (ms since the epoch) of the changes behind
   * this read's changes to it, oldest first, for the network programming
   * latency (kube-proxy's network_programming_duration_seconds, measured
   * from the EndpointSlice annotation
   * `endpoints.kubernetes.io/last-change-trigger-time`). Only a source that
   * knows them reports them (the Kubernetes source); absent otherwise.
   */
  readonly triggerTimes?: ReadonlyMap<string, readonly number[]>;
}

/**
 * What the proxier needs of a source. Once the proxier runs it must be the
 * only caller of `load`, since each read reports changes since the previous
 * one.
 */
export interface SnapshotSource {
  /**
   * Read the current desired state; rejects when it cannot be read at all
   * (the read then changes nothing). `full`: this read is for a full sync,
   * so a source that reads only what its watch reported changed (the file
   * source) reads everything again.
   */
  load(opts?: { readonly full?: boolean }): Promise<SourceRead>;
  /** Call `onChange` whenever the desired state may have changed; resolves once watching. */
  watch(onChange: () => void): Promise<void> | void;
  /** Stop watching. */
  close(): Promise<void> | void;
}

/** One load of a source ({@link Source}): the proxier's SourceRead, with what was skipped. */
export interface SourceLoad {
  readonly snapshot: Snapshot;
  /** Everything skipped, kept from an earlier read or not read at all, one line each (also logged at warn). */
  readonly errors: readonly DroverError[];
  /** Entries dropped from otherwise valid objects and other non-fatal problems (also logged at warn). */
  readonly warnings: readonly DroverError[];
  /** Frontends refused (model/claims.ts), one line each (logged once, when each first appears); they never make the read incomplete. */
  readonly refusals?: readonly DroverError[];
  /** The messages of `errors`: while it is not empty, the proxier deletes no service port. */
  readonly incomplete: readonly string[];
  /** ServicePortNames changed since the previous load; undefined at the first. */
  readonly changed: ReadonlySet<string> | undefined;
}

/** A source of desired state, as the proxier and the one-shot commands use it. */
export interface Source extends SnapshotSource {
  load(opts?: { readonly full?: boolean }): Promise<SourceLoad>;
}
