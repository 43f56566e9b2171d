/**
 * {@link Nfacct} of a named network namespace (`ip netns`): each call runs
 * helper.ts in it (`ip netns exec NS node helper …`), since a netlink
 * socket acts in the namespace of the process that opens it and Node.js
 * cannot change its own. A call costs a process start (a Node.js start,
 * some 100 ms of CPU): fit for a probe at start and a metrics scrape, not
 * for a hot path.
 */
import { NfacctError, NfacctNotFoundError } from '../../errors.ts';
import { moduleArgv } from '../../util/node-module.ts';
import { NetlinkNfacct } from './client.ts';
import { checkCounterName } from './codec.ts';
import type { Nfacct, NfacctCounter } from './types.ts';

/** What runs a command in a namespace (modes/shared/exec.ts runCommand has this shape). */
export type NamespaceRunner = (
  cmd: string,
  args: readonly string[],
  opts: { readonly netns: string; readonly timeoutMs: number },
) => Promise<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }>;

/** How long one helper may run, ms. */
const HELPER_TIMEOUT_MS = 30_000;

/** See the module comment. */
export class NamespaceNfacct implements Nfacct {
  constructor(
    /** The namespace's name, as `ip netns` knows it. */
    private readonly netns: string,
    private readonly run: NamespaceRunner,
  ) {}

  async ensure(name: string): Promise<void> {
    const err = (await this.ensureEach([name])).get(name);
    if (err !== undefined) throw err;
  }

  /** One helper run for all of `names`. */
  async ensureEach(names: readonly string[]): Promise<Map<string, Error | undefined>> {
    const ok = (await this.call(['ensure', ...names.map(checkCounterName)])) as Record<string, { message: string; code?: string } | null>;
    return new Map(names.map((n) => [n, ok[n] === null ? undefined : new NfacctError(ok[n]?.message ?? `nfacct helper: no answer for ${n}`, ok[n]?.code)]));
  }

  async get(name: string): Promise<NfacctCounter> {
    return (await this.call(['get', checkCounterName(name)])) as NfacctCounter;
  }

  async list(): Promise<NfacctCounter[]> {
    return (await this.call(['list'])) as NfacctCounter[];
  }

  close(): void {}

  /**
   * Run the helper with `args`; its `ok` value.
   * @throws NfacctNotFoundError for a get of a missing object (the name is args[1]), NfacctError for any other failure.
   */
  private async call(args: readonly string[]): Promise<unknown> {
    const [node, ...script] = moduleArgv(import.meta.url, 'helper');
    const res = await this.run(node!, [...script, ...args], { netns: this.netns, timeoutMs: HELPER_TIMEOUT_MS });
    let parsed: { ok?: unknown; error?: { message: string; code?: string } } | undefined;
    try {
      parsed = JSON.parse(res.stdout.trim().split('\n').pop() ?? '') as typeof parsed;
    } catch {
      parsed = undefined;
    }
    if (res.code !== 0 || parsed === undefined) throw new NfacctError(`nfacct helper in namespace ${this.netns} failed (exit ${res.code}): ${res.stderr.trim() || res.stdout.trim()}`);
    if (parsed.error !== undefined) {
      if (parsed.error.code === 'ENOENT' && args[0] === 'get') throw new NfacctNotFoundError(args[1]!);
      throw new NfacctError(parsed.error.message, parsed.error.code);
    }
    return parsed.ok;
  }
}

/**
 * The nfacct objects of namespace `netns` (a helper process per call), or
 * of this process's namespace when undefined (a netlink socket of this
 * process).
 */
export function nfacctOf(netns: string | undefined, run: NamespaceRunner): Nfacct {
  return netns === undefined ? new NetlinkNfacct() : new NamespaceNfacct(netns, run);
}
