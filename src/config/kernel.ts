/**
 * The kernel settings of the commands that program or read the kernel
 * (`--mode`, `--iptables-backend`, `--netns`, the log flags): what the flags
 * and kube-proxy's configuration file fill (cli/options.ts,
 * cli/config-file.ts parse them), and every layer below cli/ reads.
 */
import type { LogFormat, LogLevel } from '../util/log.ts';

/** Options of the commands that program the kernel. */
export type KernelOptions = {
  /** `--mode`: the name of a mode in modes/registry.ts. */
  readonly mode: string;
  readonly iptablesBackend: 'auto' | 'nft' | 'legacy';
  readonly netns?: string;
  /** `--log-level`, made more verbose by kube-proxy's `-v` when given (cli/log-options.ts). */
  readonly logLevel: LogLevel;
  /** `--verbosity` (kube-proxy's `-v`/`--v`): klog's verbosity level, 0 or more; undefined when not given. */
  readonly verbosity?: number;
  /** `--log-format`. */
  readonly logFormat: LogFormat;
};
