/**
 * drover's whole configuration, as `run` and `sync` use it: one typed
 * object with a section per concern, that the flags and kube-proxy's
 * configuration file both fill (cli/options.ts and cli/config-file.ts parse
 * them; cli/proxy-config.ts gathers the parsed values into it).
 *
 * Each mode's own settings form a section of their own, keyed by the mode's
 * name and typed by the mode: the mode declares its flags
 * (ModeDriver.options) and reads its section alone. So this file names no
 * mode and imports none, and a new mode adds a section without touching it.
 */
import type { KernelOptions } from './kernel.ts';
import type { RenderCliOptions } from './render-cli.ts';
import type { ServerCliOptions } from './server.ts';
import type { ConntrackCliOptions } from './sync.ts';

/** One mode's own settings: the values of the flags the mode declares, by their camelCase names (e.g. IPVS mode's `ipvsScheduler`). */
export type ModeSection = Readonly<Record<string, unknown>>;

/** The sync periods of `run` and `sync`, ms (`--min-sync-period`, `--sync-period`, `--full-sync-period`). */
export interface SyncPeriods {
  readonly minSyncPeriod: number;
  readonly syncPeriod: number;
  /** `run` only. */
  readonly fullSyncPeriod?: number;
}

/** drover's configuration (see the module comment). */
export interface ProxyConfig {
  /** `--mode`, the iptables variant, the namespace, the log settings. */
  readonly kernel: KernelOptions;
  /** The source and the settings every mode renders with. */
  readonly render: RenderCliOptions;
  readonly sync: SyncPeriods;
  /** kube-proxy's `conntrack.*`; a setting absent or 0 leaves the kernel's value alone. */
  readonly conntrack: Partial<ConntrackCliOptions>;
  /** `run`'s HTTP servers; absent for `sync`. */
  readonly server?: Omit<ServerCliOptions, 'nodeportAddresses'>;
  /** Each mode's section, by mode name: every mode's, for a flag may be given with another `--mode` (cli/setup.ts refuses that for a switch). */
  readonly modes: Readonly<Record<string, ModeSection>>;
}
