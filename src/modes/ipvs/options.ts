/**
 * IPVS mode's flags: `--ipvs-scheduler` and `--ipvs-graceful-period`, as
 * kube-proxy's `--ipvs-scheduler` and the graceful termination of its IPVS
 * proxier (pkg/proxy/ipvs/graceful_termination.go).
 */
import { InvalidArgumentError, Option } from 'commander';
import { parseDurationMs } from '../../util/duration.ts';
import { modeSection, type ProxyConfig } from '../../config/proxy-config.ts';

/** The mode's name, its key in ProxyConfig.modes. */
export const IPVS_MODE = 'ipvs';

/** `--ipvs-scheduler` when not given. */
export const DEFAULT_IPVS_SCHEDULER = 'rr';

/** `--ipvs-graceful-period` when not given: 15 minutes. */
export const DEFAULT_IPVS_GRACEFUL_PERIOD_MS = 900_000;

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
 * IPVS mode's section of the configuration (config/proxy-config.ts
 * ProxyConfig.modes), read by the mode alone; a setting not in it (a
 * command given none of the mode's flags) takes its default.
 */
export function ipvsSection(modes: ProxyConfig['modes']): IpvsCliOptions {
  const section = modeSection(modes, IPVS_MODE) ?? {};
  return {
    ipvsScheduler: typeof section.ipvsScheduler === 'string' ? section.ipvsScheduler : DEFAULT_IPVS_SCHEDULER,
    ipvsGracefulPeriod: typeof section.ipvsGracefulPeriod === 'number' ? section.ipvsGracefulPeriod : DEFAULT_IPVS_GRACEFUL_PERIOD_MS,
  };
}

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
    new Option('--ipvs-scheduler <name>', 'IPVS scheduler of every virtual server (--mode ipvs)').choices([...IPVS_SCHEDULERS]).default(DEFAULT_IPVS_SCHEDULER),
    new Option(
      '--ipvs-graceful-period <duration>',
      'longest wait for the connections of a removed endpoint to end before its real server is deleted (--mode ipvs)',
    )
      .default(DEFAULT_IPVS_GRACEFUL_PERIOD_MS, '15m')
      .argParser(gracefulPeriodArg),
  ];
}

/** `--ipvs-scheduler` of `run`, for commands that compare with what `run` programs. */
export function ipvsSchedulerOption(): Option {
  return ipvsOptions().find((o) => o.long === '--ipvs-scheduler')!;
}
