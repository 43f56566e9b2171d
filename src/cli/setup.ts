/**
 * Building the pieces a command needs from its options: the backend (with
 * the iptables variant detected or forced) and the file source.
 */
import { existsSync } from 'node:fs';
import { IptablesBackend } from '../modes/iptables/backend.ts';
import { detectVariant, SystemIptables } from '../modes/iptables/exec.ts';
import type { RenderOptions } from '../modes/iptables/render.ts';
import { IpvsBackend } from '../modes/ipvs/backend.ts';
import { SystemIpset } from '../modes/ipvs/ipset.ts';
import { RtnlLinkManager } from '../modes/ipvs/link.ts';
import { IpvsClient, IpvsUnavailableError } from '../modes/ipvs/netlink.ts';
import { ProcSysctls } from '../modes/ipvs/sysctl.ts';
import type { Backend } from '../modes/types.ts';
import type { IpvsInspectIO } from '../modes/ipvs/live.ts';
import { DEFAULT_SERVICE_CIDR } from '../model/allocate.ts';
import { FileSource } from '../sources/file.ts';
import type { Snapshot } from '../model/types.ts';
import { silentLogger, type Logger } from '../util/log.ts';
import type { IpvsCliOptions, KernelOptions, RenderCliOptions } from './options.ts';
import { DroverError } from '../errors.ts';

/** A one-line error for the user; main.ts prints it and exits 1. */
export class UsageError extends DroverError {
  override name = 'UsageError';
}

/** Render options from the CLI flags. */
export function renderConfig(opts: RenderCliOptions): RenderOptions {
  return { masqueradeAll: opts.masqueradeAll, ...(opts.clusterCidr ? { clusterCIDR: opts.clusterCidr } : {}) };
}

/**
 * The iptables I/O for the command's flags: `--iptables-backend` (or the
 * detected variant) and `--netns`.
 * @throws UsageError when not root.
 */
export async function createIptablesExec(opts: KernelOptions, logger: Logger): Promise<SystemIptables> {
  if (process.getuid?.() !== 0) throw new UsageError('reading or programming iptables needs root (CAP_NET_ADMIN); run drover as root');
  if (opts.netns && !existsSync(`/run/netns/${opts.netns}`)) {
    throw new UsageError(`network namespace ${opts.netns} does not exist (ip netns list shows the named ones)`);
  }
  const variant = opts.iptablesBackend === 'auto' ? await detectVariant(opts.netns) : opts.iptablesBackend;
  logger.debug({ iptables: variant, netns: opts.netns }, 'using iptables-%s', variant);
  return new SystemIptables({ variant, ...(opts.netns ? { netns: opts.netns } : {}) });
}

/** What createBackend reads: the kernel options, and for IPVS mode its own and `--service-cidr` (defaults when absent, e.g. for cleanup). */
export type BackendCliOptions = KernelOptions & Partial<IpvsCliOptions> & { readonly serviceCidr?: string };

/**
 * The backend of the commands that sync (`run`, `sync`): {@link createBackend}
 * with the render options of the flags. Warns, as kube-proxy does, when the
 * rules will masquerade nothing but hairpin traffic because neither
 * `--cluster-cidr` nor `--masquerade-all` is set. (`cleanup` renders nothing,
 * so it calls createBackend itself and gets no such warning.)
 * @throws UsageError as createBackend does.
 */
export async function createSyncBackend(opts: BackendCliOptions & RenderCliOptions, logger: Logger): Promise<Backend> {
  const render = renderConfig(opts);
  const backend = await createBackend(opts, render, logger);
  if (render.clusterCIDR === undefined && !render.masqueradeAll) {
    logger.warn('neither --cluster-cidr nor --masquerade-all is set: traffic to ClusterIPs is not masqueraded (only hairpin traffic is)');
  }
  return backend;
}

/**
 * The backend for `opts.mode`; `render` only matters to syncs.
 * @throws UsageError when not root; for IPVS mode also when the kernel has no
 *   IPVS or `--netns` is given.
 */
export async function createBackend(opts: BackendCliOptions, render: RenderOptions, logger: Logger): Promise<Backend> {
  if (opts.mode === 'ipvs') return createIpvsBackend(opts, render, logger);
  const exec = await createIptablesExec(opts, logger);
  logger.info({ mode: opts.mode, iptables: exec.variant, netns: opts.netns }, 'using iptables-%s', exec.variant);
  return new IptablesBackend({ exec, render, logger });
}

/**
 * IPVS mode's backend, in this process's network namespace: netlink sockets
 * (IPVS, rtnetlink) always act in the namespace of the process that opened
 * them, so `--netns` cannot work; start drover inside the namespace instead.
 * Checks in this order: `--netns`, IPVS in the kernel, root.
 * @throws UsageError (one line) for each of them.
 */
export async function createIpvsBackend(opts: BackendCliOptions, render: RenderOptions, logger: Logger): Promise<IpvsBackend> {
  const { ipvs, iptables } = await openIpvsMode(opts, logger);
  const scheduler = opts.ipvsScheduler ?? 'rr';
  const gracefulPeriodMs = opts.ipvsGracefulPeriod ?? 900_000;
  const serviceCIDR = opts.serviceCidr ?? DEFAULT_SERVICE_CIDR;
  logger.info({ mode: 'ipvs', iptables: iptables.variant, scheduler, gracefulPeriodMs, serviceCidr: serviceCIDR }, 'using IPVS mode (scheduler %s)', scheduler);
  return new IpvsBackend({
    ipvs,
    reopenIpvs: () => IpvsClient.open(),
    ipset: new SystemIpset(),
    iptables,
    links: new RtnlLinkManager(),
    sysctls: new ProcSysctls(),
    render,
    scheduler,
    serviceCIDR,
    gracefulPeriodMs,
    logger,
  });
}

/**
 * IPVS mode works in drover's own network namespace: netlink sockets (IPVS,
 * rtnetlink) act in the namespace of the process that opened them.
 * @throws UsageError when `--netns` is given, naming the way to do it instead.
 */
function refuseNetnsInIpvsMode(opts: KernelOptions): void {
  if (opts.netns) {
    throw new UsageError(
      `--netns cannot be used with --mode ipvs (IPVS and kube-ipvs0 are programmed over netlink in drover's own network namespace); start drover inside the namespace instead: ip netns exec ${opts.netns} drover ... --mode ipvs`,
    );
  }
}

/**
 * An IPVS generic netlink client.
 * @throws UsageError when the kernel has no IPVS.
 */
async function openIpvs(): Promise<IpvsClient> {
  try {
    return await IpvsClient.open();
  } catch (err) {
    if (err instanceof IpvsUnavailableError) {
      throw new UsageError('--mode ipvs: IPVS is not available in this kernel (no generic netlink family IPVS; is the ip_vs module installed?); use --mode iptables');
    }
    throw err;
  }
}

/**
 * IPVS mode's netlink client and iptables, checked in this order: `--netns`,
 * IPVS in the kernel, root.
 * @throws UsageError (one line) for each of them.
 */
async function openIpvsMode(opts: KernelOptions, logger: Logger): Promise<{ ipvs: IpvsClient; iptables: SystemIptables }> {
  refuseNetnsInIpvsMode(opts);
  const ipvs = await openIpvs();
  try {
    return { ipvs, iptables: await createIptablesExec(opts, logger) };
  } catch (err) {
    ipvs.close();
    throw err;
  }
}

/** The I/O of the read-only commands in IPVS mode; `close` ends its netlink sockets. */
export interface IpvsInspectSession extends IpvsInspectIO {
  close(): void;
}

/**
 * The I/O the inspect commands read IPVS mode's state with, in this
 * process's network namespace: the same checks, in the same order, as
 * {@link createIpvsBackend}.
 * @throws UsageError for `--netns`, a kernel without IPVS, or no root.
 */
export async function createIpvsInspectIO(opts: KernelOptions, logger: Logger): Promise<IpvsInspectSession> {
  const { ipvs, iptables } = await openIpvsMode(opts, logger);
  const links = new RtnlLinkManager();
  return {
    ipvs,
    ipset: new SystemIpset(),
    links,
    iptables,
    sysctls: new ProcSysctls(),
    close: () => {
      ipvs.close();
      links.close();
    },
  };
}

/** A source's snapshot and the objects skipped. */
export interface LoadedSource {
  readonly snapshot: Snapshot;
  /** One line per skipped object or dropped entry (as `drover render` prints them). */
  readonly problems: string[];
  /** The parts of the source that could not be read (files, documents, objects); empty when it was read whole. */
  readonly incomplete: readonly string[];
}

/**
 * Read the source as a sync of `drover run` with the same flags would.
 * @throws Error when the source path is missing or the service CIDR is invalid.
 */
export async function loadSource(opts: RenderCliOptions): Promise<LoadedSource> {
  const loaded = await createSource(opts, silentLogger()).load();
  return { snapshot: loaded.snapshot, problems: [...loaded.errors, ...loaded.warnings].map((e) => e.message), incomplete: loaded.incomplete };
}

/** The file source for `--source`. */
export function createSource(opts: RenderCliOptions, logger: Logger): FileSource {
  return new FileSource(opts.source, { serviceCIDR: opts.serviceCidr, logger });
}
