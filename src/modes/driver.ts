/**
 * What a proxy mode brings to drover's commands: one driver per mode, listed
 * in registry.ts. Everything that is specific to a mode (its backend, what
 * `render` prints, reading the live kernel for `chains`, `trace`, `diff` and
 * `status`, and its command-line flags) sits behind
 * this interface, in the mode's own folder; the commands in src/cli/ ask the
 * registry for the driver of `--mode` and never name a mode themselves.
 *
 * The hooks that program the kernel or compare it with desired state
 * ({@link ModeDriver.createBackend}, {@link ModeDriver.runInfo},
 * {@link ModeDriver.render}, {@link ModeDriver.diff},
 * {@link ModeDriver.status}) take the configuration (config/proxy-config.ts
 * ProxyConfig, or the part of it they read): each driver reads its own
 * section, `modes[its name]`, holding the flags it declared in
 * {@link ModeDriver.options}, and no other mode's. The hooks that only read
 * the kernel (`chains`, `trace`, `survey`) take its kernel options (the
 * survey also the render section's `serviceCidr`, as the cleanup it
 * foresees).
 */
import type { ModeMetricsFactory } from '../server/metrics.ts';
import type { Option } from 'commander';
import type { KernelOptions } from '../config/kernel.ts';
import type { RenderCliOptions } from '../config/render-cli.ts';
import type { ModeSection, ProxyConfig } from '../config/proxy-config.ts';
import type { RuleCounts, RunInfo, StatusRecord } from '../inspect/status.ts';
import type { TraceContext, TraceResult } from '../inspect/trace.ts';
import type { TraceFormat } from '../inspect/trace-format.ts';
import type { IPFamily, Snapshot } from '../model/types.ts';
import type { Logger } from '../util/log.ts';
import type { RenderOptions } from '../config/render.ts';
import type { Backend, ModeSyncDetail } from '../proxier/backend.ts';

/** The options object of a command, as a driver sees it: the shared flags plus whatever the mode declared. */
export type ModeOptions = KernelOptions & Readonly<Record<string, unknown>>;

/**
 * What a mode's backend is made from: the kernel section, the render
 * settings a backend reads, and the modes' sections, of which the mode
 * reads its own. A ProxyConfig is one; `cleanup` and `takeover`'s removal
 * of the old mode's state pass no section for the mode (none of its flags
 * was given), and the mode then removes whatever it may have written.
 */
export interface BackendConfig {
  readonly kernel: KernelOptions;
  /** `--nodeport-addresses`, `--cluster-cidr` (for the IPv6 family's rules), `--service-cidr`; none for cleanup. */
  readonly render: Pick<RenderCliOptions, 'nodeportAddresses' | 'clusterCidr'> & { readonly serviceCidr?: string };
  readonly modes: ProxyConfig['modes'];
}

/**
 * What the rules should be, as `render`, `diff` and `status` compare the
 * kernel with them: the source and render settings and the modes' sections
 * (ProxyConfig's), of which the mode reads its own.
 */
export type DesiredConfig = Pick<ProxyConfig, 'render' | 'modes'>;

/** `chains`' own flags: `--json`, and its optional source with the flags that decide what the source serves. */
export type ChainsSourceOptions = { readonly json: boolean; readonly source?: string } & Pick<RenderCliOptions, 'serviceCidr' | 'serviceNodePortRange'>;

/** What `drover render` prints in a mode. */
export interface RenderedMode {
  /** The whole output, ending in a newline. */
  readonly text: string;
  /** One line per service port left out of the rendering (stderr; the command then exits 3). */
  readonly leftOut: readonly string[];
}

/** What `drover diff` finds in a mode. */
export interface ModeDrift {
  /** The report, ending in a newline ("no differences\n" when equal). */
  readonly text: string;
  /** True when the kernel differs from desired state. */
  readonly differs: boolean;
  /** One line per skipped object or dropped entry of the source. */
  readonly problems: readonly string[];
  /** The parts of the source that could not be read; empty when whole. */
  readonly incomplete: readonly string[];
}

/** The mode's part of `drover status`. */
export interface ModeStatus {
  /** drover-owned rules in the live kernel, per table (or kind of chain), in the order `status` prints them. */
  readonly rules: RuleCounts;
  /** Differences with the recorded source, or why they could not be counted. */
  readonly drift: { readonly differences: number } | { readonly error: string };
  /** Lines of the mode's own state (`name: value`), printed after `services`. */
  readonly lines: ReadonlyArray<readonly [string, string]>;
}

/** What `drover trace` walks in a mode. */
export interface ModeTrace {
  readonly ctx: TraceContext;
  /** Where the line numbers and state come from, printed under the packet. */
  readonly where: string;
  /** A note for stderr (e.g. state the trace does not evaluate); "" for none. */
  readonly note: string;
  /** How the steps of the mode's dataplane print (`ctx.dataplane`); absent when it has none. */
  readonly format?: TraceFormat;
}

/** What `drover trace --kernel` found: the kernel's own path for one real probe, against the evaluator's answer. */
export interface ModeKernelTrace {
  /** The kernel's part of the text, ending in MATCH or MISMATCH and a newline. */
  readonly text: string;
  /** The same for `--json`. */
  readonly json: unknown;
  /** Whether the kernel took one of the evaluator's branches, with its verdict. */
  readonly match: boolean;
}

/** Options of `drover trace --kernel`. */
export type KernelTraceOptions = ModeOptions & {
  /** `--probe-from`: the namespace a `--src` outside the node is sent from. */
  readonly probeFrom?: string;
};

/** Options of a mode on fakes ({@link ModeDriver.fake}). */
export interface FakeModeOptions {
  /** The cluster CIDR and the masquerade options, as `run` passes them. */
  readonly render: RenderOptions;
  /**
   * The node's own IPv4 addresses, as `run` finds them on the host's
   * interfaces: where NodePorts answer, and the addresses the trace takes
   * as local.
   */
  readonly nodeAddresses: readonly string[];
  /** The Service CIDR (`--service-cidr`); default 10.96.0.0/12, as `run`'s (model/allocate.ts). */
  readonly serviceCIDR?: string;
}

/**
 * A mode's backend on in-memory fakes of its kernel interfaces (the
 * modes' fake.ts: knftables' Fake, kube-proxy's fake iptables and IPVS),
 * with the trace of what the fakes hold: what the cross-mode tests run, so
 * that a mode in the registry gets them without a test naming it.
 */
export interface FakeMode {
  /** The backend `run` would use, writing to the fakes. */
  readonly backend: Backend;
  /**
   * Every text handed to the fakes so far, in order: restore payloads and
   * nft scripts as written, and one text per log of netlink, address and
   * sysctl writes (one line per write).
   */
  written(): string[];
  /** What `drover trace` walks on the fakes' state now (IPv4), as {@link ModeDriver.trace} reads the kernel. */
  trace(): Promise<TraceContext>;
}

/**
 * What of one mode's own kernel state a network namespace holds
 * ({@link ModeDriver.survey}): what `drover takeover` finds before it moves
 * a node from one mode (or from kube-proxy's layout of that mode) to another.
 */
export interface ModeSurvey {
  /**
   * One line per part of the mode's state found, e.g.
   * "iptables-nft IPv4: 23 chains, 6 hook rules"; empty when the namespace
   * holds none of it.
   */
  readonly found: readonly string[];
  /**
   * What the survey could not read, one line each (e.g. "IPVS virtual
   * servers: not read"); such state is never taken as absent.
   */
  readonly unread: readonly string[];
  /**
   * Parts of the mode's state found where its cleanup does not reach, one
   * line each (e.g. kube-proxy's layout in the iptables variant drover does
   * not use here); a takeover refuses while any is there.
   */
  readonly elsewhere?: readonly string[];
  /**
   * State like the mode's that is another program's, one line each (e.g.
   * a virtual server outside IPVS mode's layout): its cleanup leaves it.
   */
  readonly ignored?: readonly string[];
  /**
   * Why this state cannot be checked and removed from here, one line (e.g.
   * virtual servers that cannot be read with `--netns`); a takeover away
   * from the mode refuses while it is set and the mode's state is there.
   */
  readonly cannotRemove?: string;
}

/** What {@link ModeDriver.drain} waited for. */
export interface DrainReport {
  /** Connections that only the mode's own state carried when the wait began. */
  readonly connections: number;
  /** Those still open when the wait ended (0: drained); its cleanup cuts them. */
  readonly left: number;
  /** How long it waited, ms. */
  readonly ms: number;
}

/**
 * A mode's part of the status file `run` writes (inspect/status.ts
 * RunInfo): fields of its own (e.g. `ipvs`), and `render`, settings of the
 * mode's own that go beside the render settings (e.g. `nodePortLocalhost`).
 */
export type ModeRunInfo = Partial<Omit<RunInfo, 'render'>> & { readonly render?: Partial<RunInfo['render']> };

/** One proxy mode, as the commands see it. */
export interface ModeDriver {
  /** The value of `--mode`, e.g. "iptables". */
  readonly name: string;
  /** How prose names it: "iptables", "IPVS" (as in "IPVS mode"). */
  readonly title: string;
  /**
   * Where the mode's packet-filter rules live: in iptables' tables, or in
   * nftables tables of its own. The node DNS of `run --dns-address` writes
   * its own rules the same way (dns/dataplane.ts).
   */
  readonly filter: 'iptables' | 'nftables';
  /**
   * `run`'s minimum sync period in this mode when neither
   * `--min-sync-period` nor the configuration file's field sets it, ms:
   * chosen from what one sync costs in the mode (docs/user-guide.md).
   */
  readonly minSyncPeriodMs: number;
  /** The flags the mode adds to the commands (e.g. a scheduler); the same Option may serve several commands. */
  readonly options: {
    /** Of `run` and `sync`. */
    readonly sync: () => Option[];
    /** Of the commands that compare with what `run` programs: `render` and `diff`. */
    readonly compare: () => Option[];
  };
  /**
   * Switches (boolean flags, by long name) of {@link options} that only this
   * mode takes, each with what it turns on ("NodePorts on 127.0.0.1"): set
   * with another `--mode`, they are a usage error naming the flag and that
   * mode (cli/setup.ts refuseForeignSwitches).
   */
  readonly exclusiveSwitches?: Readonly<Record<string, string>>;
  /** Phrases the commands' `--help` texts add for this mode (empty for the first mode, whose behaviour they describe). */
  readonly help: {
    readonly render: string;
    readonly chains: string;
    /** The shape of `chains --json` in this mode. */
    readonly chainsJson: string;
    readonly diff: string;
    readonly trace: string;
    readonly status: string;
    readonly cleanup: string;
  };
  /**
   * The backend of `run`, `sync`, `takeover` and `cleanup`, from `config`
   * (the mode's own settings: its section of `config.modes`).
   * @throws UsageError (errors.ts) when the mode cannot run here: no root, no kernel support, an option it refuses.
   */
  createBackend(config: BackendConfig, render: RenderOptions, logger: Logger): Promise<Backend>;
  /** The mode's part of the status file `run` writes, from its section of `modes` (see {@link ModeRunInfo}). */
  runInfo(modes: ProxyConfig['modes']): ModeRunInfo;
  /** The mode's section as `run` recorded it in the status file (for `status`' drift). */
  recordedSection(record: StatusRecord): ModeSection;
  /**
   * What a full sync writes onto an empty node, for `render`; pure but for
   * reading this host's addresses when `--nodeport-addresses` asks.
   * @param header comment lines to print first.
   */
  render(snapshot: Snapshot, config: DesiredConfig, header: readonly string[]): RenderedMode | Promise<RenderedMode>;
  /**
   * `chains`: the live state of the selected service ports, as text or JSON.
   * @throws UnknownServiceError (modes/iptables/chains.ts) for a selector that matches nothing.
   */
  chains(selector: string | undefined, opts: ModeOptions & ChainsSourceOptions): Promise<string>;
  /** `trace`: the live state to walk a packet through; `family` IPv6 for a connection to an IPv6 address (every mode walks both families). */
  trace(opts: ModeOptions & { readonly family?: IPFamily }): Promise<ModeTrace>;
  /**
   * `trace --kernel`: send one real probe for the connection `evaluated`
   * traced, and report the path the kernel took; absent in a mode that
   * cannot (the command then refuses `--kernel`).
   * @throws UsageError for a probe the mode cannot send; the mode's errors when the kernel reports nothing.
   */
  kernelTrace?(opts: KernelTraceOptions, evaluated: TraceResult): Promise<ModeKernelTrace>;
  /** `diff`: the live kernel against the source. @throws Error for an unreadable source or kernel. */
  diff(config: DesiredConfig & Pick<ProxyConfig, 'kernel'>): Promise<ModeDrift>;
  /**
   * `takeover`: the mode's own state in the namespace of `opts.netns` (or
   * drover's own), found by what the mode's `cleanup` would remove, so that
   * state of kube-proxy's in the same layout counts as the mode's.
   * `render`: the render settings its cleanup would be given (IPVS mode
   * reads `serviceCidr`, which decides which virtual servers are its own).
   * @throws UsageError when not root or the namespace does not exist; Error when the kernel cannot be read.
   */
  survey(opts: ModeOptions, render?: BackendConfig['render']): Promise<ModeSurvey>;
  /**
   * `takeover`, after the check and before this mode's cleanup removes its
   * state: wait, at most `boundMs`, until the connections that only this
   * mode's state carries have ended. `config` is that of the cleanup that
   * follows (no section of the mode; the render section's `serviceCidr`).
   * Absent in a mode whose established connections outlive its rules
   * (their conntrack entry holds the NAT).
   * @throws Error when the kernel cannot be read.
   */
  drain?(config: BackendConfig, boundMs: number): Promise<DrainReport>;
  /** `status`: the mode's live state and drift from the recorded source (`recorded`: the source and render settings and the mode's section `run` used). */
  status(opts: ModeOptions, recorded: DesiredConfig): Promise<ModeStatus>;
  /**
   * The mode on in-memory fakes of its kernel interfaces, with an empty
   * node; for tests. Loads the fakes on first use only.
   */
  fake(opts: FakeModeOptions): Promise<FakeMode>;
  /**
   * What the proxier's "sync done" log line adds from this mode's detail of
   * a sync (SyncResult.detail, proxier/backend.ts); absent: nothing.
   */
  readonly syncLogFields?: (detail: ModeSyncDetail | undefined) => Readonly<Record<string, unknown>>;
  /**
   * The mode's own Prometheus metrics for `drover run` (server/metrics.ts);
   * absent when it has none. Loaded when asked for: only `run` serves metrics.
   */
  readonly metrics?: () => Promise<ModeMetricsFactory>;
}

/**
 * What a driver does with rules, sources and the kernel: the methods whose
 * modules (backends, kernel clients, renderers) a driver loads when one is
 * first called, so that a command loads only what it uses.
 */
export type ModeOperations = Pick<ModeDriver, 'createBackend' | 'render' | 'chains' | 'trace' | 'kernelTrace' | 'diff' | 'survey' | 'drain' | 'status' | 'fake'>;

/**
 * Operations that load `load` (once) when one is first called and then run
 * its own; `kernelTrace` is there only when `withKernelTrace` is, `drain` only when `withDrain` is.
 */
export function operationsOnUse(load: () => Promise<ModeOperations>, withKernelTrace = false, withDrain = false): ModeOperations {
  let loaded: Promise<ModeOperations> | undefined;
  const ops = () => (loaded ??= load());
  return {
    createBackend: async (config, render, logger) => (await ops()).createBackend(config, render, logger),
    render: async (snapshot, config, header) => (await ops()).render(snapshot, config, header),
    chains: async (selector, opts) => (await ops()).chains(selector, opts),
    trace: async (opts) => (await ops()).trace(opts),
    ...(withKernelTrace ? { kernelTrace: async (opts: KernelTraceOptions, evaluated: TraceResult) => (await ops()).kernelTrace!(opts, evaluated) } : {}),
    diff: async (config) => (await ops()).diff(config),
    survey: async (opts, render) => (await ops()).survey(opts, render),
    ...(withDrain ? { drain: async (config: BackendConfig, boundMs: number) => (await ops()).drain!(config, boundMs) } : {}),
    status: async (opts, recorded) => (await ops()).status(opts, recorded),
    fake: async (opts) => (await ops()).fake(opts),
  };
}
