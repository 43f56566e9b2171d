/**
 * The logging flags of every command, settled before its action runs:
 * `--log-format` becomes the format of every logger the command creates
 * (util/log.ts setDefaultLogFormat), and kube-proxy's `-v N` (klog
 * verbosity, mapped to `--verbosity` by command-line.ts) makes `--log-level` more verbose, never less:
 * the level in effect is the more verbose of `--log-level` and
 * levelForVerbosity(N) (0-3 info, 4 debug, 5+ trace).
 */
import type { Command } from 'commander';
import { levelForVerbosity, moreVerbose, setDefaultLogFormat, type LogFormat, type LogLevel } from '../util/log.ts';

/**
 * Apply `cmd`'s logging flags (see the module comment); a command without
 * them is left alone. Meant for commander's `preAction` hook.
 */
export function applyLogOptions(cmd: Command): void {
  const opts = cmd.opts<{ logLevel?: LogLevel; logFormat?: LogFormat; verbosity?: number }>();
  if (opts.logFormat !== undefined) setDefaultLogFormat(opts.logFormat);
  if (opts.logLevel !== undefined && opts.verbosity !== undefined) cmd.setOptionValue('logLevel', moreVerbose(opts.logLevel, levelForVerbosity(opts.verbosity)));
}
