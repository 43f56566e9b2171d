/**
 * `--mode ipvs` on the command line, where no kernel work happens: the
 * one-line refusals. Runs on any host; the IPVS-unavailable case only where
 * the kernel really has no IPVS (everywhere else drover would go on to
 * program IPVS, which is the VM tests' job).
 */
import test from 'ava';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { IpvsClient, IpvsUnavailableError } from '../../src/backends/ipvs/netlink.ts';
import { run } from '../../src/testbed/exec.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const drover = (args: string[]) => run(process.execPath, [join(ROOT, 'bin/drover.js'), ...args], { allowFail: true, timeoutMs: 60_000 });
const SOURCE = ['--source', join(ROOT, 'examples')];

/** 'unavailable' when the family lookup says there is no IPVS, else why the test cannot tell. */
async function ipvsState(): Promise<'unavailable' | string> {
  if (process.platform !== 'linux') return `needs Linux, this is ${process.platform}`;
  try {
    (await IpvsClient.open()).close();
    return 'this kernel has IPVS (the VM tests cover IPVS mode there)';
  } catch (err) {
    return err instanceof IpvsUnavailableError ? 'unavailable' : `IPVS family lookup failed: ${(err as Error).message}`;
  }
}

const state = await ipvsState();

test('--netns with --mode ipvs is refused in one line, before anything is touched', async (t) => {
  for (const cmd of ['run', 'sync']) {
    const res = await drover([cmd, ...(cmd === 'sync' ? ['--once'] : []), ...SOURCE, '--mode', 'ipvs', '--netns', 'node1']);
    t.is(res.code, 1);
    t.is(res.stdout, '');
    t.is(
      res.stderr,
      "drover: --netns cannot be used with --mode ipvs (IPVS and kube-ipvs0 are programmed over netlink in drover's own network namespace); start drover inside the namespace instead: ip netns exec node1 drover ... --mode ipvs\n",
    );
  }
});

test('IPVS options are validated', async (t) => {
  const bad = await drover(['sync', '--once', ...SOURCE, '--mode', 'ipvs', '--ipvs-scheduler', 'fastest']);
  t.is(bad.code, 1);
  t.regex(bad.stderr, /^drover: option '--ipvs-scheduler <name>' argument 'fastest' is invalid\. Allowed choices are rr, wrr, lc, /);
  const long = await drover(['sync', '--once', ...SOURCE, '--mode', 'ipvs', '--ipvs-graceful-period', '25h']);
  t.is(long.code, 1);
  t.regex(long.stderr, /^drover: option '--ipvs-graceful-period <duration>' argument '25h' is invalid\. "25h" is longer than 24h\n$/);
});

if (state === 'unavailable') {
  test('without IPVS in the kernel, run and sync --once --mode ipvs say so in one line and exit 1', async (t) => {
    for (const args of [['run', ...SOURCE, '--mode', 'ipvs'], ['sync', '--once', ...SOURCE, '--mode', 'ipvs']]) {
      const res = await drover(args);
      t.is(res.code, 1, args.join(' '));
      t.is(res.stdout, '');
      t.is(
        res.stderr,
        'drover: --mode ipvs: IPVS is not available in this kernel (no generic netlink family IPVS; is the ip_vs module installed?); use --mode iptables\n',
      );
    }
  });
} else {
  test.skip(`IPVS-unavailable CLI test skipped: ${state}`, () => {});
}
