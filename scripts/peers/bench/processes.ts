/**
 * The processes of the peer bench, each inside a namespace of the testbed
 * (`ip netns exec NS …`, which execs, so the PID is the program's own): a
 * proxy under test with its log and its /proc figures, and helpers that
 * talk one JSON line per command (the churn prober).
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { parseProcMemory, type ProcMemory } from '../../../src/bench/drover-process.ts';
import { processTreeCpuOf, readTree, type ProcCpu } from './proc-stat.ts';

/**
 * `path` (a PATH) without the node_modules/.bin folders that npm and npx
 * put first: one of them holds an unrelated `nft` (a file tracer), which
 * kube-proxy would run instead of nftables' `nft`.
 */
export function systemPath(path = ''): string {
  return path
    .split(':')
    .filter((dir) => dir !== '' && !/(^|\/)node_modules\/\.bin\/?$/.test(dir))
    .join(':');
}

/** A proxy (kube-proxy or `drover run`) running in a node namespace; always {@link stop} it. */
export class ProxyProcess {
  private tail = '';
  private exitError: Error | undefined;
  private readonly exited: Promise<void>;
  private readonly log: WriteStream;
  /** Log lines that look like errors (klog `E…` lines, pino level ≥ 50), the first 20. */
  readonly errors: string[] = [];

  private constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    logFile: string,
    /** When it was started, ms (performance.now()). */
    readonly startedAt: number,
  ) {
    this.log = createWriteStream(logFile, { flags: 'a' });
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on('line', (line) => {
        this.log.write(`${line}\n`);
        this.tail = `${this.tail}${line}\n`.slice(-3000);
        if (this.errors.length < 20 && (/^E\d{4} /.test(line) || /"level":(50|60)/.test(line))) this.errors.push(line);
      });
    }
    this.exited = new Promise((resolve) =>
      child.once('close', (code, signal) => {
        this.exitError = new Error(`proxy exited (${signal ?? code}); its log ends with:\n${this.tail}`);
        this.log.end();
        resolve();
      }),
    );
  }

  /**
   * Start `argv` inside namespace `netns`, its output appended to `logFile`.
   * @throws Error when `ip` cannot be started.
   */
  static async start(netns: string, argv: readonly string[], logFile: string, env: NodeJS.ProcessEnv = {}): Promise<ProxyProcess> {
    const startedAt = performance.now();
    const child = spawn('ip', ['netns', 'exec', netns, ...argv], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, PATH: systemPath(process.env.PATH), ...env }, detached: true });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    return new ProxyProcess(child, logFile, startedAt);
  }

  /** Its PID. */
  get pid(): number {
    return this.child.pid!;
  }

  /** The end of its log. */
  get logTail(): string {
    return this.tail;
  }

  /** @throws Error with the end of its log when it has exited. */
  assertRunning(): void {
    if (this.exitError) throw this.exitError;
  }

  /**
   * VmRSS and VmHWM now, summed over the proxy and its live descendants
   * (drover's nf_tables watcher process): the RSS is the tree's; the peak,
   * each process's own peak added, is an upper bound on the tree's.
   * @throws Error when it has exited.
   */
  async memory(): Promise<ProcMemory> {
    this.assertRunning();
    let rssKb = 0;
    let hwmKb = 0;
    for (const text of await readTree(this.pid, 'status')) {
      const m = parseProcMemory(text);
      rssKb += m.rssKb;
      hwmKb += m.hwmKb;
    }
    return { rssKb, hwmKb };
  }

  /** CPU seconds so far of the proxy and its live descendants, and of the children they waited for (processTreeCpuOf). @throws Error when it has exited. */
  async cpu(): Promise<ProcCpu> {
    this.assertRunning();
    return processTreeCpuOf(this.pid);
  }

  /** SIGTERM to its process group, SIGKILL after `graceMs`; resolves once it has exited. Never throws. */
  async stop(graceMs = 10_000): Promise<void> {
    if (this.exitError) return;
    const signal = (sig: NodeJS.Signals) => {
      try {
        process.kill(-this.pid, sig);
      } catch {
        // already gone
      }
    };
    signal('SIGTERM');
    const timer = setTimeout(() => signal('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

