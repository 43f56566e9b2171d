/**
 * A first sync's elements in as few netlink transactions as the socket
 * takes (backend.ts): the order in which a table created from nothing is
 * filled, and the split into batches.
 *
 * One nf_tables netlink batch must fit the socket's send buffer, and the
 * kernel's worst-case answers to it (every message failing, each answer a
 * copy of its request) its receive buffer: netlink/client.ts refuses a
 * larger one with NftBatchTooLargeError before sending anything. Both
 * buffers are capped by net.core.wmem_max and rmem_max (212,992 bytes by
 * default, doubled by the kernel), which drover never changes, so at
 * 10,000 Services × 10 endpoints (about 171,000 elements) the elements
 * take a few dozen batches.
 */
import { NftBatchTooLargeError } from '../../kernel/nftables/client.ts';
import { HAIRPIN, LOCAL, MAIN, SERVICE_IPS, countOfSet, timeoutOfSet } from './layout.ts';
import type { ElementOp } from './model.ts';

/** Operations a first batch tries; halved while a batch is too large for the socket, and kept for the rest. */
export const FIRST_BATCH_OPS = 4096;

/**
 * The rank of set `name` in the order a table created from nothing is
 * filled: a packet's path looks a frontend up in `service-ips` first,
 * then in the other membership sets, the endpoint-count sets (which pick
 * a slot with `numgen`) and the timeout sets, and only then in the slot
 * maps (`endpoints`, `local-endpoints`) and `hairpin`. Filled from the
 * last lookup to the first, no frontend matches before what it leads to
 * is there, so while the batches go in, a Service is either not handled
 * yet or handled whole.
 */
function fillRank(name: string): number {
  if (name === MAIN.map || name === LOCAL.map) return 0;
  if (name === HAIRPIN) return 1;
  if (countOfSet(name) !== undefined || timeoutOfSet(name) !== undefined) return 2;
  if (name === SERVICE_IPS) return 4;
  return 3;
}

/** `ops` (all adds, of a table created from nothing) in fill order (see {@link fillRank}); stable within a set. */
export function fillOrder(ops: readonly ElementOp[]): ElementOp[] {
  return ops
    .map((op, i) => ({ op, i, rank: fillRank(op.set) }))
    .sort((a, b) => a.rank - b.rank || (a.op.set < b.op.set ? -1 : a.op.set > b.op.set ? 1 : a.i - b.i))
    .map((x) => x.op);
}

/** What {@link commitInBatches} committed. */
export interface BatchesResult {
  /** Bytes sent, over every batch. */
  readonly bytes: number;
  /** Transactions committed (one per batch). */
  readonly transactions: number;
  /** Operations per batch that the socket took (the last batch may be smaller). */
  readonly batchOps: number;
}

/**
 * Commit `ops`, in order, in consecutive transactions of `batchOps`
 * operations (the last one smaller), through `commit`; a batch refused as
 * too large (NftBatchTooLargeError: nothing was sent) is tried again at
 * half the size, and that size is kept for the rest. Each transaction is
 * all or nothing; together they are not.
 * @throws the first other error of `commit` (the batches before it stay
 *   committed), or NftBatchTooLargeError when even one operation is too large.
 */
export async function commitInBatches(commit: (ops: readonly ElementOp[]) => Promise<number>, ops: readonly ElementOp[], batchOps: number = FIRST_BATCH_OPS): Promise<BatchesResult> {
  let bytes = 0;
  let transactions = 0;
  let size = Math.max(1, Math.floor(batchOps));
  for (let i = 0; i < ops.length; ) {
    const batch = ops.slice(i, i + size);
    try {
      bytes += await commit(batch);
    } catch (err) {
      if (!(err instanceof NftBatchTooLargeError) || size === 1) throw err;
      size = Math.max(1, size >> 1);
      continue;
    }
    transactions++;
    i += batch.length;
  }
  return { bytes, transactions, batchOps: size };
}
