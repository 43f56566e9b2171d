/**
 * The sources' defaults the command line shows (cli/options.ts), apart from
 * the sources themselves so that defining the options loads no source.
 */

/** Where drover keeps state across restarts by default (`--state-dir`). */
export const DEFAULT_STATE_DIR = '/var/lib/drover';

/** The allocation state file's name inside the state folder. */
export const ALLOCATION_FILE = 'allocations.json';

/** Default settle time (`--file-settle`): how long a file written in place must be unchanged before it is read, in milliseconds. */
export const DEFAULT_FILE_SETTLE_MS = 200;

/** Default time between two polls, ms (Shepherd's service controller period). */
export const DEFAULT_POLL_INTERVAL_MS = 5000;
