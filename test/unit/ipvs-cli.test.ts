/**
 * `--mode ipvs` on the command line, where no kernel work happens: the
 * one-line refusals. Runs on any host; the IPVS-unavailable case only where
 * the kernel really has no IPVS (everywhere else drover would go on to
 * program IPVS, which is the VM tests' job).
 */
import test from 'ava';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { IpvsClient, IpvsUnavailableError } from '../../src/kernel/ipvs/client.ts';
import { run } from '../../src/kernel/exec.ts';
import { DROVER } from '../support/drover-bin.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// Each command starts node (the shared compiled build, drover-bin.ts), which takes a minute and more on a busy machine.
const drover = (args: string[]) => run(process.execPath, [DROVER, ...args], { allowFail: true, timeoutMs: 240_000 });
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

test('the inspect commands with --mode ipvs refuse --netns, and a selector without --source, in one line', async (t) => {
  const refusal = "--netns cannot be used with --mode ipvs (IPVS and kube-ipvs0 are programmed over netlink in drover's own network namespace); start drover inside the namespace instead: ip netns exec node1 drover ... --mode ipvs";
  for (const [args, code] of [
    [['chains', '--mode', 'ipvs', '--netns', 'node1'], 1],
    [['trace', '--mode', 'ipvs', '--netns', 'node1', '--src', '10.244.9.2', '--dst', '10.96.0.10:80'], 1],
    [['diff', ...SOURCE, '--mode', 'ipvs', '--netns', 'node1'], 2],
  ] as const) {
    const res = await drover([...args]);
    t.deepEqual([res.code, res.stdout, res.stderr], [code, '', `drover: ${refusal}\n`], args.join(' '));
  }
  const selector = await drover(['chains', '--mode', 'ipvs', 'default/web']);
  t.deepEqual([selector.code, selector.stderr], [1, 'drover: selecting default/web in IPVS mode needs --source: IPVS keeps no service names\n']);
});

test('IPVS options are validated', async (t) => {
  const bad = await drover(['sync', '--once', ...SOURCE, '--mode', 'ipvs', '--ipvs-scheduler', 'fastest']);
  t.is(bad.code, 1);
  t.regex(bad.stderr, /^drover: option '--ipvs-scheduler <name>' argument 'fastest' is invalid\. Allowed choices are rr, wrr, lc, /);
  const long = await drover(['sync', '--once', ...SOURCE, '--mode', 'ipvs', '--ipvs-graceful-period', '25h']);
  t.is(long.code, 1);
  t.regex(long.stderr, /^drover: option '--ipvs-graceful-period <duration>' argument '25h' is invalid\. "25h" is longer than the longest duration drover takes, 24h\n$/);
});

if (state === 'unavailable') {
  test('without IPVS in the kernel, run, sync --once and the inspect commands with --mode ipvs say so in one line', async (t) => {
    for (const args of [
      ['run', ...SOURCE, '--mode', 'ipvs'],
      ['sync', '--once', ...SOURCE, '--mode', 'ipvs'],
      ['chains', '--mode', 'ipvs'],
      ['trace', '--mode', 'ipvs', '--src', '10.244.9.2', '--dst', '10.96.0.10:80'],
      ['diff', ...SOURCE, '--mode', 'ipvs'],
    ]) {
      const res = await drover(args);
      t.is(res.code, args[0] === 'diff' ? 2 : 1, args.join(' '));
      t.is(res.stdout, '');
      t.is(
        res.stderr,
        'drover: --mode ipvs: IPVS is not available in this kernel (no generic netlink family IPVS; is the ip_vs module installed?); use --mode iptables\n',
      );
    }
  });

  test('status reads the kernel in the mode drover run recorded, unless --mode says otherwise', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'drover-status-'));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, 'status.json');
    const sync = { at: '2025-06-01T10:00:00.000Z', kind: 'full', durationMs: 1, error: null, services: 0, endpoints: 0 };
    const record = { version: 1, pid: 1, mode: 'ipvs', iptablesBackend: 'auto', netns: null, source: join(ROOT, 'examples'), render: { clusterCidr: null, masqueradeAll: false, serviceCidr: '10.96.0.0/12' }, ipvs: { scheduler: 'rr' }, lastSync: sync, lastSuccess: sync };
    await writeFile(file, JSON.stringify(record));
    const res = await drover(['status', '--status-file', file]);
    t.deepEqual([res.code, res.stdout], [1, '']);
    t.regex(res.stderr, /^drover: --mode ipvs: IPVS is not available in this kernel/);
  });
} else {
  test.skip(`IPVS-unavailable CLI test skipped: ${state}`, () => {});
}
