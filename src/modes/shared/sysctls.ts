/**
 * Reading and writing sysctls, in this process's network namespace
 * (/proc/sys: the net.* entries belong to the namespace of the process
 * that opens them) or in a named one (`ip netns exec NS sysctl`). Used by
 * IPVS mode (its sysctls), iptables mode (route_localnet) and the conntrack
 * settings of every mode (conntrack/sysctls.ts).
 */
import { readFile, writeFile } from 'node:fs/promises';
import { isErrno } from '../../kernel/netlink/errno.ts';
import { runCommand } from '../../kernel/exec.ts';

/** Reading and writing sysctls; FakeSysctls implements it in memory. */
export interface Sysctls {
  /** The current value, trimmed; undefined when the setting does not exist. */
  read(name: string): Promise<string | undefined>;
  /** Set a value. */
  write(name: string, value: string): Promise<void>;
}

const NAME = /^[a-z0-9_]+(\.[a-z0-9_-]+)+$/;

/** /proc/sys path of a dotted sysctl name. @throws Error for a name that is not a plain dotted name. */
export function sysctlPath(name: string): string {
  if (!NAME.test(name)) throw new Error(`refusing to use ${JSON.stringify(name)} as a sysctl name`);
  return `/proc/sys/${name.replaceAll('.', '/')}`;
}

/** Sysctls through /proc/sys of this process (its network namespace). */
export class ProcSysctls implements Sysctls {
  async read(name: string): Promise<string | undefined> {
    try {
      return (await readFile(sysctlPath(name), 'utf8')).trim();
    } catch (err) {
      if (isErrno(err, 'ENOENT')) return undefined;
      throw err;
    }
  }

  async write(name: string, value: string): Promise<void> {
    if (!/^[0-9]+$/.test(value)) throw new Error(`refusing to write ${JSON.stringify(value)} to ${name}`);
    await writeFile(sysctlPath(name), `${value}\n`);
  }
}

/**
 * Sysctls of the named namespace `netns` (`ip netns exec NS sysctl`), or of
 * this process's namespace (/proc/sys) when undefined.
 */
export function namespaceSysctls(netns: string | undefined): Sysctls {
  if (netns === undefined) return new ProcSysctls();
  return {
    async read(name) {
      const res = await runCommand('sysctl', ['-n', name], { netns });
      if (res.code !== 0) return undefined;
      return res.stdout.trim();
    },
    async write(name, value) {
      if (!/^[0-9]+$/.test(value)) throw new Error(`refusing to write ${JSON.stringify(value)} to ${name}`);
      const res = await runCommand('sysctl', ['-q', '-w', `${name}=${value}`], { netns });
      if (res.code !== 0) throw new Error(`cannot set sysctl ${name}=${value} in namespace ${netns}: ${res.stderr.trim()}`);
    },
  };
}
