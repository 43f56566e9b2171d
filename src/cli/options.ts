/**
 * Options shared by drover's commands, their parsing and validation. Values
 * are checked here so that a bad flag is one clear line and exit code 1,
 * before anything touches the kernel.
 */
import { InvalidArgumentError, Option } from 'commander';
import { DEFAULT_SERVICE_CIDR, parseServiceCIDR } from '../model/allocate.ts';
import { DEFAULT_NODE_PORT_RANGE, formatNodePortRange, parseNodePortRange, type NodePortRange } from '../model/claims.ts';
import { parseBindAddress, parseCIDR as parseAnyCIDR, parseIP, type BindAddress, type IPPrefix } from '../model/addr.ts';
import { parseCIDR } from '../model/validate.ts';
import { goDuration, MAX_DURATION_MS, parseDurationMs } from '../util/duration.ts';
import { LOG_FORMATS, LOG_LEVELS, type LogFormat, type LogLevel } from '../util/log.ts';
import { allModes, defaultMode, modeNames } from '../modes/registry.ts';
import { ALLOCATION_FILE, DEFAULT_FILE_SETTLE_MS, DEFAULT_POLL_INTERVAL_MS, DEFAULT_STATE_DIR } from '../sources/defaults.ts';
import { DETECT_LOCAL_MODES, NODEPORT_PRIMARY, type NodePortAddresses } from '../config/render-cli.ts';
import { DEFAULT_HEALTHZ_BIND_ADDRESS, DEFAULT_METRICS_BIND_ADDRESS } from '../config/server.ts';

/**
 * A duration flag's value: a Go duration (util/duration.ts, Go's
 * `time.ParseDuration`, as kube-proxy's flags and configuration file take
 * them: "500ms", "30s", "1m0s", "1h2m3.5s", "1.5h"), not negative, at most
 * 24 days. Returns milliseconds.
 * @throws InvalidArgumentError naming the value: not a Go duration, negative, or longer than 24 days.
 */
export function parseDuration(value: string): number {
  try {
    return parseDurationMs(value, { maxMs: MAX_DURATION_MS, maxText: '24 days' });
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}

/**
 * `--cluster-cidr`: a strict IPv4 CIDR (validate.ts parseCIDR) with a prefix
 * of /1 or longer, or one CIDR per family separated by a comma
 * ("10.244.0.0/16,fd00:10:244::/56", as kube-proxy's clusterCIDR): the
 * IPv6 one canonical (addr.ts parseCIDR), no host bits, /1 or longer. A
 * zero prefix would make the "! -s <cluster CIDR>" masquerade rule invalid
 * for iptables-nft, so every sync would fail; masquerading all traffic is
 * what --masquerade-all is for.
 * @throws InvalidArgumentError naming the value.
 */
function cidrArg(value: string): string {
  try {
    const parts = value.split(',');
    if (parts.length > 2) throw new Error(`"${value}" lists more than two CIDRs (at most one per IP family)`);
    if (parts.length === 2 && parts[0]!.includes(':') === parts[1]!.includes(':')) throw new Error(`"${value}" lists two CIDRs of one IP family`);
    for (const part of parts) {
      const prefix = part.includes(':') ? ipv6ClusterCIDR(part) : parseCIDR(part).prefix;
      if (prefix === 0) throw new Error(`cluster CIDR ${part} matches every address; to masquerade everything, use --masquerade-all instead`);
    }
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
  return value;
}

/**
 * The prefix length of the IPv6 cluster CIDR `value`.
 * @throws Error when it is not a canonical IPv6 CIDR without host bits.
 */
function ipv6ClusterCIDR(value: string): number {
  const read = parseAnyCIDR(value);
  if (read === undefined || read.prefix.family !== 6) throw new Error(`"${value}" is not a valid IPv6 CIDR (expected e.g. "fd00:10:244::/56")`);
  if (read.prefix.text !== value) throw new Error(`"${value}" is not canonical or has host bits set; did you mean "${read.prefix.text}"?`);
  return read.prefix.bits;
}

/**
 * `--service-cidr`: allocate.ts parseServiceCIDR (a prefix from /8 to /30,
 * no overlap with "this network", loopback, link-local or multicast ranges).
 * @throws InvalidArgumentError naming the value.
 */
function serviceCidrArg(value: string): string {
  try {
    parseServiceCIDR(value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
  return value;
}

/**
 * `--service-node-port-range`: model/claims.ts parseNodePortRange.
 * @throws InvalidArgumentError naming the value.
 */
function nodePortRangeArg(value: string): NodePortRange {
  try {
    return parseNodePortRange(value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}

/**
 * A network namespace name as `ip netns` names them (`--netns`, `trace --probe-from`).
 * @throws InvalidArgumentError naming the value.
 */
export function netnsArg(value: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(value)) throw new InvalidArgumentError(`"${value}" is not a network namespace name`);
  return value;
}

/** --source, --cluster-cidr, --masquerade-all, --service-cidr, --service-node-port-range, --nodeport-addresses, --state-dir, and those of the Kubernetes source. */
export function renderOptions(): Option[] {
  return [
    new Option(
      '-s, --source <path|url>',
      'manifest file or folder (JSON/YAML: Service, EndpointSlice, Endpoints, Shepherd Service), ' +
        'a Shepherd API server: shepherd+http://HOST:PORT or shepherd+https://HOST:PORT (token from $SHEPHERD_API_TOKEN), ' +
        'or "kubernetes" for the Kubernetes API server',
    ).makeOptionMandatory(),
    ...kubernetesOptions(),
    new Option('--cluster-cidr <cidr>', 'pod network; traffic to a ClusterIP from outside it is masqueraded').argParser(cidrArg),
    new Option(
      '--detect-local-mode <mode>',
      "what traffic is from this cluster's pods: from --cluster-cidr (ClusterCIDR), or from this node's pods, its Node's spec.podCIDRs read at start (NodeCIDR; drover exits when they change, as kube-proxy)",
    )
      .choices([...DETECT_LOCAL_MODES])
      .default('ClusterCIDR'),
    new Option('--masquerade-all', 'masquerade all traffic to ClusterIPs').default(false),
    new Option('--no-masquerade-all', 'masquerade only what --cluster-cidr says, even if --config sets masqueradeAll'),
    new Option('--service-cidr <cidr>', 'range for ClusterIPs drover allocates (Shepherd services)')
      .default(DEFAULT_SERVICE_CIDR)
      .argParser(serviceCidrArg),
    new Option(
      '--service-node-port-range <range>',
      `NodePorts a Service may have, as the API server's flag of that name (min-max, min+offset or one port); a NodePort outside it is not served (default: ${formatNodePortRange(DEFAULT_NODE_PORT_RANGE)}; with --source kubernetes, every port: the API server has checked its own range)`,
    ).argParser(nodePortRangeArg),
    nodePortAddressesOption(),
    new Option(
      '--conntrack-tcp-be-liberal',
      "leave out the drop of conntrack-INVALID packets (kube-proxy's conntrack.tcpBeLiberal); run and sync set nf_conntrack_tcp_be_liberal=1 in the programmed namespace",
    ),
    new Option('--no-conntrack-tcp-be-liberal', 'keep the drop of conntrack-INVALID packets even if --config sets conntrack.tcpBeLiberal'),
    new Option('--state-dir <dir>', `folder of the state kept across restarts (the ClusterIPs drover allocated, ${ALLOCATION_FILE}); run and sync write it, the other commands read it`).default(
      DEFAULT_STATE_DIR,
    ),
    new Option(
      '--file-follow-external-links',
      'with a manifest folder: also follow its symlinks that lead out of it (never those to the folder itself or its parents)',
    ).default(false),
  ];
}

/**
 * `--file-settle` of `run`: how long a manifest file written in place must
 * be unchanged before it is applied (sources/file.ts, the settle rule); 0
 * applies files as they are read.
 */
export function fileSettleOption(): Option {
  return new Option('--file-settle <duration>', 'with a manifest folder or file: apply a file written in place only once it has not changed for this long (one renamed into place at once)')
    .default(DEFAULT_FILE_SETTLE_MS, '200ms')
    .argParser(parseDuration);
}

/**
 * `--poll-interval`: time between two reads of a source that cannot be
 * watched (a Shepherd API server), at least 100 ms.
 * @throws InvalidArgumentError naming the value.
 */
function pollIntervalArg(value: string): number {
  const ms = parseDuration(value);
  if (ms < 100) throw new InvalidArgumentError(`--poll-interval must be at least 100ms (got ${value})`);
  return ms;
}

/** `--poll-interval` of `run`. */
export function pollIntervalOption(): Option {
  return new Option('--poll-interval <duration>', 'time between two polls of a Shepherd API server (a sync follows only a poll that changed something)')
    .default(DEFAULT_POLL_INTERVAL_MS, '5s')
    .argParser(pollIntervalArg);
}

/** --kubeconfig, --master, --hostname-override, --bind-address (kube-proxy's flags of the same names). */
export function kubernetesOptions(): Option[] {
  return [
    new Option('--kubeconfig <path>', 'with --source kubernetes: kubeconfig file (default: in-cluster in a pod, else $KUBECONFIG, else ~/.kube/config)'),
    new Option('--master <url>', "with --source kubernetes: the API server's URL, overriding the kubeconfig's (without a kubeconfig: that server, with no credentials)").argParser(masterArg),
    new Option('--bind-address <ip[,ip]>', "this node's primary IP (one per family), overriding its Node's, for --nodeport-addresses primary; 0.0.0.0 and :: mean none").argParser(bindAddressIPs),
    new Option('--hostname-override <name>', "this node's name: endpoints whose nodeName equals it are local, and its Node (watched with --source kubernetes, else among the manifests) gives the zone (default: the host name with --source kubernetes; with manifest files, the only Node object in them)").argParser(
      hostnameArg,
    ),
  ];
}

/**
 * `--master`: an http or https URL.
 * @throws InvalidArgumentError naming the value.
 */
function masterArg(value: string): string {
  let url: URL;
  try {
    url = new URL(value.includes('://') ? value : `https://${value}`);
  } catch {
    throw new InvalidArgumentError(`"${value}" is not a URL (e.g. https://10.0.0.1:6443)`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new InvalidArgumentError(`"${value}" is not an http or https URL`);
  return url.href.replace(/\/$/, '');
}

/**
 * `--bind-address`: an IP, or two of different families separated by a
 * comma, as kube-proxy's bindAddress (its node IP override); the
 * unspecified addresses (0.0.0.0, ::) are left out, as kube-proxy ignores them.
 * @throws InvalidArgumentError naming the value.
 */
function bindAddressIPs(value: string): string[] {
  const ips = value.split(',').map((p) => p.trim()).filter((p) => p !== '');
  const read = ips.map((ip) => {
    const parsed = parseIP(ip);
    if (parsed === undefined) throw new InvalidArgumentError(`"${ip}" is not an IP address`);
    return parsed;
  });
  if (read.length > 2 || (read.length === 2 && read[0]!.family === read[1]!.family)) throw new InvalidArgumentError(`"${value}": at most one IP of each family`);
  return read.filter((ip) => ip.value !== 0n).map((ip) => ip.text);
}

/** `--verbosity`: klog's `-v` level, a whole number from 0. @throws InvalidArgumentError naming the value. */
function verbosityArg(value: string): number {
  if (!/^\d{1,9}$/.test(value)) throw new InvalidArgumentError(`"${value}" is not a verbosity level (0, 1, 2, …)`);
  return Number(value);
}

/** `--hostname-override`: trimmed and lower-cased, as kube-proxy does (pkg/util/node GetHostname); not empty. */
function hostnameArg(value: string): string {
  const name = value.trim().toLowerCase();
  if (name === '') throw new InvalidArgumentError('the node name is empty');
  return name;
}

/** `--list-timeout`, for the one-shot commands (render, sync --once, diff). */
export function listTimeoutOption(): Option {
  return new Option('--list-timeout <duration>', 'with --source kubernetes: how long to wait for the first lists of the API server before failing')
    .default(30_000, '30s')
    .argParser(parseDuration);
}

/** `-m, --mode`: one of the modes of the registry. */
export function modeOption(): Option {
  return new Option('-m, --mode <mode>', 'proxy mode').choices(modeNames()).default(defaultMode());
}

/** --mode, --iptables-backend, --netns, --log-level, --log-format. */
export function kernelOptions(): Option[] {
  return [
    modeOption(),
    new Option('--iptables-backend <backend>', 'iptables variant: auto-detect as kube-proxy does, or force one')
      .choices(['auto', 'nft', 'legacy'])
      .default('auto'),
    new Option('--netns <name>', 'work inside this named network namespace (ip netns) instead of the current one').argParser(netnsArg),
    new Option('--log-level <level>', 'log level (kube-proxy\'s -v N raises it: 4 debug, 5 and more trace)').choices([...LOG_LEVELS]).default('info'),
    new Option('--verbosity <level>', "kube-proxy's -v (also taken as -v N and --v=N): log verbosity, 0 or more").argParser(verbosityArg),
    new Option('--log-format <format>', 'log lines on stderr: json (one object per line, the level by name) or text (kube-proxy\'s klog format)').choices([...LOG_FORMATS]).default('json'),
  ];
}

/**
 * Check the sync periods together: `--sync-period` at least 1 s (0 would
 * be a busy loop of full syncs), `--min-sync-period` not longer, and
 * `--full-sync-period` not shorter. `name` says how to name a flag in the
 * error (config-file.ts `settingName`: the configuration file's field when
 * the value came from there); by default, the flag.
 * @throws Error naming the flag or the field.
 */
export function checkSyncPeriods(
  opts: { minSyncPeriod: number; syncPeriod: number; fullSyncPeriod?: number },
  name: (flag: string) => string = (flag) => flag,
): void {
  if (opts.syncPeriod < 1000) throw new Error(`${name('--sync-period')} must be at least 1s (got ${opts.syncPeriod} ms)`);
  if (opts.fullSyncPeriod !== undefined && opts.fullSyncPeriod < opts.syncPeriod) {
    throw new Error(`${name('--full-sync-period')} (${opts.fullSyncPeriod} ms) must not be shorter than ${name('--sync-period')} (${opts.syncPeriod} ms)`);
  }
  if (opts.minSyncPeriod > opts.syncPeriod) {
    throw new Error(`${name('--min-sync-period')} (${opts.minSyncPeriod} ms) must not be longer than ${name('--sync-period')} (${opts.syncPeriod} ms)`);
  }
}

/**
 * `--conntrack-max-per-core` and `--conntrack-min`: a whole number of
 * connections, 0 or more.
 * @throws InvalidArgumentError naming the value.
 */
function connectionCountArg(value: string): number {
  if (!/^[0-9]+$/.test(value.trim()) || !Number.isSafeInteger(Number(value.trim()))) throw new InvalidArgumentError(`"${value}" is not a whole number of connections`);
  return Number(value.trim());
}

/**
 * A conntrack timeout: a duration (parseDuration) of 0 (leave the setting
 * alone) or whole seconds, as the kernel takes it in seconds.
 * @throws InvalidArgumentError naming the value.
 */
function conntrackTimeoutArg(value: string): number {
  const ms = parseDuration(value);
  if (ms % 1000 !== 0) throw new InvalidArgumentError(`"${value}" is not a whole number of seconds (conntrack timeouts are in seconds; 0 leaves the setting alone)`);
  return ms;
}

/**
 * kube-proxy's conntrack flags (cmd/kube-proxy/app/options.go), for `run`
 * and `sync`. Each defaults to 0, which leaves the kernel's value alone:
 * unlike kube-proxy, whose defaults are 32768 per core, 131072, 24h and 1h,
 * drover changes no sysctl it was not asked to.
 */
export function conntrackOptions(): Option[] {
  return [
    new Option('--conntrack-max-per-core <n>', 'nf_conntrack_max = this times the CPU count (at least --conntrack-min); 0 leaves it alone').default(0).argParser(connectionCountArg),
    new Option('--conntrack-min <n>', 'least nf_conntrack_max with --conntrack-max-per-core').default(0).argParser(connectionCountArg),
    new Option('--conntrack-tcp-timeout-established <duration>', 'nf_conntrack_tcp_timeout_established; 0 leaves it alone').default(0, '0').argParser(conntrackTimeoutArg),
    new Option('--conntrack-tcp-timeout-close-wait <duration>', 'nf_conntrack_tcp_timeout_close_wait; 0 leaves it alone').default(0, '0').argParser(conntrackTimeoutArg),
    new Option('--conntrack-udp-timeout <duration>', 'nf_conntrack_udp_timeout; 0 leaves it alone').default(0, '0').argParser(conntrackTimeoutArg),
    new Option('--conntrack-udp-timeout-stream <duration>', 'nf_conntrack_udp_timeout_stream; 0 leaves it alone').default(0, '0').argParser(conntrackTimeoutArg),
  ];
}

/** The default of `--min-sync-period` per mode, as `--help` says it: "1s in iptables mode, 1s in IPVS mode, 50ms in nftables mode". */
function minSyncPeriodDefaults(): string {
  return allModes().map((m) => `${goDuration(m.minSyncPeriodMs)} in ${m.title} mode`).join(', ');
}

/** --min-sync-period, --sync-period. */
export function syncPeriodOptions(): Option[] {
  return [
    // No commander default: the mode's (ModeDriver.minSyncPeriodMs), applied by proxy-config.ts once the mode is known.
    new Option('--min-sync-period <duration>', `least time between two syncs; a change is applied within it (default: ${minSyncPeriodDefaults()})`).argParser(parseDuration),
    new Option(
      '--sync-period <duration>',
      'time between drift checks: each mode runs its cheap check and reads the kernel back, repairing drift, only when the check suspects drift',
    )
      .default(30_000, '30s')
      .argParser(parseDuration),
  ];
}

/** --full-sync-period, of `run`. */
export function fullSyncPeriodOption(): Option {
  return new Option('--full-sync-period <duration>', 'longest time between two full read-backs, whatever the drift checks say')
    .default(3_600_000, '1h')
    .argParser(parseDuration);
}

/**
 * A listen address for `--metrics-bind-address` and `--healthz-bind-address`
 * (addr.ts parseBindAddress: "IP:PORT", "[IPv6]:PORT"); "" turns the server off.
 * @throws InvalidArgumentError naming the value.
 */
export function bindAddressArg(value: string): BindAddress | null {
  if (value.trim() === '') return null;
  const bind = parseBindAddress(value.trim());
  if (!bind) throw new InvalidArgumentError(`"${value}" is not an address to listen on (IP:PORT, or [IPv6]:PORT; "" for none)`);
  return bind;
}

/**
 * `--nodeport-addresses`: CIDRs separated by commas, IPv4 or IPv6
 * ("10.0.0.0/8,192.168.1.0/24"), each read as kube-proxy reads them
 * (addr.ts parseCIDR; host bits are ignored); "" for none; or `primary`
 * alone, the node's primary IPs (kube-proxy's validation: "can't use both
 * 'primary' and CIDRs").
 * @throws InvalidArgumentError naming the first value that is not a CIDR, or `primary` beside CIDRs.
 */
export function nodePortAddressesArg(value: string): NodePortAddresses {
  const parts = value.split(',').map((p) => p.trim()).filter((p) => p !== '');
  if (parts.includes(NODEPORT_PRIMARY)) {
    if (parts.length > 1) throw new InvalidArgumentError(`"${value}": ${NODEPORT_PRIMARY} stands alone, without CIDRs`);
    return Object.assign([] as IPPrefix[], { primary: true as const });
  }
  const out: IPPrefix[] = [];
  for (const part of parts) {
    const cidr = parseAnyCIDR(part);
    if (cidr === undefined) throw new InvalidArgumentError(`"${part}" is not a CIDR (e.g. 10.0.0.0/8) or ${NODEPORT_PRIMARY}`);
    if (!out.some((p) => p.text === cidr.prefix.text)) out.push(cidr.prefix);
  }
  return out;
}

/** --metrics-bind-address, --healthz-bind-address (kube-proxy's flags, ports and defaults). */
export function serverOptions(): Option[] {
  return [
    new Option('--metrics-bind-address <ip:port>', 'where /metrics, /proxyMode, /configz and /healthz (`ok`) are served (Prometheus, kube-proxy\'s metric names); "" for nowhere')
      .default(bindAddressArg(DEFAULT_METRICS_BIND_ADDRESS), DEFAULT_METRICS_BIND_ADDRESS)
      .argParser(bindAddressArg),
    new Option('--healthz-bind-address <ip:port>', 'where /healthz and /livez are served (every address by default, for load balancers\' probes); "" for nowhere')
      .default(bindAddressArg(DEFAULT_HEALTHZ_BIND_ADDRESS), DEFAULT_HEALTHZ_BIND_ADDRESS)
      .argParser(bindAddressArg),
  ];
}

/** `--nodeport-addresses`: where NodePorts (iptables mode) and the health-check NodePorts answer. */
export function nodePortAddressesOption(): Option {
  return new Option(
    '--nodeport-addresses <cidr,...>',
    "NodePorts and each LoadBalancer Service's health-check NodePort answer on the node's IPv4 addresses in these CIDRs, read at start, " +
      "or with primary on the node's primary IPs (its Node's first InternalIP of each family, else ExternalIP; --bind-address overrides its family's) " +
      '(default: every local address; NodePorts on 127.0.0.0/8 only with --nodeport-localhost, iptables mode)',
  ).argParser(nodePortAddressesArg);
}

/** The kernel options of the read-only commands (chains, trace, diff, status): those of `run`. */
export function inspectKernelOptions(): Option[] {
  return kernelOptions();
}
