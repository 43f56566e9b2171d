/** The drift line of `drover status`, the same in every mode. */

/**
 * The number of differences `count` finds, or why it could not count them:
 * an unreadable source is an answer of `status`, not its failure.
 */
export async function driftOf(count: () => Promise<number>): Promise<{ differences: number } | { error: string }> {
  try {
    return { differences: await count() };
  } catch (err) {
    return { error: (err as Error).message };
  }
}
