/**
 * CPU lists as taskset(1) and /sys/devices/system/cpu/online write them
 * (`0-3,6`), for the DNS bench's pinning: the server on `--cpu`, everything
 * else (dnsperf, the poller, the bench's own process) on the other CPUs.
 */

/**
 * The CPUs of a list such as `0-3,6`, ascending, without repeats.
 * @throws Error naming the list when it is not one of numbers and ranges.
 */
export function parseCpuList(list: string): number[] {
  const cpus = new Set<number>();
  for (const part of list.trim().split(',')) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!m) throw new Error(`CPU list ${JSON.stringify(list)}: ${JSON.stringify(part)} is not a CPU number or a range such as 0-3`);
    const from = Number(m[1]);
    const to = m[2] === undefined ? from : Number(m[2]);
    if (to < from) throw new Error(`CPU list ${JSON.stringify(list)}: the range ${part} runs backwards`);
    for (let c = from; c <= to; c++) cpus.add(c);
  }
  return [...cpus].sort((a, b) => a - b);
}

/** `cpus` as a list taskset(1) takes, consecutive CPUs as ranges: [0, 1, 2, 5] → `0-2,5`. */
export function formatCpuList(cpus: readonly number[]): string {
  const sorted = [...new Set(cpus)].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    parts.push(j === i ? String(sorted[i]) : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return parts.join(',');
}

/**
 * The CPUs of `online` (the text of /sys/devices/system/cpu/online) that
 * are not in `server`, as a list.
 * @throws Error when none is left (a one-CPU machine, or `server` lists every CPU): then the client has to be given one.
 */
export function clientCpus(online: string, server: string): string {
  const taken = new Set(parseCpuList(server));
  const rest = parseCpuList(online).filter((c) => !taken.has(c));
  if (rest.length === 0) throw new Error(`no CPU is left for the client beside the server's ${server} (online: ${online.trim()}): give --client-cpu`);
  return formatCpuList(rest);
}
