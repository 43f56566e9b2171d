/**
 * The defaults `drover takeover` shows in its options, apart from the
 * takeover itself so that the command line loads it only when it runs.
 */

/** How long an old mode may wait for its own connections to end before its cleanup (ModeDriver.drain), ms: `--drain-timeout`'s default. */
export const DEFAULT_DRAIN_MS = 30_000;
