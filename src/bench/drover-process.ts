/**
 * A real `drover run` process for the end-to-end clock (end-to-end.ts):
 * started inside the bench's node namespace with `ip netns exec` (which
 * execs, so the PID is drover's own Node.js process), watched through its
 * log lines on stderr, and measured through /proc/PID/status.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { ProxyMode } from '../proxier/backend.ts';
import { DEFAULT_QUIET_MS } from '../proxier/collect-after-sync.ts';

/** drover's executable (bin/drover.js). */
const DROVER = fileURLToPath(new URL('../../bin/drover.js', import.meta.url));

/** The compiled CLI that bin/drover.js runs when it exists (dist/ of the package root, from src/bench/ and from dist/bench/ alike). */
const COMPILED = join(fileURLToPath(new URL('../..', import.meta.url)), 'dist', 'cli', 'main.js');

/**
 * Which build of drover the bench itself runs, and so the `drover run` it
 * starts (as DROVER_ENTRY, bin/drover.js): `src` (the TypeScript sources
 * through tsx, which adds to start-up time and RSS) when this module is
 * TypeScript, else `dist` (the compiled build, what a node runs).
 */
export function droverEntry(moduleUrl: string = import.meta.url): 'dist' | 'src' {
  return moduleUrl.endsWith('.ts') ? 'src' : 'dist';
}

/**
 * Which build a `drover run` started through bin/drover.js without a
 * choice of its own would run: DROVER_ENTRY when it is set, else the
 * compiled build when it exists (`npm run build`, what a node runs), else
 * the TypeScript sources (bin/drover.js's own rule).
 */
export function installedEntry(env: NodeJS.ProcessEnv = process.env, built: boolean = existsSync(COMPILED)): 'dist' | 'src' {
  if (env.DROVER_ENTRY === 'dist' || env.DROVER_ENTRY === 'src') return env.DROVER_ENTRY;
  return built ? 'dist' : 'src';
}

/** What a `drover run` of the bench is started with. */
export interface DroverRunSpec {
  /** The node namespace it runs in. */
  readonly netns: string;
  readonly mode: ProxyMode;
  /** iptables variant (`--iptables-backend`): nft or legacy. */
  readonly iptablesVariant: string;
  /** The manifest folder (`--source`). */
  readonly source: string;
  /** `--cluster-cidr`. */
  readonly clusterCIDR: string;
  /** A private folder for its status file and state folder. */
  readonly workDir: string;
}

/**
 * The argv (after `ip`) that starts `spec`'s `drover run` in its namespace:
 * `--min-sync-period 0s`, so that a change is applied as soon as it is seen,
 * not held back by the previous change's sync; no metrics or health server;
 * its status file and state folder under `workDir`.
 */
export function droverRunArgv(spec: DroverRunSpec, node: string = process.execPath, drover: string = DROVER): string[] {
  return [
    'netns', 'exec', spec.netns, node, drover, 'run',
    '--source', spec.source,
    '--mode', spec.mode,
    '--iptables-backend', spec.iptablesVariant,
    '--cluster-cidr', spec.clusterCIDR,
    '--min-sync-period', '0s',
    '--metrics-bind-address', '',
    '--healthz-bind-address', '',
    '--status-file', `${spec.workDir}/status.json`,
    '--state-dir', `${spec.workDir}/state`,
  ];
}

/** Memory of a process as /proc/PID/status gives it, kB. */
export interface ProcMemory {
  /** VmRSS: resident set size now. */
  readonly rssKb: number;
  /** VmHWM: the peak resident set size so far. */
  readonly hwmKb: number;
}

/**
 * How long after its first sync a `drover run` is left alone before its
 * steady RSS is read, ms: past the quiet time after which it collects the
 * sync's garbage (proxier/collect-after-sync.ts, {@link DEFAULT_QUIET_MS}),
 * the collection itself (1-4 s at 10,000 service ports, util/gc.ts) and the
 * return of the emptied pages. At the sync-done line itself the heap still
 * holds the sync's garbage: at 10,000 Services of 10 endpoints in nftables
 * mode, about 300 MB RSS there against about 200 MB a few seconds later.
 */
export const STEADY_AFTER_MS = DEFAULT_QUIET_MS + 4000;

/**
 * The steady memory of a process that has just synced: its memory once
 * `settleMs` have passed with nothing asked of it (see {@link STEADY_AFTER_MS}).
 * `wait` (ms) is for tests.
 * @throws Error when the process has exited (its `memory()`'s error).
 */
export async function steadyMemory(proc: { memory(): Promise<ProcMemory> }, settleMs: number = STEADY_AFTER_MS, wait: (ms: number) => Promise<unknown> = sleep): Promise<ProcMemory> {
  await wait(settleMs);
  return proc.memory();
}

/**
 * VmRSS and VmHWM from the text of /proc/PID/status (lines such as
 * `VmRSS:\t  123456 kB`).
 * @throws Error when either line is missing (a kernel thread, or a process that has exited).
 */
export function parseProcMemory(text: string): ProcMemory {
  const field = (name: string): number => {
    const m = new RegExp(`^${name}:\\s+(\\d+) kB$`, 'm').exec(text);
    if (!m) throw new Error(`/proc status has no ${name} line`);
    return Number(m[1]);
  };
  return { rssKb: field('VmRSS'), hwmKb: field('VmHWM') };
}

/** True when `line` (one JSON log line of drover) reports a sync done, full or partial (proxier.ts). */
export function isSyncDone(line: string): boolean {
  return /"msg":"(full|partial) sync done/.test(line);
}

/** A running `drover run`; see the module comment. Always {@link stop} it. */
export class DroverRunProcess {
  /** Sync-done lines logged so far. */
  private syncs = 0;
  private stderr = '';
  private exited: Error | undefined;
  private readonly waiting = new Set<() => void>();

  private constructor(private readonly child: ChildProcessWithoutNullStreams) {
    createInterface({ input: child.stderr }).on('line', (line) => {
      this.stderr = `${this.stderr}${line}\n`.slice(-4000);
      if (!isSyncDone(line)) return;
      this.syncs++;
      for (const w of [...this.waiting]) w();
    });
    child.on('close', (code, signal) => {
      this.exited = new Error(`drover run exited (${signal ?? code}): ${this.stderr.trim()}`);
      for (const w of [...this.waiting]) w();
    });
  }

  /**
   * Start `spec`'s `drover run` (see {@link droverRunArgv}), from the same build as the bench ({@link droverEntry}).
   * @throws Error when `ip` cannot be started.
   */
  static async start(spec: DroverRunSpec): Promise<DroverRunProcess> {
    const child = spawn('ip', droverRunArgv(spec), { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, DROVER_ENTRY: droverEntry() } });
    child.stdout.resume();
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    return new DroverRunProcess(child);
  }

  /** The PID of drover's Node.js process. */
  get pid(): number {
    return this.child.pid!;
  }

  /** Sync-done lines logged so far; pass it to {@link syncAfter}. */
  get syncCount(): number {
    return this.syncs;
  }

  /**
   * Resolve once more than `count` syncs have been logged.
   * @throws Error with the end of drover's log when it exits first, or after `timeoutMs`.
   */
  syncAfter(count: number, timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (this.syncs > count) done(resolve);
        else if (this.exited) done(() => reject(this.exited));
      };
      const timer = setTimeout(() => done(() => reject(new Error(`drover run logged no sync within ${timeoutMs} ms: ${this.stderr.trim()}`))), timeoutMs);
      const done = (then: () => void): void => {
        clearTimeout(timer);
        this.waiting.delete(check);
        then();
      };
      this.waiting.add(check);
      check();
    });
  }

  /**
   * Its memory now, from /proc/PID/status.
   * @throws Error when the process has exited.
   */
  async memory(): Promise<ProcMemory> {
    if (this.exited) throw this.exited;
    return parseProcMemory(await readFile(`/proc/${this.pid}/status`, 'utf8'));
  }

  /** SIGTERM (drover leaves its rules in place), SIGKILL after 5 s; resolves once it has exited. */
  async stop(): Promise<void> {
    if (this.exited) return;
    const gone = new Promise<void>((resolve) => this.child.once('close', () => resolve()));
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    await gone;
    clearTimeout(timer);
  }
}
