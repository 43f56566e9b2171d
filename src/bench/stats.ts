/** Order statistics for benchmark samples. */

/**
 * The p-th percentile (0-100) of `samples` by the nearest-rank method
 * (the smallest sample with at least p% of samples at or below it).
 * @throws Error on an empty sample list or p outside 0-100.
 */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) throw new Error('percentile of no samples');
  if (!(p >= 0 && p <= 100)) throw new Error(`percentile ${p} is outside 0-100`);
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1]!;
}

/** The median: the mean of the two middle samples for an even count. @throws Error on no samples. */
export function median(samples: readonly number[]): number {
  if (samples.length === 0) throw new Error('median of no samples');
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Order statistics of one group of samples, in the samples' unit. */
export interface Summary {
  /** Number of samples. */
  readonly n: number;
  readonly p50: number;
  readonly p95: number;
  readonly p99: number;
  readonly max: number;
}

/**
 * n, p50, p95, p99 and max of `samples` (nearest rank, see percentile).
 * @throws Error on an empty sample list.
 */
export function summarise(samples: readonly number[]): Summary {
  return {
    n: samples.length,
    p50: percentile(samples, 50),
    p95: percentile(samples, 95),
    p99: percentile(samples, 99),
    max: percentile(samples, 100),
  };
}
