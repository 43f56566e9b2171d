/**
 * The iptables backend's only I/O: `iptables-restore` and `iptables-save`,
 * plus the canary chains and the nf_tables generation of the cheap drift
 * check (canary.ts).
 *
 * A small wrapper written for drover: no Node library runs iptables safely
 * (the old `iptables` package spawns one process per rule and reports no
 * errors; `netfilter` builds shell command lines). Commands are spawned with
 * an argument array, never through a shell, and the ruleset goes on stdin.
 */
import { CommandError, runCommand, summarise } from '../exec.ts';
import type { TableName } from './parse.ts';
import { NftGeneration, type CanaryTable } from './canary.ts';
import { DroverError } from '../../errors.ts';
import { ReadBackTimeoutError } from '../../errors.ts';
import type { IPFamily } from '../../model/types.ts';

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
   * @param opts.timeoutMs give up after this long (read-back.ts explains
   *   why a dump may never end); absent: the exec's own command timeout.
   * @throws ReadBackTimeoutError when `opts.timeoutMs` passed first; CommandError on any other failure.
   */
  save(table: TableName, opts?: { readonly timeoutMs?: number }): Promise<string>;
  /** Whether `chain` exists in `table` (`iptables -w -t TABLE -S CHAIN`, which lists that chain only). @throws as {@link listChain} */
  chainExists(table: CanaryTable, chain: string): Promise<boolean>;
  /**
   * The rules of one chain, without the leading `-A CHAIN ` (`iptables -w
   * -t TABLE -S CHAIN`, which lists that chain only); undefined when the
   * chain does not exist (exit code 1).
   * @throws CommandError for any other failure (e.g. exit 4: the xtables lock was not free within 5 s).
   */
  listChain(table: CanaryTable, chain: string): Promise<readonly string[] | undefined>;
  /** Create the empty `chain` in `table` unless it exists (`iptables -w -t TABLE -N CHAIN`). @throws CommandError */
  ensureChain(table: CanaryTable, chain: string): Promise<void>;
  /** Delete the empty `chain` from `table` (`iptables -w -t TABLE -X CHAIN`). @returns false when it did not exist. @throws CommandError */
  deleteChain(table: CanaryTable, chain: string): Promise<boolean>;
  /**
   * The nf_tables generation (canary.ts), when this exec can read it:
   * iptables-nft in the process's own network namespace. Absent otherwise.
   */
  generation?(): Promise<number>;
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
  /**
   * The IP family whose tables to use: IPv4 (default) runs
   * `iptables-{nft,legacy}-*`, IPv6 `ip6tables-{nft,legacy}-*`.
   */
  readonly family?: IPFamily;
  /** Run inside this network namespace (tests, demo, benchmark). */
  readonly netns?: string;
  /** Timeout of one command, ms (default 120 000). */
  readonly timeoutMs?: number;
}

/** The real iptables, via `iptables-{nft,legacy}-restore` and `-save` (`ip6tables-…` for IPv6). */
export class SystemIptables implements IptablesExec {
  readonly variant: IptablesVariant;
  /** The family of the tables this exec reads and writes. */
  readonly family: IPFamily;
  /** "iptables-nft", "ip6tables-legacy", …: the command prefix. */
  private readonly tool: string;

  /** Present for iptables-nft without a netns (see IptablesExec.generation). */
  readonly generation?: () => Promise<number>;

  constructor(private readonly opts: SystemIptablesOptions) {
    this.variant = opts.variant;
    this.family = opts.family ?? 'IPv4';
    this.tool = `${this.family === 'IPv6' ? 'ip6tables' : 'iptables'}-${opts.variant}`;
    if (opts.variant === 'nft' && opts.netns === undefined) {
      const gen = new NftGeneration();
      this.generation = () => gen.read();
    }
  }

  async restore(input: string): Promise<void> {
    const cmd = `${this.tool}-restore`;
    const res = await runCommand(cmd, ['--noflush', '--counters', '--wait=5'], this.runOpts(input));
    if (res.code !== 0) {
      const line = failingLine(res.stderr);
      throw new RestoreError(res.stderr || `${cmd} exited with ${res.code}`, line, line ? input.split('\n')[line - 1] : undefined);
    }
  }

  async save(table: TableName, opts: { readonly timeoutMs?: number } = {}): Promise<string> {
    const cmd = `${this.tool}-save`;
    const res = await runCommand(cmd, ['-t', table], { ...this.runOpts(), ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}) });
    if (res.timedOut === true && opts.timeoutMs !== undefined) throw new ReadBackTimeoutError(`${cmd} -t ${table}`, opts.timeoutMs);
    if (res.code !== 0) {
      // iptables-nft-save fails when the table has never been created.
      if (/does not exist|Table does not exist|No such file/i.test(res.stderr)) return '';
      throw new CommandError(cmd, res.code, res.stderr);
    }
    return res.stdout;
  }

  async chainExists(table: CanaryTable, chain: string): Promise<boolean> {
    return (await this.listChain(table, chain)) !== undefined;
  }

  async listChain(table: CanaryTable, chain: string): Promise<readonly string[] | undefined> {
    const cmd = this.tool;
    const res = await runCommand(cmd, ['-w', '5', '-t', table, '-S', chain], this.runOpts());
    // Exit 1 is "no such chain" (iptables-nft 1.8.9 words it "chain … is incompatible"); 2 and 4 are usage and resource errors.
    if (res.code === 1) return undefined;
    if (res.code !== 0) throw new CommandError(cmd, res.code, res.stderr);
    const prefix = `-A ${chain} `;
    return res.stdout.split('\n').filter((l) => l.startsWith(prefix)).map((l) => l.slice(prefix.length));
  }

  async ensureChain(table: CanaryTable, chain: string): Promise<void> {
    const cmd = this.tool;
    const res = await runCommand(cmd, ['-w', '5', '-t', table, '-N', chain], this.runOpts());
    if (res.code !== 0 && !/already exists/i.test(res.stderr)) throw new CommandError(cmd, res.code, res.stderr);
  }

  async deleteChain(table: CanaryTable, chain: string): Promise<boolean> {
    if (!(await this.chainExists(table, chain))) return false;
    const cmd = this.tool;
    const res = await runCommand(cmd, ['-w', '5', '-t', table, '-X', chain], this.runOpts());
    if (res.code !== 0) throw new CommandError(cmd, res.code, res.stderr);
    return true;
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
