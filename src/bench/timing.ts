/**
 * The bench's clock: CLOCK_MONOTONIC in nanoseconds (process.hrtime.bigint,
 * the clock prober.mjs stamps connections with), and milliseconds rounded
 * as samples store them.
 */

/** Now, ns on the monotonic clock. */
export const nowNs = (): bigint => process.hrtime.bigint();

/** Milliseconds from `t0` to `t` (default: now), both ns from {@link nowNs}. */
export const msSince = (t0: bigint, t: bigint = nowNs()): number => Number(t - t0) / 1e6;

/** `ms` rounded to the microsecond, as samples keep it. */
export const round3 = (ms: number): number => Math.round(ms * 1000) / 1000;
