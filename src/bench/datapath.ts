/**
 * The data-path clock: one long-lived prober process (prober.mjs) in the
 * client namespace, asked to make connections until they show a change. A
 * long-lived process, because starting node for every probe would add
 * ~100 ms to each measurement.
 */
import { LineChild } from './line-child.ts';
import { fileURLToPath } from 'node:url';
import type { DataPathCheck } from './changes.ts';

/** Timing options of a data-path check, ms. */
export interface ProbeTiming {
  /** One connection's deadline (connect + response) before it counts as not answered. */
  readonly attemptTimeoutMs: number;
  /** Give up on the whole check after this long. */
  readonly deadlineMs: number;
  /**
   * Pace the connections: start one every this many ms without waiting for
   * the ones before, and count them by send order (prober.mjs); absent or 0:
   * one connection at a time, each after the one before has finished.
   */
  readonly intervalMs?: number;
  /** With {@link intervalMs}: the most connections in flight at once [32]. */
  readonly maxInFlight?: number;
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
  private constructor(private readonly child: LineChild<Reply>) {}

  /**
   * Start a prober inside network namespace `netns` and wait until it answers.
   * @throws Error when it does not start.
   */
  static async start(netns: string): Promise<Prober> {
    return new Prober(await LineChild.start<Reply>(netns, [process.execPath, PROBER], 'data-path prober'));
  }

  /**
   * Make connections until `check` holds.
   * @throws Error naming what the connections saw when it did not hold within the deadline.
   */
  async until(check: DataPathCheck, timing: ProbeTiming): Promise<ProbeResult> {
    const reply = await this.child.send({ op: 'until', consecutive: 1, ...check, ...timing });
    if (!reply.ok || reply.at === undefined) throw new Error(`data path: ${check.host}:${check.port}: ${reply.error ?? 'no answer'}`);
    return { atNs: BigInt(reply.at), tries: reply.tries ?? 0 };
  }

  /** End the prober (closing its stdin) and wait for it to exit; kill it after 2 s. */
  close(): Promise<void> {
    return this.child.close();
  }
}
