// @ts-check
/**
 * The decision of a paced probe (prober.mjs with `intervalMs`, the peer
 * bench's churn-prober.mjs): attempts are started at a steady pace without
 * waiting for the ones before, so they finish out of order; the answer is
 * the send time of the first attempt, by send order, of the first run of
 * `need` consecutive qualifying attempts. It is known once every attempt
 * sent before the run's end has finished: an earlier attempt still in
 * flight could qualify too. Pure: no clock, no I/O.
 */
export class SendOrder {
  /** @param {number} need how many consecutive qualifying attempts make a run (≥ 1) */
  constructor(need) {
    this.need = Math.max(1, need);
    /** @type {bigint[]} */
    this.sent = [];
    /** @type {(boolean | undefined)[]} */
    this.good = [];
    this.cursor = 0;
    this.pending = 0;
    this.run = 0;
    /** @type {bigint} */
    this.runStart = 0n;
    /** @type {bigint | undefined} */
    this.at = undefined;
  }

  /**
   * An attempt sent at `sent` (ns); its index, for {@link settle}.
   * @param {bigint} sent
   */
  push(sent) {
    this.sent.push(sent);
    this.good.push(undefined);
    this.pending++;
    return this.sent.length - 1;
  }

  /**
   * Attempt `index` finished: it qualified or not. Returns the run's send
   * time once it is decided (and from then on), else undefined.
   * @param {number} index @param {boolean} good
   * @returns {bigint | undefined}
   */
  settle(index, good) {
    if (this.good[index] === undefined) {
      this.good[index] = good;
      this.pending--;
    }
    while (this.at === undefined && this.cursor < this.good.length) {
      const g = this.good[this.cursor];
      if (g === undefined) break;
      if (!g) this.run = 0;
      else {
        if (this.run === 0) this.runStart = this.sent[this.cursor] ?? 0n;
        if (++this.run >= this.need) this.at = this.runStart;
      }
      this.cursor++;
    }
    return this.at;
  }

  /** Attempts pushed and not yet settled. */
  get inFlight() {
    return this.pending;
  }
}
