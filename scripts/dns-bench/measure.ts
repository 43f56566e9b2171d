/**
 * The measurements of the DNS bench (scripts/dns-bench.ts), whichever
 * server answers: a name's first answer seen from the client namespace
 * (the poller), dnsperf runs with the server's CPU time per answer, and the
 * rows of the printed tables. The client side runs under `taskset -c` on
 * the client CPUs, away from the server's.
 */
import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(fileURLToPath(import.meta.url), '..', '..', '..');

/** Percentile `p` (0-100) of sorted `xs`. */
export const pct = (xs: number[], p: number): number => xs[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]!;

/** `x` ms with two decimals. */
export const ms = (x: number): string => `${x.toFixed(2)} ms`;

/** The poller run in the client namespace: asks NAME every ms until the answer holds IP; prints READY once it asks, HEARD at the first answer without IP, and then the epoch ms of the answer with it. */
const POLLER = `
import { createSocket } from 'node:dgram';
import { createRequire } from 'node:module';
const dns = createRequire(${JSON.stringify(join(ROOT, 'package.json'))})('dns-packet');
const [name, ip, server] = process.argv.slice(2);
const sock = createSocket('udp4');
let id = 0;
let heard = false;
sock.on('message', (m) => {
  const p = dns.decode(m);
  if ((p.answers || []).some((a) => a.data === ip)) {
    process.stdout.write(String(performance.timeOrigin + performance.now()) + '\\n');
    process.exit(0);
  }
  if (!heard) process.stdout.write('HEARD\\n');
  heard = true;
});
sock.bind(0, () => {
  process.stdout.write('READY\\n');
  setInterval(() => sock.send(dns.encode({ type: 'query', id: (id = (id + 1) & 0xffff), questions: [{ type: 'A', name }] }), 53, server), 1);
});
`;

/** CPU time process `pid` has used so far, user and system, ms (proc(5): /proc/PID/stat, fields 14 and 15, in clock ticks of 10 ms). */
export async function cpuMs(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** Run `cmd` in `netns`, resolving with its stdout, calling `onLine` for each stdout line. */
export function inNetns(netns: string, cmd: string[], onLine?: (line: string) => void): { done: Promise<string>; kill: () => void } {
  const child = spawn('ip', ['netns', 'exec', netns, ...cmd], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  let pending = '';
  child.stdout.on('data', (b: Buffer) => {
    out += b.toString();
    pending += b.toString();
    let nl;
    while ((nl = pending.indexOf('\n')) >= 0) {
      onLine?.(pending.slice(0, nl));
      pending = pending.slice(nl + 1);
    }
  });
  return { done: new Promise((resolve) => child.on('close', () => resolve(out))), kill: () => child.kill('SIGKILL') };
}

/** Where the bench's client side runs: the client namespace and the CPUs (a taskset list). */
export interface Client {
  readonly netns: string;
  readonly cpus: string;
  /** A folder of the bench's own, for the poller's script and the query file. */
  readonly dir: string;
  /** The server's address, port 53. */
  readonly server: string;
}

/**
 * Put the poller's script into `client.dir` (once, before {@link firstAnswer}).
 */
export async function writePoller(client: Client): Promise<void> {
  await writeFile(join(client.dir, 'poller.mjs'), POLLER);
}

/**
 * The epoch ms of the first answer to `name` holding `ip`, asked every
 * millisecond from the client namespace: the poller starts asking and,
 * unless `heard` is false, gets a first answer without `ip` (NXDOMAIN: the
 * server already answers for the name's absence, so a server that caches
 * denials has cached it); then `change()` runs (it makes the name; the
 * caller notes when it began). Undefined when no such answer came within
 * `timeoutMs` of the change (or no first answer within it, then
 * `change()` is not run). `heard` false: the server may not answer yet
 * (`change()` starts it).
 */
export async function firstAnswer(client: Client, name: string, ip: string, change: () => Promise<void>, timeoutMs = 30_000, heard = true): Promise<number | undefined> {
  let ready!: (ok: boolean) => void;
  const isReady = new Promise<boolean>((r) => (ready = r));
  const poller = inNetns(client.netns, ['taskset', '-c', client.cpus, process.execPath, join(client.dir, 'poller.mjs'), name, ip, client.server], (line) => {
    if (line === (heard ? 'HEARD' : 'READY')) ready(true);
  });
  const early = setTimeout(() => ready(false), timeoutMs);
  const asked = await isReady;
  clearTimeout(early);
  if (!asked) {
    poller.kill();
    return undefined;
  }
  await change();
  let timer: NodeJS.Timeout | undefined;
  const out = await Promise.race([poller.done, new Promise<string>((r) => (timer = setTimeout(() => r(''), timeoutMs)))]);
  clearTimeout(timer);
  poller.kill();
  const answered = Number(out.trim().split('\n').pop());
  return out.trim() === '' || !Number.isFinite(answered) ? undefined : answered;
}

/** One dnsperf run: answers per second, completed and lost queries, the server's CPU time per answer (µs), and the sorted latencies (ms) of the NOERROR answers. */
export interface DnsperfRun {
  readonly qps: number;
  readonly completed: string | undefined;
  readonly lost: string | undefined;
  readonly cpuPerAnswer: number;
  readonly latencies: number[];
}

/**
 * dnsperf from the client namespace, on the client CPUs, for `seconds` over
 * the queries of `queries` (a file of `NAME TYPE` lines): UDP, 4 clients,
 * 200 queries outstanding, `-v` for each query's latency; `extra` adds
 * flags (`-Q RATE`). The CPU time of process `serverPid` is read before and
 * after.
 */
export async function dnsperf(client: Client, queries: string, seconds: number, serverPid: number, extra: string[] = []): Promise<DnsperfRun> {
  const cpu0 = await cpuMs(serverPid);
  const perf = await inNetns(client.netns, ['taskset', '-c', client.cpus, 'dnsperf', '-s', client.server, '-d', queries, '-l', String(seconds), '-c', '4', '-q', '200', '-v', ...extra]).done;
  const cpu = (await cpuMs(serverPid)) - cpu0;
  return {
    cpuPerAnswer: (cpu * 1000) / Number(/Queries completed:\s+(\d+)/.exec(perf)?.[1]),
    qps: Number(/Queries per second:\s+([\d.]+)/.exec(perf)?.[1]),
    completed: /Queries completed:\s+(\d+)/.exec(perf)?.[1],
    lost: /Queries lost:\s+(\d+)/.exec(perf)?.[1],
    latencies: [...perf.matchAll(/^> NOERROR \S+ A ([\d.]+)$/gm)].map((m) => Number(m[1]) * 1000).sort((a, b) => a - b),
  };
}

/** The header of the dnsperf table, `first` its first column's title. */
export const dnsperfHeader = (first: string): string[] => [`| ${first} | answers/s | completed | lost | server CPU per answer | p50 | p99 | p99.9 |`, '|---|---|---|---|---|---|---|---|'];

/** One row of the dnsperf table. */
export const dnsperfRow = (what: string, run: DnsperfRun): string =>
  `| ${what} | ${Math.round(run.qps)} | ${run.completed} | ${run.lost} | ${run.cpuPerAnswer.toFixed(1)} µs | ${ms(pct(run.latencies, 50))} | ${ms(pct(run.latencies, 99))} | ${ms(pct(run.latencies, 99.9))} |`;

/** Pin this process, every thread of it, to `cpus` (`taskset -a -p -c`), so that the bench's own work stays off the server's CPU. */
export async function pinSelf(cpus: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const child = spawn('taskset', ['-a', '-p', '-c', cpus, String(process.pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`taskset -a -p -c ${cpus} ${process.pid}: exit ${code}: ${err}`))));
  });
}
