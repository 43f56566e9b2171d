/** Where the status file is by default, apart from status.ts so that `--status-file`'s definition loads nothing else. */

/** Where `drover run` writes, and `drover status` reads, the status file by default. */
export const DEFAULT_STATUS_FILE = '/run/drover/status.json';
