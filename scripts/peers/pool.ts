/** Bounded parallelism for writing many objects to the API server. */

/**
 * Run `fn(i)` for every i in [0, n) with at most `inFlight` running at
 * once; rejects with the first error (the others still running are left to
 * finish).
 */
export async function pool(n: number, inFlight: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(inFlight, n) }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}
