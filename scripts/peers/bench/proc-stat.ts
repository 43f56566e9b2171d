/**
 * CPU time of a process from /proc/PID/stat (proc(5)): `utime` and `stime`
 * (fields 14 and 15) of the process itself, `cutime` and `cstime` (16 and
 * 17) of its children that have exited and been waited for (iptables-restore,
 * nft, conntrack), in clock ticks.
 */

/** CPU seconds of a process. */
export interface ProcCpu {
  /** utime + stime, s. */
  readonly self: number;
  /** cutime + cstime: its waited-for children, s. */
  readonly children: number;
}

/**
 * Parse the text of /proc/PID/stat. `ticksPerSecond` is sysconf(_SC_CLK_TCK),
 * 100 on Linux.
 * @throws Error when the text has not the fields of proc(5).
 */
export function parseProcCpu(text: string, ticksPerSecond = 100): ProcCpu {
  // The command name (field 2) is in parentheses and may itself hold spaces and ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).trim().split(/\s+/);
  // rest[0] is field 3 (state); field N is rest[N - 3].
  const [utime, stime, cutime, cstime] = [14, 15, 16, 17].map((n) => Number(rest[n - 3]));
  if (text.lastIndexOf(')') < 0 || ![utime, stime, cutime, cstime].every((x) => Number.isInteger(x) && x! >= 0)) {
    throw new Error(`/proc/PID/stat: not the fields of proc(5): ${JSON.stringify(text.slice(0, 80))}`);
  }
  return { self: (utime! + stime!) / ticksPerSecond, children: (cutime! + cstime!) / ticksPerSecond };
}

/**
 * Process `pid` and its live descendants (/proc/PID/task/PID/children,
 * recursively), `pid` first: a process that keeps helper processes running
 * (drover's nf_tables watcher) with them. A descendant that ends while it
 * is read is left out.
 */
export async function processTree(pid: number): Promise<number[]> {
  const { readFile } = await import('node:fs/promises');
  const children = (await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8').catch(() => '')).trim().split(/\s+/).filter(Boolean);
  const tree = [pid];
  for (const child of children) tree.push(...(await processTree(Number(child))));
  return tree;
}

/**
 * The text of /proc/P/`file` of each process P of {@link processTree}(`pid`),
 * in that order; a descendant that ended meanwhile is left out.
 * @throws Error when `pid`'s own file cannot be read.
 */
export async function readTree(pid: number, file: 'stat' | 'status'): Promise<string[]> {
  const { readFile } = await import('node:fs/promises');
  const texts: string[] = [];
  for (const p of await processTree(pid)) {
    try {
      texts.push(await readFile(`/proc/${p}/${file}`, 'utf8'));
    } catch (err) {
      if (p === pid) throw err;
    }
  }
  return texts;
}

/**
 * CPU seconds of process `pid` and its live descendants ({@link processTree}):
 * `self`, their own user + system time; `children`, that of the children
 * they have waited for (iptables-restore, nft).
 * @throws Error when `pid` itself cannot be read.
 */
export async function processTreeCpuOf(pid: number): Promise<ProcCpu> {
  let self = 0;
  let children = 0;
  for (const text of await readTree(pid, 'stat')) {
    const c = parseProcCpu(text);
    self += c.self;
    children += c.children;
  }
  return { self, children };
}

/** {@link processTreeCpuOf}'s user + system time of the processes themselves, s. */
export async function processTreeCpu(pid: number): Promise<number> {
  return (await processTreeCpuOf(pid)).self;
}
