/**
 * IPVS mode's flags: `--ipvs-scheduler` and `--ipvs-graceful-period`, as
 * kube-proxy's `--ipvs-scheduler` and the graceful termination of its IPVS
 * proxier (pkg/proxy/ipvs/graceful_termination.go).
 */
import { InvalidArgumentError, Option } from 'commander';
import { parseDurationMs } from '../../util/duration.ts';

/** The IPVS schedulers of the Linux kernel (modules ip_vs_<name>), the values --ipvs-scheduler accepts. */
export const IPVS_SCHEDULERS = ['rr', 'wrr', 'lc', 'wlc', 'lblc', 'lblcr', 'dh', 'sh', 'sed', 'nq', 'fo', 'ovf', 'mh', 'twos'] as const;

/** Longest `--ipvs-graceful-period`: one day. */
export const MAX_IPVS_GRACEFUL_PERIOD_MS = 86_400_000;

/** Options of IPVS mode (`run` and `sync`). Times in milliseconds. */
export type IpvsCliOptions = {
  /** `--ipvs-scheduler`, one of {@link IPVS_SCHEDULERS}. */
  readonly ipvsScheduler: string;
  /** `--ipvs-graceful-period`, 0 to {@link MAX_IPVS_GRACEFUL_PERIOD_MS}. */
  readonly ipvsGracefulPeriod: number;
};

/**
 * `--ipvs-graceful-period`: a Go duration (util/duration.ts) of at most one
 * day; 0 deletes a removed real server at once.
 * @throws InvalidArgumentError naming the value.
 */
function gracefulPeriodArg(value: string): number {
  try {
    return parseDurationMs(value, { maxMs: MAX_IPVS_GRACEFUL_PERIOD_MS, maxText: '24h' });
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}

/** --ipvs-scheduler, --ipvs-graceful-period (used with --mode ipvs). */
export function ipvsOptions(): Option[] {
  return [
    new Option('--ipvs-scheduler <name>', 'IPVS scheduler of every virtual server (--mode ipvs)').choices([...IPVS_SCHEDULERS]).default('rr'),
    new Option(
      '--ipvs-graceful-period <duration>',
      'longest wait for the connections of a removed endpoint to end before its real server is deleted (--mode ipvs)',
    )
      .default(900_000, '15m')
      .argParser(gracefulPeriodArg),
  ];
}

/** `--ipvs-scheduler` of `run`, for commands that compare with what `run` programs. */
export function ipvsSchedulerOption(): Option {
  return ipvsOptions().find((o) => o.long === '--ipvs-scheduler')!;
}
