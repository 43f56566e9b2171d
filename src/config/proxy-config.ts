/**
 * drover's whole configuration, as `run` and `sync` (and `takeover`) use
 * it: one typed object with a section per concern, that the flags and
 * kube-proxy's configuration file both fill (cli/options.ts and
 * cli/config-file.ts parse them; cli/proxy-config.ts gathers the parsed
 * values into it once and checks it). From there on, every layer below
 * cli/ takes this object or one of its sections, never the parsed flags.
 *
 * Each mode's own settings form a section of their own, keyed by the mode's
 * name and typed by the mode: the mode declares its flags
 * (ModeDriver.options) and reads its section alone. So this file names no
 * mode and imports none, and a new mode adds a section without touching it.
 * The settings kube-proxy's file keeps per mode but that mean the same in
 * every mode (`iptables.syncPeriod`, `nftables.masqueradeAll`, …) are not a
 * mode's: the file's section of the mode in use fills the one neutral
 * setting (cli/kube-proxy-fields.ts).
 */
import type { DnsCliOptions } from './dns.ts';
import type { KernelOptions } from './kernel.ts';
import type { RenderCliOptions } from './render-cli.ts';
import type { ServerCliOptions } from './server.ts';
import type { ConntrackCliOptions } from './sync.ts';

/** One mode's own settings: the values of the flags the mode declares, by their camelCase names (e.g. IPVS mode's `ipvsScheduler`). */
export type ModeSection = Readonly<Record<string, unknown>>;

/** The sync periods of `run`, ms (`--min-sync-period`, `--sync-period`, `--full-sync-period`). */
export interface SyncPeriods {
  readonly minSyncPeriod: number;
  readonly syncPeriod: number;
  readonly fullSyncPeriod?: number;
}

/** drover's configuration (see the module comment). */
export interface ProxyConfig {
  /** `--mode`, the iptables variant, the namespace, the log settings. */
  readonly kernel: KernelOptions;
  /** The source and the settings every mode renders with. */
  readonly render: RenderCliOptions;
  /** `run`'s sync periods; absent for `sync --once` and `takeover`, which sync once. */
  readonly sync?: SyncPeriods;
  /** kube-proxy's `conntrack.*`; a setting absent or 0 leaves the kernel's value alone. */
  readonly conntrack: Partial<ConntrackCliOptions>;
  /** `run`'s HTTP servers; absent for the commands that serve nothing. */
  readonly server?: Omit<ServerCliOptions, 'nodeportAddresses'>;
  /** `run`'s Service DNS settings; absent for the other commands (and off unless `dnsAddress` is set). */
  readonly dns?: DnsCliOptions;
  /** Each mode's section, by mode name: every mode's, for a flag may be given with another `--mode` (cli/setup.ts refuses that for a switch). */
  readonly modes: Readonly<Record<string, ModeSection>>;
}

/** The section of mode `name` in `modes`, or undefined when there is none (a command given none of the mode's flags, such as `cleanup`). */
export function modeSection(modes: ProxyConfig['modes'], name: string): ModeSection | undefined {
  return Object.hasOwn(modes, name) ? modes[name] : undefined;
}
