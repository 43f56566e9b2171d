/**
 * The test side of driver.ts: start it inside a network namespace and send
 * it requests. One driver per test file (node and tsx take most of a minute
 * to start under the emulated guest).
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { NodeInfo, ServicePort } from '../../../src/model/types.ts';
import type { Packet, TraceResult } from '../../../src/inspect/trace.ts';
import { moduleArgv } from '../../../src/util/node-module.ts';
import type { OpenRequest } from './driver.ts';

/** A running driver. */
export class Driver {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private stderr = '';

  private constructor(private readonly child: ChildProcessWithoutNullStreams) {
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      this.stderr = (this.stderr + d).slice(-20_000);
    });
  }

  /**
   * Start a driver in network namespace `netns` and wait until it is ready.
   * @param timeoutMs bound on the start (default 5 min: the guest is slow)
   */
  static async start(netns: string, timeoutMs = 300_000): Promise<Driver> {
    // driver.ts through tsx from the sources, driver.js where the tests run compiled (scripts/vm/build-js.sh)
    const child = spawn('ip', ['netns', 'exec', netns, ...moduleArgv(import.meta.url, 'driver')], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env },
    });
    const driver = new Driver(child);
    const lines = createInterface({ input: child.stdout });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`driver did not start in ${timeoutMs} ms; stderr: ${driver.stderr}`)), timeoutMs);
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`driver exited (${code}) before it was ready; stderr: ${driver.stderr}`));
      });
      lines.on('line', (line) => {
        const msg = JSON.parse(line) as { ready?: boolean; id?: number; result?: unknown; error?: string };
        if (msg.ready) {
          clearTimeout(timer);
          resolve();
          return;
        }
        const w = msg.id === undefined ? undefined : driver.waiting.get(msg.id);
        if (!w) return;
        driver.waiting.delete(msg.id!);
        if (msg.error !== undefined) w.reject(new Error(msg.error));
        else w.resolve(msg.result);
      });
    });
    return driver;
  }

  /** Send a request; resolves with its result, rejects with its error. */
  request<T = unknown>(cmd: string, args: Record<string, unknown> = {}, timeoutMs = 600_000): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`driver: ${cmd} timed out after ${timeoutMs} ms; stderr: ${this.stderr}`));
      }, timeoutMs);
      this.waiting.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v as T);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.child.stdin.write(`${JSON.stringify({ id, cmd, ...args })}\n`);
    });
  }

  /** Create the IPVS backend in the driver. */
  open(options: OpenRequest = {}): Promise<unknown> {
    return this.request('open', { options });
  }

  /** One sync of the backend; `ipv6Services` is the snapshot's IPv6 view (a dual-stack backend, open with `dualStack`). */
  sync(
    services: readonly ServicePort[],
    changes: { full: boolean; changed?: string[] },
    node?: NodeInfo,
    ipv6Services?: readonly ServicePort[],
  ): Promise<{ result: Record<string, unknown>; detail: Record<string, unknown> }> {
    return this.request('sync', { services, full: changes.full, changed: changes.changed ?? [], ...(node ? { node } : {}), ...(ipv6Services ? { ipv6Services } : {}) });
  }

  /** `drover trace --mode ipvs` of `packet` over the namespace's live state, as the driver reads it. */
  trace(packet: Packet): Promise<TraceResult> {
    return this.request('trace', { packet });
  }

  /** backend.cleanup(): what it removed. */
  cleanup(): Promise<{ removed: Record<string, number> }> {
    return this.request('cleanup');
  }

  /** What the driver wrote on stderr (its logs), the last 20 kB. */
  get log(): string {
    return this.stderr;
  }

  /** Close the backend and end the process. */
  async stop(): Promise<void> {
    await this.request('close', {}, 30_000).catch(() => undefined);
    this.child.stdin.end();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.child.kill('SIGKILL');
        resolve();
      }, 10_000);
      this.child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      if (this.child.exitCode !== null) resolve();
    });
  }
}
