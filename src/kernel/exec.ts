/**
 * Running a command the way every mode does: an argument array, never a
 * shell; optionally inside a named network namespace; input on stdin. The
 * one command runner of drover's kernel plumbing (iptables-save, ipset,
 * conntrack, sysctl helpers).
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
 * @param timeoutMs kill the command (SIGTERM) after this many milliseconds (default 60 000); the result then says `timedOut`.
 * @throws CommandError when the command cannot be started.
 */
export function runCommand(
  cmd: string,
  args: readonly string[],
  opts: { netns?: string; input?: string; timeoutMs?: number } = {},
): Promise<CommandResult> {
  const argv = opts.netns ? ['ip', ['netns', 'exec', opts.netns, cmd, ...args]] as const : [cmd, args] as const;
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv[1], { stdio: ['pipe', 'pipe', 'pipe'], timeout: opts.timeoutMs ?? 60_000 });
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
