/**
 * When the file source reads files again by itself, whatever events come
 * (file.ts): a file that did not parse just after it was written, one not
 * settled yet, one held because it reads as fewer objects. Each file is
 * due at one time; one timer serves them all, set for the earliest.
 */

/** Files due to be read again, by absolute path; see the module comment. */
export class RereadSchedule {
  private readonly due = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private readonly onDue: (files: readonly string[]) => void;
  private readonly now: () => number;

  /**
   * `onDue` gets the files whose time has come, once per firing of the
   * timer; `now` is milliseconds since the epoch (for tests).
   */
  constructor(onDue: (files: readonly string[]) => void, now: () => number = Date.now) {
    this.onDue = onDue;
    this.now = now;
  }

  /**
   * Read `file` again at `at` (ms since the epoch; at once when past),
   * unless it is due earlier already: the earliest wins, since the read it
   * brings schedules again whatever is still due later.
   */
  at(file: string, at: number): void {
    const due = this.due.get(file);
    if (due === undefined || at < due) this.due.set(file, at);
    this.arm();
  }

  /** True when `file` is due to be read again. */
  has(file: string): boolean {
    return this.due.has(file);
  }

  /** Forget every file and stop the timer. */
  clear(): void {
    this.due.clear();
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Set the timer for the earliest file due. */
  private arm(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.due.size === 0) return;
    const first = Math.min(...this.due.values());
    // A few ms late, so that a file due at a time is past it when read (a settle check compares with that time).
    this.timer = setTimeout(() => this.fire(), Math.max(0, first - this.now()) + 5);
  }

  private fire(): void {
    this.timer = undefined;
    const now = this.now();
    const files: string[] = [];
    for (const [file, at] of this.due) {
      if (at > now + 5) continue;
      this.due.delete(file);
      files.push(file);
    }
    this.arm();
    if (files.length > 0) this.onDue(files);
  }
}
