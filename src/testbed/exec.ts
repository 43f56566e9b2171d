/**
 * Command runner for testbed plumbing: argument arrays only (never a shell),
 * optionally inside a named network namespace (`ip netns exec NAME ...`).
 */
import { spawn } from 'node:child_process';

/** Options of {@link run}. */
export interface RunOptions {
  /** Run inside this network namespace (via `ip netns exec`). */
  netns?: string;
  /** Written to the command's stdin, which is then closed. */
  input?: string;
  /** Kill the command (SIGKILL) and fail after this many ms. Default 30 000. */
  timeoutMs?: number;
  /** Resolve instead of throwing on a non-zero exit code (timeouts still throw). */
  allowFail?: boolean;
}

/** Outcome of {@link run}. */
export interface RunResult {
  stdout: string;
  stderr: string;
  /** Exit code; -1 when the command was ended by a signal. */
  code: number;
}

/** The argv actually executed for `cmd args` in `netns` (or the root namespace). */
export function argvFor(cmd: string, args: readonly string[], netns?: string): string[] {
  return netns === undefined ? [cmd, ...args] : ['ip', 'netns', 'exec', netns, cmd, ...args];
}

/** Human-readable name of a command, for error messages. */
export function describeCommand(cmd: string, args: readonly string[], netns?: string): string {
  const text = [cmd, ...args].join(' ');
  return netns === undefined ? text : `${text} (netns ${netns})`;
}

/**
 * Run `cmd args...`, capture stdout/stderr and wait for it to exit.
 * Throws an Error naming the command, exit code and stderr when it fails to
 * start, times out, or exits non-zero (unless `allowFail`).
 */
export function run(cmd: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  const [file, ...argv] = argvFor(cmd, args, opts.netns) as [string, ...string[]];
  const what = describeCommand(cmd, args, opts.netns);
  const timeoutMs = opts.timeoutMs ?? 30_000;
  return new Promise((resolve, reject) => {
    const child = spawn(file, argv, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.stdin.on('error', () => {}); // EPIPE when the command ignores its input
    child.stdin.end(opts.input ?? '');
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`${what}: failed to start: ${err.message}`));
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      const result = { stdout, stderr, code: code ?? -1 };
      if (timedOut) reject(new Error(`${what}: timed out after ${timeoutMs} ms; stderr: ${stderr.trim()}`));
      else if (result.code !== 0 && !opts.allowFail)
        reject(new Error(`${what}: exited with code ${result.code}; stderr: ${stderr.trim()}`));
      else resolve(result);
    });
  });
}
