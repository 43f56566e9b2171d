/**
 * The parsed options of `run` and `sync` (commander's flat object, the
 * configuration file's values already applied as flag defaults by
 * config-file.ts) gathered into the typed ProxyConfig of config/proxy-config.ts.
 */
import type { KernelOptions } from '../config/kernel.ts';
import type { ModeSection, ProxyConfig } from '../config/proxy-config.ts';
import type { RenderCliOptions } from '../config/render-cli.ts';
import type { ServerCliOptions } from '../config/server.ts';
import type { ConntrackCliOptions, SyncCliOptions } from '../config/sync.ts';
import type { ModeDriver } from '../modes/driver.ts';

const KERNEL_KEYS = ['mode', 'iptablesBackend', 'netns', 'logLevel', 'verbosity', 'logFormat'] as const satisfies readonly (keyof KernelOptions)[];
const RENDER_KEYS = [
  'source',
  'nodeportAddresses',
  'stateDir',
  'kubeconfig',
  'hostnameOverride',
  'listTimeout',
  'clusterCidr',
  'masqueradeAll',
  'serviceCidr',
  'detectLocalMode',
  'bindAddress',
  'master',
  'fileFollowExternalLinks',
  'fileSettle',
  'serviceNodePortRange',
  'conntrackTcpBeLiberal',
] as const satisfies readonly (keyof RenderCliOptions)[];
const CONNTRACK_KEYS = [
  'conntrackMaxPerCore',
  'conntrackMin',
  'conntrackTcpTimeoutEstablished',
  'conntrackTcpTimeoutCloseWait',
  'conntrackUdpTimeout',
  'conntrackUdpTimeoutStream',
] as const satisfies readonly (keyof ConntrackCliOptions)[];

/** The entries of `opts` named in `keys` that are set (not undefined). */
function pick<T>(opts: Readonly<Record<string, unknown>>, keys: readonly string[]): T {
  return Object.fromEntries(keys.filter((k) => opts[k] !== undefined).map((k) => [k, opts[k]])) as T;
}

/**
 * `opts`, the parsed options of `run` or `sync`, as a ProxyConfig: the
 * kernel, render, sync-period, conntrack and (for `run`) server settings,
 * and for each mode of `modes` the flags it declares (its `sync` options),
 * by their camelCase names, under its name. Pure.
 */
export function proxyConfig(
  opts: SyncCliOptions & Partial<ServerCliOptions> & Readonly<Record<string, unknown>>,
  modes: ReadonlyArray<Pick<ModeDriver, 'name' | 'options'>>,
): ProxyConfig {
  const sections: Record<string, ModeSection> = {};
  for (const m of modes) sections[m.name] = pick<ModeSection>(opts, m.options.sync().map((o) => o.attributeName()));
  const server = opts.metricsBindAddress !== undefined && opts.healthzBindAddress !== undefined;
  return {
    kernel: pick<KernelOptions>(opts, KERNEL_KEYS),
    render: pick<RenderCliOptions>(opts, RENDER_KEYS),
    sync: { minSyncPeriod: opts.minSyncPeriod, syncPeriod: opts.syncPeriod, ...(opts.fullSyncPeriod !== undefined ? { fullSyncPeriod: opts.fullSyncPeriod } : {}) },
    conntrack: pick<Partial<ConntrackCliOptions>>(opts, CONNTRACK_KEYS),
    ...(server ? { server: { metricsBindAddress: opts.metricsBindAddress!, healthzBindAddress: opts.healthzBindAddress! } } : {}),
    modes: sections,
  };
}
