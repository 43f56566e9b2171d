/**
 * A bound on the time a kernel read-back may take, for the full syncs that
 * can be put off (ChangeSet.deferrable: a periodic or requested resync while
 * drover knows what it programmed).
 *
 * Why: `iptables-nft-save` starts its dump again whenever the nf_tables
 * generation moves while it reads (iptables 1.8's nft_cache_update retries
 * until the generation before and after the dump agree). While another
 * program commits nf_tables changes every few milliseconds, a dump longer
 * than the gap between two commits never ends: a 2,000-service nat table
 * took from 0.1 s to tens of seconds, and every sync queued behind it
 * waited as long. A bounded read-back instead gives up, the proxier keeps
 * serving changes with partial syncs and retries the read-back later with
 * backoff (proxier.ts). The error it gives up with, ReadBackTimeoutError,
 * is in errors.ts: the proxier catches it.
 */

/** Options of a {@link ReadBackBudget}; ms. */
export interface ReadBackBudgetOptions {
  /** The least bound [3 000]. */
  readonly minMs?: number;
  /** The bound is this many times the fastest of the recent read-backs that finished [4]. */
  readonly factor?: number;
  /** How many of the last finished read-backs are kept to find the fastest [8]. */
  readonly window?: number;
  /** The greatest bound [120 000: the time any one iptables command is given]. */
  readonly maxMs?: number;
}

/**
 * The bound of a deferrable read-back: `factor` times as long as the
 * fastest of the last `window` read-backs that finished took, at least
 * `minMs` and at most `maxMs` (just `minMs` until one has finished). It
 * follows the size of the tables (a 10,000-service nat table read back in
 * 9.6 s gets 38 s), but not a read-back that finished slowly because
 * another program kept committing meanwhile (an unbounded first sync's,
 * say): the fastest recent one is what the tables' size costs, so a slow
 * one never widens the bound that keeps the next from holding changes back.
 */
export class ReadBackBudget {
  private readonly recentMs: number[] = [];
  private readonly minMs: number;
  private readonly factor: number;
  private readonly maxMs: number;
  private readonly window: number;

  constructor(opts: ReadBackBudgetOptions = {}) {
    this.minMs = opts.minMs ?? 3000;
    this.factor = opts.factor ?? 4;
    this.maxMs = opts.maxMs ?? 120_000;
    this.window = opts.window ?? 8;
  }

  /** The bound of the next deferrable read-back, ms. */
  boundMs(): number {
    let fastest = 0;
    for (const ms of this.recentMs) fastest = fastest === 0 ? ms : Math.min(fastest, ms);
    return Math.min(this.maxMs, Math.max(this.minMs, this.factor * fastest));
  }

  /** A read-back finished in `ms`. */
  finished(ms: number): void {
    this.recentMs.push(ms);
    if (this.recentMs.length > this.window) this.recentMs.shift();
  }
}
