/**
 * The wiring the commands share: the backend of `--mode` (from the mode's
 * driver, modes/registry.ts), the source of `--source` (sources/select.ts), the render flags, and the
 * one-line usage error. No command imports another command's file; what
 * two of them need lives here or in the mode's driver.
 */
import { Option } from 'commander';
import { DroverError, UsageError } from '../errors.ts';
import { DEFAULT_STATUS_FILE } from '../inspect/status-path.ts';
import type { BackendConfig, ModeDriver } from '../modes/driver.ts';
import { modeSection, type ProxyConfig } from '../config/proxy-config.ts';
import type { RenderOptions } from '../config/render.ts';
import { allModes, modeDriver } from '../modes/registry.ts';
import { renderConfig } from '../modes/shared/render-config.ts';
import type { Backend } from '../proxier/backend.ts';
import { createSource, loadSource, type LoadedSource } from '../sources/load.ts';
import { sourceKind } from '../sources/select.ts';
import type { Logger } from '../util/log.ts';
import { acquireInstanceLock, InstanceLockedError, type InstanceLock } from '../util/instance-lock.ts';
import { renderOptions } from './options.ts';
import { applyConntrackSettings, conntrackSysctls, type ConntrackSettings } from '../conntrack/sysctls.ts';
import { namespaceSysctls } from '../modes/shared/sysctls.ts';

export { createSource, loadSource, renderConfig, sourceKind, type LoadedSource };

/**
 * The backend of the commands that sync (`run`, `sync`, `takeover`):
 * {@link createBackend} with the render options of `config`. Warns, as
 * kube-proxy does, when the rules will masquerade nothing but hairpin
 * traffic because neither `--cluster-cidr` nor `--masquerade-all` is set.
 * (`cleanup` renders nothing, so it calls createBackend itself and gets no
 * such warning.)
 * @throws UsageError as createBackend does, and for a switch of another mode (refuseForeignSwitches);
 *   Error for a `--nodeport-addresses primary` not yet resolved (node-settings.ts).
 */
export async function createSyncBackend(config: ProxyConfig, logger: Logger): Promise<Backend> {
  refuseForeignSwitches(config.kernel.mode, config.modes);
  // node-settings.ts replaces it with the Node's primary IPs; left as it is, it would mean every address.
  if (config.render.nodeportAddresses?.primary === true) throw new Error('--nodeport-addresses primary was not resolved from the Node');
  const render = renderConfig(config.render);
  const backend = await createBackend(config, render, logger);
  if (render.clusterCIDR === undefined && !render.masqueradeAll) {
    logger.warn('neither --cluster-cidr nor --masquerade-all is set: traffic to ClusterIPs is not masqueraded (only hairpin traffic is)');
  }
  return backend;
}

/**
 * The conntrack settings of `run` and `sync` (conntrack/sysctls.ts), applied
 * in the programmed namespace before the first sync, as kube-proxy applies
 * them before its proxier starts, and once the namespace's lock is held (a
 * refused second drover changes nothing); nothing is read or written when none is
 * asked for. Without `--conntrack-tcp-be-liberal`, a namespace whose
 * nf_conntrack_tcp_be_liberal is already 1 gets a warning: kube-proxy would
 * then leave out the INVALID drop, drover follows its setting.
 * @throws Error naming a sysctl that cannot be set.
 */
export async function applyConntrackOptions(config: Pick<ProxyConfig, 'conntrack' | 'render' | 'kernel'>, logger: Logger): Promise<void> {
  const { conntrack, kernel } = config;
  const settings: ConntrackSettings = {
    maxPerCore: conntrack.conntrackMaxPerCore ?? 0,
    min: conntrack.conntrackMin ?? 0,
    tcpEstablishedTimeout: (conntrack.conntrackTcpTimeoutEstablished ?? 0) / 1000,
    tcpCloseWaitTimeout: (conntrack.conntrackTcpTimeoutCloseWait ?? 0) / 1000,
    udpTimeout: (conntrack.conntrackUdpTimeout ?? 0) / 1000,
    udpStreamTimeout: (conntrack.conntrackUdpTimeoutStream ?? 0) / 1000,
    tcpBeLiberal: config.render.conntrackTcpBeLiberal === true,
  };
  const sysctls = namespaceSysctls(kernel.netns);
  if (conntrackSysctls(settings, 1).length > 0) await applyConntrackSettings(settings, { sysctls, ...(kernel.netns !== undefined ? { netns: kernel.netns } : {}) }, logger);
  if (!settings.tcpBeLiberal && (await sysctls.read(TCP_BE_LIBERAL).catch(() => undefined)) === '1') {
    logger.warn({ sysctl: TCP_BE_LIBERAL }, 'nf_conntrack_tcp_be_liberal is 1 but --conntrack-tcp-be-liberal (conntrack.tcpBeLiberal) is not set: the drop of conntrack-INVALID packets is written anyway');
  }
}

/** The sysctl of conntrack.tcpBeLiberal. */
const TCP_BE_LIBERAL = 'net.netfilter.nf_conntrack_tcp_be_liberal';

/**
 * Refuse a switch that only another mode takes (ModeDriver.exclusiveSwitches),
 * e.g. `--nodeport-localhost` with `--mode nftables`: a switch turned on in
 * the section of a mode other than `mode`.
 * @throws UsageError naming the flag, the mode it is for and the mode in use.
 */
export function refuseForeignSwitches(mode: string, modes: ProxyConfig['modes']): void {
  const driver = modeDriver(mode);
  for (const other of allModes()) {
    if (other === driver) continue;
    for (const [flag, what] of Object.entries(other.exclusiveSwitches ?? {})) {
      const attribute = flag.replace(/^--/, '').replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
      if (modeSection(modes, other.name)?.[attribute] === true) throw new UsageError(`${flag} is for --mode ${other.name} only: ${driver.title} mode has no ${what}`);
    }
  }
}

/**
 * The backend for `config.kernel.mode` (modes/registry.ts); `render` only matters to syncs.
 * @throws UsageError when the mode cannot run here (the driver's createBackend).
 */
export async function createBackend(config: BackendConfig, render: RenderOptions, logger: Logger): Promise<Backend> {
  return modeDriver(config.kernel.mode).createBackend(config, render, logger);
}

/** The Proxier option that adds mode `mode`'s own fields to its "sync done" log line (ModeDriver.syncLogFields); none when the mode adds nothing. */
export function syncLogFieldsOf(mode: string): { syncLogFields?: NonNullable<ModeDriver['syncLogFields']> } {
  const fields = modeDriver(mode).syncLogFields;
  return fields !== undefined ? { syncLogFields: fields } : {};
}

/**
 * `chains`' optional `--source` (a mode whose kernel state keeps no service
 * names, such as IPVS, names it through the source), `--service-cidr`
 * (for the ClusterIPs drover allocates) and `--service-node-port-range`
 * (which NodePorts the source's Services keep).
 */
export function chainsSourceOptions(): Option[] {
  return [
    new Option(
      '-s, --source <path>',
      'manifest file or folder, to name kernel state that carries no service names (IPVS virtual servers) by its service port, and each endpoint derived from a Pod by its Pod',
    ),
    ...renderOptions().filter((o) => o.long === '--service-cidr' || o.long === '--service-node-port-range'),
  ];
}

/**
 * The flags every mode adds to the commands that compare with what `run`
 * programs (`render`, `diff`), each once (e.g. `--ipvs-scheduler`).
 */
export function compareOptions(): Option[] {
  return uniqueOptions(allModes().flatMap((m) => m.options.compare()));
}

/** The flags every mode adds to `run` and `sync`, each once. */
export function syncModeOptions(): Option[] {
  return uniqueOptions(allModes().flatMap((m) => m.options.sync()));
}

/** `options` without a second Option of the same long flag. */
function uniqueOptions(options: readonly Option[]): Option[] {
  const seen = new Set<string>();
  return options.filter((o) => !seen.has(o.long ?? o.flags) && seen.add(o.long ?? o.flags));
}

/** --status-file, for `run` (writes it) and `status` (reads it). */
export function statusFileOption(): Option {
  return new Option('--status-file <path>', 'status file, written after every sync by drover run and read by drover status').default(
    DEFAULT_STATUS_FILE,
  );
}

/** What every mode adds to a command's `--help` text (ModeDriver.help), joined: e.g. "; with --mode ipvs also …". */
export function modeHelp(command: keyof ModeDriver['help']): string {
  return allModes()
    .map((m) => m.help[command])
    .join('');
}

/** What each command that takes the namespace's lock says when another drover holds it. */
const LOCKED_ADVICE = {
  run: 'two drovers would program the same rules against each other; stop it first',
  sync: 'two drovers would program the same rules against each other; stop it first',
  cleanup: 'it would put back what cleanup removes; stop it first, or give --force',
  takeover: 'two drovers would program the same rules against each other; stop it first',
} as const;

/**
 * Take the single-instance lock of the network namespace `opts.netns`
 * (util/instance-lock.ts) for `command`, held until the process exits
 * (released then, also after an error; a process killed outright leaves a
 * stale lock, which the next taker sees through).
 * @param how.force with the lock held by another live drover, warn and go
 *   on without it (`cleanup --force`) instead of refusing.
 * @param how.close a backend already made, closed before a refusal is
 *   thrown (an open netlink socket would keep the process from exiting).
 * @param how.dir the lock folder (default: instance-lock.ts LOCK_DIR).
 * @returns the lock, or undefined when `force` went on without it, or when
 *   the lock folder cannot be written (logged: drover then runs as it did
 *   before it had a lock).
 * @throws DroverError, one line naming the holder's command, PID and mode,
 *   and what to do, while another live drover holds it (unless `force`).
 */
export async function lockNamespace(
  command: keyof typeof LOCKED_ADVICE,
  opts: { readonly mode: string; readonly netns?: string | undefined },
  logger: Logger,
  how: { readonly force?: boolean; readonly close?: Pick<Backend, 'close'> | undefined; readonly dir?: string } = {},
): Promise<InstanceLock | undefined> {
  let lock: InstanceLock;
  try {
    lock = await acquireInstanceLock({ command, mode: opts.mode, netns: opts.netns, ...(how.dir !== undefined ? { dir: how.dir } : {}) });
  } catch (err) {
    if (err instanceof InstanceLockedError && how.force === true) {
      logger.warn({ holder: err.holder }, `${err.message}; going on anyway (--force)`);
      return undefined;
    }
    if (!(err instanceof DroverError)) {
      // A lock folder that cannot be written (a read-only /run) must not keep drover from serving, as before there was a lock.
      logger.warn({ err: (err as Error).message }, 'cannot take the lock of the network namespace; going on without it: another drover there is not refused');
      return undefined;
    }
    await how.close?.close?.();
    if (!(err instanceof InstanceLockedError)) throw err;
    throw new DroverError(`${err.message}: ${LOCKED_ADVICE[command]}`, { cause: err });
  }
  if (lock.replaced) logger.info({ lock: lock.path, was: lock.replaced }, 'took over the lock of a drover that is gone');
  process.once('exit', () => lock.releaseSync());
  return lock;
}
