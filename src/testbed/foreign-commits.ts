/**
 * Another program's nf_tables commits, for the tests and measurements of
 * what they cost drover: one `/usr/sbin/nft -i` process (inside a named
 * network namespace when asked) reads one command a line, and each line is
 * a transaction of its own, so writing a line every few milliseconds makes
 * that many commits without starting a process per commit.
 */
import { spawn } from 'node:child_process';
import { argvFor } from '../kernel/exec.ts';

/** Options of {@link commitForeignElements}. */
export interface ForeignCommits {
  /** Run nft inside this named network namespace (`ip netns exec`); default: this process's. */
  readonly netns?: string;
  /** The set that takes the elements, as nft names it, e.g. `ip other keep` (type ipv4_addr; it must exist). */
  readonly set: string;
  /** Time between two commits, ms. */
  readonly everyMs: number;
  /** How long to go on, ms. */
  readonly forMs: number;
}

/**
 * Add one element (10.x.y.z, a new one each time) to `set` every `everyMs`
 * for `forMs`, each in a transaction of its own, then wait for nft to end.
 * @returns the commits asked for (each line written) and the time it took, s.
 * @throws Error naming nft's stderr when it exits with another code than 0.
 */
export async function commitForeignElements(opts: ForeignCommits): Promise<{ commits: number; seconds: number }> {
  const [file, ...args] = argvFor('/usr/sbin/nft', ['-i'], opts.netns);
  const nft = spawn(file!, args, { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  nft.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const exited = new Promise<number | null>((resolve) => nft.once('exit', resolve));
  const started = Date.now();
  let commits = 0;
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      commits++;
      nft.stdin.write(`add element ${opts.set} { 10.${(commits >> 16) & 255}.${(commits >> 8) & 255}.${commits & 255} }\n`);
      if (Date.now() - started >= opts.forMs) {
        clearInterval(timer);
        resolve();
      }
    }, opts.everyMs);
  });
  nft.stdin.end();
  const code = await exited;
  if (code !== 0) throw new Error(`nft -i exited with ${code}: ${stderr.trim()}`);
  return { commits, seconds: (Date.now() - started) / 1000 };
}
