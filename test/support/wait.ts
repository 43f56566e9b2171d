/** Waiting in tests for something that happens asynchronously (a sync, a log line, a kernel read-back). */

/**
 * Resolve once `check` returns true; poll every `everyMs` (default 100 ms).
 * @throws Error "timed out waiting for WHAT" after `timeoutMs`.
 */
export async function until(what: string, check: () => Promise<boolean>, timeoutMs: number, everyMs = 100): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
