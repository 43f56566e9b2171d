/**
 * The contract between the proxier and a backend (iptables now, IPVS and
 * nftables later).
 */
import type { Snapshot } from '../model/types.ts';

/** The proxy modes drover knows. */
export type ProxyMode = string;

/** What changed since the last successful sync. */
export interface ChangeSet {
  /** A full sync is needed (first sync, periodic resync, after a failure): compare with the kernel. */
  readonly full: boolean;
  /** ServicePortNames whose service or endpoints changed (added, removed or modified). */
  readonly changed: ReadonlySet<string>;
  /**
   * The source could not be read whole, so the snapshot may lack service
   * ports that are programmed: add and update what the snapshot holds, but
   * delete nothing that belongs to a service port it does not list (a full
   * sync keeps such chains, rules, virtual servers, set entries and
   * addresses as the kernel has them). Default false.
   */
  readonly incomplete?: boolean;
}

/** What one sync did. Times in milliseconds. */
export interface SyncResult {
  readonly full: boolean;
  /** Service ports in the snapshot. */
  readonly services: number;
  /** Serving endpoints in the snapshot. */
  readonly endpoints: number;
  readonly chainsWritten: number;
  readonly chainsDeleted: number;
  readonly rulesWritten: number;
  readonly rulesDeleted: number;
  /** Size of the kernel transaction payloads, bytes (0 when nothing needed writing). */
  readonly bytes: number;
  /** Kernel transactions used (0 when nothing needed writing; more than 1 only for very large changes). */
  readonly transactions: number;
  /** Time spent reading the kernel back (full syncs), ms. */
  readonly readMs: number;
  /** Time spent in the kernel transaction, ms. */
  readonly applyMs: number;
  /** Whole sync, ms. */
  readonly totalMs: number;
}

/** A proxy backend: turns a Snapshot into kernel state. */
export interface Backend {
  readonly mode: ProxyMode;
  /**
   * Bring the kernel to `snapshot`. A partial sync writes only what belongs
   * to `changes.changed`; a full sync reads the kernel back and repairs any
   * difference. On failure the backend forgets what it believes is
   * programmed, so that the next sync is a full one.
   * @throws whatever the kernel transaction threw; nothing is half-applied within a table.
   */
  sync(snapshot: Snapshot, changes: ChangeSet): Promise<SyncResult>;
  /**
   * Remove everything this backend created, and nothing else. A chain that
   * a rule of someone else's still jumps to cannot be deleted; it is emptied
   * and reported in the result's `kept`.
   * @throws whatever reading or writing the kernel threw.
   */
  cleanup(): Promise<CleanupResult>;
}

/**
 * A chain of drover's that cleanup emptied but could not delete: the kernel
 * refuses to delete a chain while a rule jumps to it, and the rules that do
 * are not drover's, so cleanup leaves them alone.
 */
export interface KeptChain {
  /** The table, e.g. `nat`. */
  readonly table: string;
  readonly chain: string;
  /** The rules drover does not own that jump to the chain, as iptables-save prints them (`-A CHAIN …`), all in `table`. */
  readonly referencedBy: readonly string[];
}

/** What cleanup did. */
export interface CleanupResult {
  readonly chainsDeleted: number;
  /** Hook rules deleted (the jumps from the built-in chains). */
  readonly rulesDeleted: number;
  /** Chains emptied but not deleted (see {@link KeptChain}); empty when everything was removed. */
  readonly kept: readonly KeptChain[];
}
