/**
 * The parsed options of `run`, `sync` and `takeover` (commander's flat
 * object, the configuration file's values already applied as flag defaults
 * by config-file.ts) gathered, once, into the typed ProxyConfig of
 * config/proxy-config.ts, and checked. The commands hand that object (or
 * its sections) to everything below cli/, never the flat options.
 */
import type { Command } from 'commander';
import { relative, resolve } from 'node:path';
import type { DnsCliOptions } from '../config/dns.ts';
import type { KernelOptions } from '../config/kernel.ts';
import type { ModeSection, ProxyConfig } from '../config/proxy-config.ts';
import type { RenderCliOptions } from '../config/render-cli.ts';
import type { ConntrackCliOptions } from '../config/sync.ts';
import { UsageError } from '../errors.ts';
import type { ModeDriver } from '../modes/driver.ts';
import { allModes } from '../modes/registry.ts';
import { sourceKind, type SourceOptions } from '../sources/select.ts';
import { checkSyncPeriods } from './options.ts';

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
  'pollInterval',
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
const DNS_KEYS = ['dnsAddress', 'dnsPort', 'clusterDomain', 'dnsTtl', 'dnsUpstream', 'dnsInterceptClusterDns', 'clusterDns'] as const satisfies readonly (keyof DnsCliOptions)[];

/** The entries of `opts` named in `keys` that are set (not undefined). */
function pick<T>(opts: Readonly<Record<string, unknown>>, keys: readonly string[]): T {
  return Object.fromEntries(keys.filter((k) => opts[k] !== undefined).map((k) => [k, opts[k]])) as T;
}

/**
 * `opts`, the parsed options of `run`, `sync` or `takeover`, as a
 * ProxyConfig: the kernel, render (source settings included), conntrack,
 * and, when the command has their flags, the sync-period (`run`), server
 * (`run`) and DNS (`run`) settings; and for each mode of `modes` the flags
 * it declares (its `sync` options), by their camelCase names, under its
 * name. Pure.
 */
export function proxyConfig(opts: Readonly<Record<string, unknown>>, modes: ReadonlyArray<Pick<ModeDriver, 'name' | 'options' | 'minSyncPeriodMs'>>): ProxyConfig {
  const periods = typeof opts.syncPeriod === 'number';
  const server = opts.metricsBindAddress !== undefined && opts.healthzBindAddress !== undefined;
  return {
    kernel: kernelSection(opts),
    render: renderSection(opts),
    ...(periods ? { sync: { ...pick<NonNullable<ProxyConfig['sync']>>(opts, ['syncPeriod', 'fullSyncPeriod']), minSyncPeriod: minSyncPeriod(opts, modes) } } : {}),
    conntrack: pick<Partial<ConntrackCliOptions>>(opts, CONNTRACK_KEYS),
    ...(server ? { server: pick<NonNullable<ProxyConfig['server']>>(opts, ['metricsBindAddress', 'healthzBindAddress']) } : {}),
    ...(opts.dnsPort !== undefined ? { dns: pick<DnsCliOptions>(opts, DNS_KEYS) } : {}),
    modes: modeSections(opts, modes),
  };
}

/**
 * The minimum sync period of `opts`, ms: `--min-sync-period` or the
 * configuration file's field when either set it, else the default of the
 * mode in use (`--mode`) among `modes`. Pure.
 * @throws Error when neither is set and `--mode` names none of `modes` (commander refuses such a mode first).
 */
export function minSyncPeriod(opts: Readonly<Record<string, unknown>>, modes: ReadonlyArray<Pick<ModeDriver, 'name' | 'minSyncPeriodMs'>>): number {
  if (typeof opts.minSyncPeriod === 'number') return opts.minSyncPeriod;
  const mode = modes.find((m) => m.name === opts.mode);
  if (mode === undefined) throw new Error(`unreachable: no mode ${String(opts.mode)} for the default minimum sync period`);
  return mode.minSyncPeriodMs;
}

/** The kernel section of `opts`, the parsed options of a command that has the kernel flags: those of them that are set. Pure. */
export function kernelSection(opts: Readonly<Record<string, unknown>>): KernelOptions {
  return pick<KernelOptions>(opts, KERNEL_KEYS);
}

/** The render section of `opts`, the parsed options of a command that reads a source: the source and render settings that are set. Pure. */
export function renderSection(opts: Readonly<Record<string, unknown>>): RenderCliOptions {
  return pick<RenderCliOptions>(opts, RENDER_KEYS);
}

/**
 * The modes' sections of `opts`, the parsed options of a command: for each
 * mode of `modes`, the flags it declares for `run` and `sync` (which cover
 * those of `render` and `diff`) that `opts` has, by their camelCase names,
 * under the mode's name. Pure.
 */
export function modeSections(opts: Readonly<Record<string, unknown>>, modes: ReadonlyArray<Pick<ModeDriver, 'name' | 'options'>>): ProxyConfig['modes'] {
  const sections: Record<string, ModeSection> = {};
  for (const m of modes) sections[m.name] = pick<ModeSection>(opts, m.options.sync().map((o) => o.attributeName()));
  return sections;
}

/** What the source of `config` is made from (sources/select.ts createSource): the render section and, with a DNS server, its address. */
export function sourceOptions(config: Pick<ProxyConfig, 'render' | 'dns'>): SourceOptions {
  const dnsAddress = config.dns?.dnsAddress;
  return dnsAddress !== undefined ? { ...config.render, dnsAddress } : config.render;
}

/** The ProxyConfig of `cmd` (`run`, `sync` or `takeover`) once commander has parsed its flags: {@link proxyConfig} of its options, for every mode of the registry. */
export function commandProxyConfig(cmd: Command): ProxyConfig {
  return proxyConfig(cmd.opts(), allModes());
}

/**
 * `--dns-intercept-cluster-dns` needs `--dns-address` and is refused in IPVS
 * mode: IPVS takes a virtual server's packets at LOCAL_IN whether conntrack
 * tracks them or not, so the ClusterIP's queries would still go to the
 * Pods (NodeLocal DNSCache, for the same reason, listens only on its
 * link-local address with kube-proxy in IPVS mode: kubernetes.io, "Using
 * NodeLocal DNSCache in Kubernetes Clusters"). `--cluster-dns` needs the flag.
 * @throws UsageError naming the flag.
 */
function checkInterceptFlags(dns: DnsCliOptions, mode: string | undefined): void {
  if (dns.clusterDns !== undefined && dns.dnsInterceptClusterDns !== true) throw new UsageError(`--cluster-dns ${dns.clusterDns} is only used with --dns-intercept-cluster-dns`);
  if (dns.dnsInterceptClusterDns !== true) return;
  if (dns.dnsAddress === undefined) throw new UsageError('--dns-intercept-cluster-dns needs --dns-address: the queries are answered by the node DNS');
  if (mode === 'ipvs') {
    throw new UsageError("--dns-intercept-cluster-dns does not work in IPVS mode: IPVS sends the ClusterIP's queries to the Pods whether conntrack tracks them or not; point the Pods at --dns-address instead (the kubelet's --cluster-dns)");
  }
}

/** What {@link checkProxyConfig} needs besides the configuration. */
export interface ConfigCheck {
  /** How to name a flag in an error (config-file.ts settingName: the file's field when the value came from there); default: the flag. */
  readonly name?: (flag: string) => string;
  /** `run`'s `--status-file`: like `--state-dir`, it must not be inside a watched manifest folder. */
  readonly statusFile?: string;
}

/**
 * Check `config` as a whole, before anything is read or touched, in this
 * order: `--dns-address` with `--netns`; `--dns-intercept-cluster-dns` without
 * `--dns-address` or in IPVS mode, `--cluster-dns` without it; with `statusFile` (`run`), the
 * status file and the state folder outside a manifest `--source` (each
 * write would be a source change, and each change a sync); the sync periods
 * together (options.ts checkSyncPeriods).
 * @throws UsageError for all but the periods; Error naming the flag or the field for the periods.
 */
export function checkProxyConfig(config: ProxyConfig, check: ConfigCheck = {}): void {
  const { kernel, render } = config;
  if (config.dns?.dnsAddress !== undefined && kernel.netns !== undefined) {
    throw new UsageError(`--dns-address ${config.dns.dnsAddress} with --netns ${kernel.netns}: the DNS server listens in drover's own network namespace; run drover inside ${kernel.netns} (ip netns exec ${kernel.netns} drover run …) instead of --netns`);
  }
  if (config.dns !== undefined) checkInterceptFlags(config.dns, kernel.mode);
  if (check.statusFile !== undefined && sourceKind(render.source) === 'file') {
    for (const [flag, path] of [['--status-file', check.statusFile], ['--state-dir', render.stateDir]] as const) {
      if (path !== undefined && !relative(resolve(render.source), resolve(path)).startsWith('..')) {
        throw new UsageError(`${flag} ${path} is inside --source ${render.source}; put it elsewhere`);
      }
    }
  }
  if (config.sync !== undefined) checkSyncPeriods(config.sync, check.name);
}
