/**
 * A bounded-frequency runner, after kube-proxy's
 * pkg/util/async/bounded_frequency_runner.go: a function that runs
 *
 * - soon after `run()` is requested, but never sooner than `minIntervalMs`
 *   after the previous run started (bursts of changes become one sync);
 * - at least every `maxIntervalMs`, even when nothing asked for it;
 * - after `retryAfter(ms)` when a run failed, and not sooner even when a run
 *   is requested in the meantime (backoff holds);
 * - never twice at once: a request during a run causes one more run after it.
 */

/** Options of a BoundedFrequencyRunner; all times in milliseconds. */
export interface RunnerOptions {
  readonly minIntervalMs: number;
  readonly maxIntervalMs: number;
}

/** See the module comment. */
export class BoundedFrequencyRunner {
  private timer: NodeJS.Timeout | undefined;
  private dueAt = Number.POSITIVE_INFINITY;
  private lastStart = Number.NEGATIVE_INFINITY;
  /** No run before this time (ms since the epoch), set by retryAfter. */
  private holdUntil = Number.NEGATIVE_INFINITY;
  private running: Promise<void> | undefined;
  private pending = false;
  private stopped = false;

  constructor(
    private readonly fn: () => Promise<void>,
    private readonly opts: RunnerOptions,
  ) {}

  /** Start: run once now, then on requests and every maxIntervalMs. */
  start(): void {
    this.schedule(0);
  }

  /** Request a run as soon as the minimum interval allows. */
  run(): void {
    if (this.running) {
      this.pending = true;
      return;
    }
    this.schedule(Math.max(0, this.lastStart + this.opts.minIntervalMs - Date.now(), this.holdUntil - Date.now()));
  }

  /** Request a run after `delayMs` (at the latest), e.g. to retry after a failure. */
  retryAfter(delayMs: number): void {
    this.holdUntil = Date.now() + delayMs;
    this.schedule(Math.max(delayMs, this.lastStart + this.opts.minIntervalMs - Date.now()));
  }

  /** Stop; waits for a run in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    const at = Date.now() + delayMs;
    if (this.timer && at >= this.dueAt && this.dueAt >= this.holdUntil) return;
    if (this.timer) clearTimeout(this.timer);
    this.dueAt = at;
    this.timer = setTimeout(() => void this.tick(), delayMs);
  }

  private async tick(): Promise<void> {
    this.timer = undefined;
    this.dueAt = Number.POSITIVE_INFINITY;
    if (this.stopped) return;
    if (this.running) {
      this.pending = true;
      return;
    }
    this.lastStart = Date.now();
    this.running = this.fn().finally(() => {
      this.running = undefined;
    });
    await this.running;
    if (this.stopped) return;
    if (this.pending) {
      this.pending = false;
      this.run();
    }
    this.schedule(this.opts.maxIntervalMs);
  }
}
