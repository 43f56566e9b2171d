/** See send-order.mjs: the first run of consecutive qualifying attempts, by send order. */
export declare class SendOrder {
  /** @param need how many consecutive qualifying attempts make a run (≥ 1) */
  constructor(need: number);
  /** An attempt sent at `sent` (ns); its index, for {@link SendOrder.settle}. */
  push(sent: bigint): number;
  /** Attempt `index` finished, qualifying or not; the run's send time once decided, else undefined. */
  settle(index: number, good: boolean): bigint | undefined;
  /** Attempts pushed and not yet settled. */
  readonly inFlight: number;
}
