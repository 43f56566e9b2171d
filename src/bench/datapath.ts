/**
 * The data-path clock: one long-lived prober process (prober.mjs) in the
 * client namespace, asked to make connections until they show a change. A
 * long-lived process, because starting node for every probe would add
 * ~100 ms to each measurement.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { endChild } from './child.ts';
import { fileURLToPath } from 'node:url';
import type { DataPathCheck } from './changes.ts';

/** Timing options of a data-path check, ms. */
export interface ProbeTiming {
  /** One connection's deadline (connect + response) before it counts as not answered. */
  readonly attemptTimeoutMs: number;
  /** Give up on the whole check after this long. */
  readonly deadlineMs: number;
}

/** When a check was satisfied. */
export interface ProbeResult {
  /** process.hrtime.bigint() just before the first qualifying connection was opened, ns. */
  readonly atNs: bigint;
  /** Connections made. */
  readonly tries: number;
}

interface Reply {
  id: number;
  ok: boolean;
  at?: string;
  tries?: number;
  error?: string;
}

const PROBER = fileURLToPath(new URL('./prober.mjs', import.meta.url));

/** A running prober; see the module comment. Always `close()` it. */
export class Prober {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void }>();
  private stderr = '';
  private exited: Error | undefined;

  private constructor(private readonly child: ChildProcessWithoutNullStreams) {
    child.stderr.setEncoding('utf8').on('data', (d: string) => (this.stderr = (this.stderr + d).slice(-2000)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      const reply = JSON.parse(line) as Reply;
      const w = this.waiting.get(reply.id);
      this.waiting.delete(reply.id);
      w?.resolve(reply);
    });
    child.on('close', (code, signal) => {
      this.exited = new Error(`data-path prober exited (${signal ?? code}): ${this.stderr.trim()}`);
      for (const w of this.waiting.values()) w.reject(this.exited);
      this.waiting.clear();
    });
  }

  /**
   * Start a prober inside network namespace `netns` and wait until it answers.
   * @throws Error when it does not start.
   */
  static async start(netns: string): Promise<Prober> {
    const child = spawn('ip', ['netns', 'exec', netns, process.execPath, PROBER], { stdio: ['pipe', 'pipe', 'pipe'] });
    const prober = new Prober(child);
    await new Promise<void>((resolve, reject) => {
      child.once('error', reject);
      prober.send({ op: 'ping' }).then(() => resolve(), reject);
    });
    return prober;
  }

  private send(cmd: Record<string, unknown>): Promise<Reply> {
    if (this.exited) return Promise.reject(this.exited);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.child.stdin.write(`${JSON.stringify({ id, ...cmd })}\n`);
    });
  }

  /**
   * Make connections until `check` holds.
   * @throws Error naming what the connections saw when it did not hold within the deadline.
   */
  async until(check: DataPathCheck, timing: ProbeTiming): Promise<ProbeResult> {
    const reply = await this.send({ op: 'until', consecutive: 1, ...check, ...timing });
    if (!reply.ok || reply.at === undefined) throw new Error(`data path: ${check.host}:${check.port}: ${reply.error ?? 'no answer'}`);
    return { atNs: BigInt(reply.at), tries: reply.tries ?? 0 };
  }

  /** End the prober (closing its stdin) and wait for it to exit; kill it after 2 s. */
  close(): Promise<void> {
    return endChild(this.child, this.exited !== undefined);
  }
}
