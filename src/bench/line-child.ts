/**
 * A helper process inside a network namespace that reads one JSON command
 * per line on stdin and answers each with one JSON line carrying the same
 * `id`: the data-path prober (prober.mjs, datapath.ts) and the peer bench's
 * churn prober (scripts/peers/bench/churn-prober.mjs).
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { endChild } from './child.ts';

/** An answer: the command's `id` and `ok`, and whatever else the helper adds. */
export type LineAnswer = Record<string, unknown> & { id: number; ok: boolean };

/** A running helper; always `close()` it. */
export class LineChild<A extends { id: number } = LineAnswer> {
  private nextId = 1;
  private stderr = '';
  private gone: Error | undefined;
  private readonly waiting = new Map<number, { resolve: (a: A) => void; reject: (e: Error) => void }>();

  private constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    name: string,
  ) {
    child.stderr.setEncoding('utf8').on('data', (d: string) => (this.stderr = (this.stderr + d).slice(-2000)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      const a = JSON.parse(line) as A;
      const w = this.waiting.get(a.id);
      this.waiting.delete(a.id);
      w?.resolve(a);
    });
    child.on('close', (code, signal) => {
      this.gone = new Error(`${name} exited (${signal ?? code}): ${this.stderr.trim()}`);
      for (const w of this.waiting.values()) w.reject(this.gone);
      this.waiting.clear();
    });
  }

  /**
   * Start `argv` in network namespace `netns` and wait for its answer to a
   * ping (`{"op": "ping"}`); `name` names it in the error when it exits.
   * @throws Error when it does not start or answer.
   */
  static async start<A extends { id: number } = LineAnswer>(netns: string, argv: readonly string[], name = 'helper'): Promise<LineChild<A>> {
    const child = spawn('ip', ['netns', 'exec', netns, ...argv], { stdio: ['pipe', 'pipe', 'pipe'] });
    const c = new LineChild<A>(child, name);
    await new Promise<void>((resolve, reject) => {
      child.once('error', reject);
      c.send({ op: 'ping' }).then(() => resolve(), reject);
    });
    return c;
  }

  /** Send one command; resolves with its answer. @throws Error when the helper has exited. */
  send(cmd: Record<string, unknown>): Promise<A> {
    if (this.gone) return Promise.reject(this.gone);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.child.stdin.write(`${JSON.stringify({ id, ...cmd })}\n`);
    });
  }

  /** Close its stdin and wait for it to exit (SIGKILL after 2 s). */
  close(): Promise<void> {
    return endChild(this.child, this.gone !== undefined);
  }
}
