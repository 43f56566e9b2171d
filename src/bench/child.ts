/** Ending the bench's long-lived helper processes (the data-path prober, the kernel listener). */
import type { ChildProcess } from 'node:child_process';

/**
 * End a helper that exits when its stdin closes: close its stdin and wait
 * until it exited; SIGKILL it when it has not within `graceMs` (default 2 s).
 * Resolves at once for a helper that already exited (`exited`).
 */
export async function endChild(child: ChildProcess, exited: boolean, graceMs = 2000): Promise<void> {
  if (exited) return;
  const gone = new Promise<void>((resolve) => child.once('close', () => resolve()));
  child.stdin?.end();
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await gone;
  clearTimeout(timer);
}
