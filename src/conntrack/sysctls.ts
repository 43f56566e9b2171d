/**
 * kube-proxy's conntrack settings (`conntrack.*` of its configuration file,
 * `--conntrack-*` flags) applied to the nf_conntrack sysctls, as
 * cmd/kube-proxy/app/server_linux.go (setupConntrack, getConntrackMax) and
 * conntrack.go do, at the start of `run` and `sync`:
 *
 * - nf_conntrack_max = max(maxPerCore × CPUs, min), when maxPerCore > 0;
 *   and, as kube-proxy, the hash table (/sys/module/nf_conntrack/parameters/
 *   hashsize) raised to a quarter of it when smaller;
 * - nf_conntrack_tcp_timeout_established, _tcp_timeout_close_wait,
 *   _udp_timeout and _udp_timeout_stream, in seconds, when > 0;
 * - nf_conntrack_tcp_be_liberal = 1 with tcpBeLiberal.
 *
 * A setting of 0 (false) leaves the kernel's value alone, and so does every
 * setting drover is not given (its defaults are 0, not kube-proxy's; see
 * docs/conntrack.md). Each is written only when its value differs.
 *
 * Where they apply (Documentation/networking/nf_conntrack-sysctl.rst): the
 * timeouts and tcp_be_liberal belong to each network namespace, and are set
 * in the programmed one (`--netns`, or drover's own). nf_conntrack_max is
 * the host's limit, writable only from the initial namespace (read-only
 * elsewhere), and hashsize is a module parameter shared by every
 * namespace: drover writes them only without `--netns`, never into another
 * namespace's host, and a refusal (a container's read-only /proc/sys or
 * /sys) is a warning, not an error, as kube-proxy's read-only sysfs case.
 */
import { availableParallelism } from 'node:os';
import { readFile, writeFile } from 'node:fs/promises';
import type { Sysctls } from '../modes/shared/sysctls.ts';
import type { Logger } from '../util/log.ts';

/** The conntrack settings, as kube-proxy's KubeProxyConntrackConfiguration; 0 leaves a setting alone. */
export interface ConntrackSettings {
  /** Connections per CPU for nf_conntrack_max. */
  readonly maxPerCore: number;
  /** The least nf_conntrack_max (with maxPerCore). */
  readonly min: number;
  /** Seconds. */
  readonly tcpEstablishedTimeout: number;
  readonly tcpCloseWaitTimeout: number;
  readonly udpTimeout: number;
  readonly udpStreamTimeout: number;
  /** nf_conntrack_tcp_be_liberal=1. */
  readonly tcpBeLiberal: boolean;
}

/** One sysctl to set, and whether it belongs to the host rather than to a network namespace. */
export interface ConntrackSysctl {
  /** Dotted name, e.g. net.netfilter.nf_conntrack_max. */
  readonly name: string;
  readonly value: number;
  /** True for nf_conntrack_max: settable only from the initial network namespace. */
  readonly hostWide: boolean;
}

/** The module parameter kube-proxy raises with nf_conntrack_max. */
export const HASHSIZE_PATH = '/sys/module/nf_conntrack/parameters/hashsize';

/**
 * nf_conntrack_max for `s` on a host with `cpus` CPUs, as kube-proxy's
 * getConntrackMax: maxPerCore × cpus, or min when that is larger; 0 (leave
 * it alone) when maxPerCore is 0.
 */
export function conntrackMax(s: Pick<ConntrackSettings, 'maxPerCore' | 'min'>, cpus: number): number {
  if (s.maxPerCore <= 0) return 0;
  return Math.max(s.maxPerCore * cpus, s.min);
}

/** The sysctls `s` asks for on a host with `cpus` CPUs, in the order kube-proxy sets them (setupConntrack). Pure. */
export function conntrackSysctls(s: ConntrackSettings, cpus: number): ConntrackSysctl[] {
  const out: ConntrackSysctl[] = [];
  const put = (name: string, value: number, hostWide = false) => {
    if (value > 0) out.push({ name: `net.netfilter.${name}`, value, hostWide });
  };
  put('nf_conntrack_max', conntrackMax(s, cpus), true);
  put('nf_conntrack_tcp_timeout_established', s.tcpEstablishedTimeout);
  put('nf_conntrack_tcp_timeout_close_wait', s.tcpCloseWaitTimeout);
  put('nf_conntrack_tcp_be_liberal', s.tcpBeLiberal ? 1 : 0);
  put('nf_conntrack_udp_timeout', s.udpTimeout);
  put('nf_conntrack_udp_timeout_stream', s.udpStreamTimeout);
  return out;
}

/** Where the settings go, and how the host-wide ones are reached. */
export interface ConntrackTarget {
  /** The programmed namespace's sysctls (modes/shared/sysctls.ts namespaceSysctls). */
  readonly sysctls: Sysctls;
  /** `--netns`: when set, the host-wide settings are not this namespace's to change and are skipped. */
  readonly netns?: string;
  /** The module parameter hashsize; default: /sys/module/nf_conntrack/parameters/hashsize. */
  readonly hashsize?: { read(): Promise<number | undefined>; write(value: number): Promise<void> };
}

/** What {@link applyConntrackSettings} did. */
export interface ConntrackApplied {
  /** "name=value" of each setting written. */
  readonly written: readonly string[];
  /** One line per setting left alone although asked for, saying why. */
  readonly skipped: readonly string[];
}

/** hashsize through /sys. */
const SYSFS_HASHSIZE = {
  async read(): Promise<number | undefined> {
    try {
      return Number((await readFile(HASHSIZE_PATH, 'utf8')).trim());
    } catch {
      return undefined;
    }
  },
  async write(value: number): Promise<void> {
    await writeFile(HASHSIZE_PATH, `${value}\n`);
  },
};

/**
 * Apply `settings` to `target` (see the module comment), with `cpus` CPUs
 * (default: os.availableParallelism, as kube-proxy's runtime.NumCPU).
 * Host-wide settings that cannot be written are skipped with a warning.
 * @returns what was written and what was skipped.
 * @throws Error naming the sysctl when a namespace setting is missing (no
 *   nf_conntrack in this kernel) or cannot be written.
 */
export async function applyConntrackSettings(settings: ConntrackSettings, target: ConntrackTarget, logger: Logger, cpus = availableParallelism()): Promise<ConntrackApplied> {
  const written: string[] = [];
  const skipped: string[] = [];
  for (const { name, value, hostWide } of conntrackSysctls(settings, cpus)) {
    if (hostWide && target.netns !== undefined) {
      skipped.push(`${name}=${value}: the host's limit, not set from network namespace ${target.netns}`);
      continue;
    }
    const now = await target.sysctls.read(name);
    if (now === undefined) {
      if (hostWide) {
        skipped.push(`${name}=${value}: not present here`);
        continue;
      }
      throw new Error(`sysctl ${name} does not exist (is nf_conntrack loaded?)`);
    }
    if (now === String(value)) continue;
    try {
      await target.sysctls.write(name, String(value));
    } catch (err) {
      // nf_conntrack_max is read-only outside the initial namespace (a pod without hostNetwork, a container's read-only /proc/sys).
      if (hostWide) {
        skipped.push(`${name}=${value}: ${(err as Error).message}`);
        continue;
      }
      throw new Error(`cannot set sysctl ${name}=${value}: ${(err as Error).message}`);
    }
    written.push(`${name}=${value}`);
    if (hostWide) await raiseHashsize(value, target.hashsize ?? SYSFS_HASHSIZE, written, skipped);
  }
  for (const line of skipped) logger.warn({ skipped: line }, 'conntrack setting left alone');
  if (written.length > 0) logger.info({ sysctls: written }, 'conntrack settings applied');
  return { written, skipped };
}

/** As kube-proxy's SetMax: hashsize raised to max/4 when smaller; a refusal (read-only sysfs) is skipped. */
async function raiseHashsize(max: number, hashsize: NonNullable<ConntrackTarget['hashsize']>, written: string[], skipped: string[]): Promise<void> {
  const want = Math.floor(max / 4);
  const now = await hashsize.read();
  if (now === undefined || now >= want) return;
  try {
    await hashsize.write(want);
    written.push(`nf_conntrack.hashsize=${want}`);
  } catch (err) {
    skipped.push(`nf_conntrack.hashsize=${want}: ${(err as Error).message}`);
  }
}
