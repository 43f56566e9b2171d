/**
 * The iptables backend's only I/O: `iptables-restore` and `iptables-save`.
 *
 * A small wrapper written for drover: no Node library runs iptables safely
 * (the old `iptables` package spawns one process per rule and reports no
 * errors; `netfilter` builds shell command lines). Commands are spawned with
 * an argument array, never through a shell, and the ruleset goes on stdin.
 */
import { CommandError, runCommand, summarise } from '../shared/exec.ts';
import type { TableName } from './parse.ts';
import { DroverError } from '../../errors.ts';

/** The two iptables backends: iptables-nft (nf_tables) and iptables-legacy (x_tables). */
export type IptablesVariant = 'nft' | 'legacy';

/**
 * Check that `value` names an iptables variant.
 * @throws Error "unknown iptables variant VALUE" for anything but `nft` or `legacy`.
 */
export function toIptablesVariant(value: string): IptablesVariant {
  if (value !== 'nft' && value !== 'legacy') throw new Error(`unknown iptables variant ${value}`);
  return value;
}

/** The interface the backend talks to; FakeIptables implements it in memory. */
export interface IptablesExec {
  readonly variant: IptablesVariant;
  /**
   * Apply a payload with `iptables-restore --noflush --counters --wait=5`:
   * each `*table ... COMMIT` block is one kernel transaction.
   * @throws RestoreError naming the failing input line.
   */
  restore(input: string): Promise<void>;
  /**
   * `iptables-save -t TABLE`: the live table. A table that does not exist
   * yet gives "".
   */
  save(table: TableName): Promise<string>;
}

/** iptables-restore rejected a payload. */
export class RestoreError extends DroverError {
  constructor(
    readonly stderr: string,
    /** 1-based line of the payload that failed, when iptables-restore said. */
    readonly line: number | undefined,
    /** The text of that line. */
    readonly lineText: string | undefined,
  ) {
    super(`iptables-restore failed${line ? ` at line ${line}: ${lineText ?? ''}` : ''}: ${summarise(stderr)}`);
    this.name = 'RestoreError';
  }
}

/** The 1-based failing line from iptables-restore's error output, if it names one. */
export function failingLine(stderr: string): number | undefined {
  const m = /line:? (\d+)/.exec(stderr);
  return m ? Number(m[1]) : undefined;
}

/** Options of the real iptables I/O. */
export interface SystemIptablesOptions {
  readonly variant: IptablesVariant;
  /** Run inside this network namespace (tests, demo, benchmark). */
  readonly netns?: string;
  /** Timeout of one command, ms (default 120 000). */
  readonly timeoutMs?: number;
}

/** The real iptables, via `iptables-{nft,legacy}-restore` and `-save`. */
export class SystemIptables implements IptablesExec {
  readonly variant: IptablesVariant;

  constructor(private readonly opts: SystemIptablesOptions) {
    this.variant = opts.variant;
  }

  async restore(input: string): Promise<void> {
    const cmd = `iptables-${this.variant}-restore`;
    const res = await runCommand(cmd, ['--noflush', '--counters', '--wait=5'], this.runOpts(input));
    if (res.code !== 0) {
      const line = failingLine(res.stderr);
      throw new RestoreError(res.stderr || `${cmd} exited with ${res.code}`, line, line ? input.split('\n')[line - 1] : undefined);
    }
  }

  async save(table: TableName): Promise<string> {
    const cmd = `iptables-${this.variant}-save`;
    const res = await runCommand(cmd, ['-t', table], this.runOpts());
    if (res.code !== 0) {
      // iptables-nft-save fails when the table has never been created.
      if (/does not exist|Table does not exist|No such file/i.test(res.stderr)) return '';
      throw new CommandError(cmd, res.code, res.stderr);
    }
    return res.stdout;
  }

  private runOpts(input?: string): { netns?: string; input?: string; timeoutMs: number } {
    return {
      ...(this.opts.netns ? { netns: this.opts.netns } : {}),
      ...(input !== undefined ? { input } : {}),
      timeoutMs: this.opts.timeoutMs ?? 120_000,
    };
  }
}

/**
 * Which iptables backend the node uses, the way kube-proxy's iptables-wrapper
 * decides: the variant whose tables hold more rules wins; with no rules in
 * either, nf_tables. A variant whose binaries are missing counts as empty.
 */
export async function detectVariant(netns?: string): Promise<IptablesVariant> {
  const count = async (variant: IptablesVariant): Promise<number> => {
    try {
      const res = await runCommand(`iptables-${variant}-save`, [], netns ? { netns } : {});
      if (res.code !== 0) return -1;
      return res.stdout.split('\n').filter((l) => l.startsWith('-A ')).length;
    } catch {
      return -1;
    }
  };
  const [nft, legacy] = await Promise.all([count('nft'), count('legacy')]);
  if (nft < 0 && legacy < 0) throw new Error('neither iptables-nft-save nor iptables-legacy-save could be run: is iptables installed?');
  return legacy > nft ? 'legacy' : 'nft';
}
