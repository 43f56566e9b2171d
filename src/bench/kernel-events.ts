/**
 * The kernel clock from netfilter's own change notifications: a listener
 * process (kernel-listener.ts) in the node namespace stamps every nf_tables
 * generation commit; after a change's writer returned, the clock is the
 * time from the change's start to the stamp of the commit that ended it
 * (the generation the namespace holds then). This is what the kernel
 * announces when the change took effect, with no read-back in between.
 * nftables mode and iptables-nft commit through nf_tables and are timed so;
 * iptables-legacy and IPVS announce nothing and keep the read-back clock.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { endChild } from './child.ts';
import { benchScriptCommand } from './script-command.ts';

/** When the commit that ended a change was announced, or why that is not known. */
export type CommitStamp =
  | { readonly atNs: bigint; readonly gen: number; /** The committing process's name (NFTA_GEN_PROC_NAME). */ readonly by: string }
  | { readonly lost: string };

interface Reply {
  t: 'commit';
  id: number;
  gen?: number;
  at?: string;
  by?: string;
  lost?: string;
}

/** A running listener; see the module comment. Always `close()` it. */
export class KernelEvents {
  private nextId = 1;
  private readonly waiting = new Map<number, (r: Reply) => void>();
  private stderr = '';
  private exited: string | undefined;

  private constructor(private readonly child: ChildProcessWithoutNullStreams, ready: (recvBufferBytes: number) => void) {
    child.stderr.setEncoding('utf8').on('data', (d: string) => (this.stderr = (this.stderr + d).slice(-2000)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      let msg: Reply | { t: 'ready'; recvBufferBytes: number };
      try {
        msg = JSON.parse(line) as typeof msg;
      } catch {
        return;
      }
      if (msg.t === 'ready') return ready(msg.recvBufferBytes);
      const w = this.waiting.get(msg.id);
      this.waiting.delete(msg.id);
      w?.(msg);
    });
    child.on('close', (code, signal) => {
      this.exited = `the kernel listener exited (${signal ?? code})${this.stderr.trim() ? `: ${this.stderr.trim()}` : ''}`;
      for (const w of this.waiting.values()) w({ t: 'commit', id: 0, lost: this.exited });
      this.waiting.clear();
    });
  }

  /** SO_RCVBUF of the listener's socket, bytes. */
  recvBufferBytes = 0;

  /**
   * Start a listener inside network namespace `netns` (run as root) and wait
   * until it is a member of the group.
   * @throws Error when it does not start within 30 s, naming its stderr.
   */
  static async start(netns: string): Promise<KernelEvents> {
    const child = spawn('ip', ['netns', 'exec', netns, ...benchScriptCommand('kernel-listener')], { stdio: ['pipe', 'pipe', 'pipe'] });
    let events!: KernelEvents;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the kernel listener did not start within 30 s: ${events.stderr.trim()}`)), 30_000);
      events = new KernelEvents(child, (bytes) => {
        clearTimeout(timer);
        events.recvBufferBytes = bytes;
        resolve();
      });
      child.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      child.once('close', () => {
        clearTimeout(timer);
        reject(new Error(events.exited));
      });
    });
    return events;
  }

  /**
   * The commit that ended a change started at `t0Ns` (process.hrtime.bigint(),
   * the machine's monotonic clock, which the listener shares); call it once
   * the change's writer returned. Never throws: a listener that died, dropped
   * notifications (ENOBUFS) or saw no commit after `t0Ns` within
   * `deadlineMs` gives `lost` with the reason.
   */
  commitAfter(t0Ns: bigint, deadlineMs: number): Promise<CommitStamp> {
    if (this.exited) return Promise.resolve({ lost: this.exited });
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.waiting.set(id, (r) =>
        resolve(r.at !== undefined && r.gen !== undefined ? { atNs: BigInt(r.at), gen: r.gen, by: r.by ?? '?' } : { lost: r.lost ?? 'no answer' }),
      );
      this.child.stdin.write(`${JSON.stringify({ id, t0: String(t0Ns), deadlineMs })}\n`);
    });
  }

  /** End the listener (closing its stdin) and wait for it to exit; kill it after 2 s. */
  close(): Promise<void> {
    return endChild(this.child, this.exited !== undefined);
  }
}
