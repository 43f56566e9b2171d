/**
 * The one command runner of drover and its test plumbing: an argument array,
 * never a shell; optionally inside a named network namespace (`ip netns exec
 * NAME ...`); input on stdin. {@link runCommand} reports the exit code and
 * leaves judging it to the caller (iptables-save, ipset, conntrack, nft,
 * sysctl helpers); {@link run} throws an Error naming the command for a
 * failure to start, a timeout or a non-zero exit (the testbed's and the
 * tests' plumbing).
 */
import { spawn } from 'node:child_process';
import { DroverError } from '../errors.ts';

/**
 * The useful part of a tool's error output on one line: its first three
 * non-empty lines joined with " / " (iptables-nft puts the kernel's reason,
 * e.g. "CHAIN_DEL failed (Device or resource busy)", on a line of its own).
 */
export function summarise(stderr: string): string {
  return stderr
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !/^Try `/.test(l))
    .slice(0, 3)
    .join(' / ');
}

/** A command failed to start or exited non-zero. */
export class CommandError extends DroverError {
  constructor(
    readonly command: string,
    readonly code: number | null,
    readonly stderr: string,
  ) {
    super(`${command} exited with ${code ?? 'a signal'}: ${summarise(stderr)}`);
    this.name = 'CommandError';
  }
}

/** Result of one command. */
export interface CommandResult {
  /** The exit code; null when a signal ended the command. */
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** True when the command ran past `timeoutMs` and was killed (SIGTERM); `code` is then null. */
  readonly timedOut?: boolean;
}

/**
 * Run a command with an argument array (no shell), optionally inside a named
 * network namespace (`ip netns exec NAME ...`), feeding `input` on stdin.
 * @param opts.timeoutMs kill the command after this many milliseconds (default 60 000); the result then says `timedOut`.
 * @param opts.killSignal the signal that kill sends (default SIGTERM).
 * @throws CommandError when the command cannot be started.
 */
export function runCommand(
  cmd: string,
  args: readonly string[],
  opts: { netns?: string; input?: string; timeoutMs?: number; killSignal?: NodeJS.Signals } = {},
): Promise<CommandResult> {
  const argv = opts.netns ? ['ip', ['netns', 'exec', opts.netns, cmd, ...args]] as const : [cmd, args] as const;
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv[1], { stdio: ['pipe', 'pipe', 'pipe'], timeout: opts.timeoutMs ?? 60_000, killSignal: opts.killSignal ?? 'SIGTERM' });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', (e) => reject(new CommandError(cmd, null, e.message)));
    child.on('close', (code) =>
      resolve({
        code,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        // Only spawn's own timeout kills the child: nothing else here signals it.
        ...(code === null && child.killed ? { timedOut: true } : {}),
      }),
    );
    child.stdin.on('error', () => undefined); // a command that exits early closes stdin; its exit code tells
    child.stdin.end(opts.input ?? '');
  });
}

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

/** Human-readable name of a command, for error messages: "cmd args (netns NAME)". */
export function describeCommand(cmd: string, args: readonly string[], netns?: string): string {
  const text = [cmd, ...args].join(' ');
  return netns === undefined ? text : `${text} (netns ${netns})`;
}

/**
 * Run `cmd args...` through {@link runCommand}, capture stdout/stderr and
 * wait for it to exit.
 * @throws Error naming the command ({@link describeCommand}), the exit code
 *   and stderr when it fails to start, times out, or exits non-zero (unless
 *   `allowFail`).
 */
export async function run(cmd: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  const what = describeCommand(cmd, args, opts.netns);
  const timeoutMs = opts.timeoutMs ?? 30_000;
  let res: CommandResult;
  try {
    res = await runCommand(cmd, args, {
      ...(opts.netns !== undefined ? { netns: opts.netns } : {}),
      ...(opts.input !== undefined ? { input: opts.input } : {}),
      timeoutMs,
      killSignal: 'SIGKILL',
    });
  } catch (err) {
    throw new Error(`${what}: failed to start: ${err instanceof CommandError ? err.stderr : String(err)}`);
  }
  if (res.timedOut === true) throw new Error(`${what}: timed out after ${timeoutMs} ms; stderr: ${res.stderr.trim()}`);
  const code = res.code ?? -1;
  if (code !== 0 && opts.allowFail !== true) throw new Error(`${what}: exited with code ${code}; stderr: ${res.stderr.trim()}`);
  return { stdout: res.stdout, stderr: res.stderr, code };
}
