/** `--config`: kube-proxy's KubeProxyConfiguration as the defaults of drover's flags. */
import test from 'ava';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { goDurationMs, loadConfigFor, settingName } from '../../src/cli/config-file.ts';
import { checkSyncPeriods } from '../../src/cli/options.ts';
import { buildProgram } from '../../src/cli/program.ts';

const HEAD = 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n';

/** The options `command` gets from `config` (YAML) and `flags`, and the warning lines. */
async function effective(config: string, flags: string[] = [], command = 'run'): Promise<{ opts: Record<string, unknown>; warnings: string[] }> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-config-'));
  try {
    const path = join(dir, 'kube-proxy.yaml');
    await writeFile(path, config);
    const program = buildProgram();
    const argv = ['node', 'drover', command, '--config', path, '--source', 'examples', ...flags];
    const warnings: string[] = [];
    loadConfigFor(program, argv, (l) => warnings.push(l.replace(path, 'F')));
    let opts: Record<string, unknown> = {};
    program.commands.find((c) => c.name() === command)!.action(async (o: Record<string, unknown>) => void (opts = o));
    await program.parseAsync(argv);
    return { opts, warnings };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The error loadConfigFor throws for `config`, with the file's path as F. */
async function refused(config: string): Promise<string> {
  try {
    await effective(config);
  } catch (err) {
    return (err as Error).message.replace(/--config \S+:/, '--config F:');
  }
  return 'accepted';
}

test('every supported field becomes the value of its flag', async (t) => {
  const { opts, warnings } = await effective(
    `${HEAD}mode: ipvs\nclusterCIDR: 10.244.0.0/16\nmetricsBindAddress: 0.0.0.0:9100\nhealthzBindAddress: "[::1]:9101"\n` +
      'hostnameOverride: Node-A\nclientConnection:\n  kubeconfig: /etc/drover/kubeconfig\n  qps: 5\n' +
      'iptables:\n  masqueradeAll: true\nipvs:\n  scheduler: wrr\n  syncPeriod: 1m30s\n  minSyncPeriod: 250ms\n',
  );
  t.deepEqual(warnings, ['drover: --config F: not supported by drover, ignored: clientConnection.qps']);
  t.like(opts, {
    mode: 'ipvs',
    hostnameOverride: 'node-a',
    kubeconfig: '/etc/drover/kubeconfig',
    clusterCidr: '10.244.0.0/16',
    masqueradeAll: true,
    ipvsScheduler: 'wrr',
    syncPeriod: 90_000,
    minSyncPeriod: 250,
    metricsBindAddress: { ip: { text: '0.0.0.0' }, port: 9100 },
    healthzBindAddress: { ip: { text: '::1' }, port: 9101 },
  });
});

test("the top-level sync periods win over the mode's section; another mode's section is not used; an address without a port gets kube-proxy's", async (t) => {
  const { opts } = await effective(`${HEAD}syncPeriod: 45s\niptables:\n  syncPeriod: 10s\n  minSyncPeriod: 2s\nipvs:\n  minSyncPeriod: 5s\nmetricsBindAddress: 0.0.0.0\nhealthzBindAddress: ""\n`);
  t.like(opts, { mode: 'iptables', syncPeriod: 45_000, minSyncPeriod: 2000, metricsBindAddress: { port: 10249 } });
  t.like(opts.healthzBindAddress as object, { port: 10256 }, 'an empty value is not set: the default stays');
});

test('a flag on the command line overrides the file', async (t) => {
  const { opts } = await effective(`${HEAD}clusterCIDR: 10.244.0.0/16\niptables:\n  minSyncPeriod: 5s\n`, ['--cluster-cidr', '10.32.0.0/12', '--min-sync-period', '100ms']);
  t.like(opts, { clusterCidr: '10.32.0.0/12', minSyncPeriod: 100 });
});

test('the fields drover does not support are named once, in one line; the file is still used', async (t) => {
  const { opts, warnings } = await effective(
    `${HEAD}bindAddress: 0.0.0.0\nclusterCIDR: 10.244.0.0/16\nconntrack:\n  maxPerCore: 32768\n  min: 131072\niptables:\n  masqueradeBit: 14\nfeatureGates: {}\nbogus: 1\n`,
  );
  t.deepEqual(warnings, ['drover: --config F: not supported by drover, ignored: bindAddress, conntrack.maxPerCore, conntrack.min, iptables.masqueradeBit, bogus']);
  t.is(opts.clusterCidr, '10.244.0.0/16');
});

test('sync takes the fields it has and leaves those of run alone', async (t) => {
  const { opts, warnings } = await effective(`${HEAD}clusterCIDR: 10.244.0.0/16\nmetricsBindAddress: 0.0.0.0:9100\niptables:\n  syncPeriod: 1m\n`, ['--once'], 'sync');
  t.deepEqual(warnings, []);
  t.like(opts, { clusterCidr: '10.244.0.0/16', once: true });
  t.false('metricsBindAddress' in opts);
});

test('an error names the file and the field', async (t) => {
  t.is(await refused(`${HEAD}clusterCIDR: 10.244.0.0/33\n`), '--config F: clusterCIDR: "10.244.0.0/33" is not a valid IPv4 CIDR (expected e.g. "10.96.0.0/12")');
  t.is(await refused(`${HEAD}mode: userspace\n`), '--config F: mode: Allowed choices are iptables, ipvs, nftables.');
  t.is(await refused(`${HEAD}iptables:\n  syncPeriod: soon\n`), '--config F: iptables.syncPeriod: "soon" is not a duration (e.g. 30s, 1m0s, 500ms)');
  t.is(await refused(`${HEAD}iptables:\n  masqueradeAll: "yes"\n`), '--config F: iptables.masqueradeAll: expected true or false, got "yes"');
  t.is(await refused(`${HEAD}metricsBindAddress: localhost:10249\n`), '--config F: metricsBindAddress: "localhost:10249" is not an address to listen on (IP:PORT, or [IPv6]:PORT; "" for none)');
  t.is(await refused('apiVersion: kubeproxy.config.k8s.io/v1beta9\nkind: KubeProxyConfiguration\n'), '--config F: apiVersion: expected kubeproxy.config.k8s.io/v1alpha1, got "kubeproxy.config.k8s.io/v1beta9"');
  t.is(await refused('apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n'), '--config F: kind: expected KubeProxyConfiguration, got "KubeletConfiguration"');
  t.is(await refused(`${HEAD}mode: [\n`), '--config F: not YAML or JSON: Flow sequence in block collection must be sufficiently indented and end with a ] at line 4, column 1');
});

test('Go durations', (t) => {
  t.is(goDurationMs('30s'), 30_000);
  t.is(goDurationMs('1m0s'), 60_000);
  t.is(goDurationMs('1h2m3.5s'), 3_723_500);
  t.is(goDurationMs('500ms'), 500);
  t.is(goDurationMs('0'), 0);
  for (const bad of ['', '30', '-1s', '1 s', '1d']) t.throws(() => goDurationMs(bad), undefined, bad);
});

test("kubeadm's kube-proxy configuration is read as kube-proxy reads it: its zeros are not set", async (t) => {
  const { readFile } = await import('node:fs/promises');
  const { opts, warnings } = await effective(await readFile(new URL('../fixtures/config/kubeadm-kube-proxy.yaml', import.meta.url), 'utf8'));
  t.deepEqual(warnings, ['drover: --config F: not supported by drover, ignored: bindAddress']);
  t.like(opts, { mode: 'iptables', clusterCidr: '10.244.0.0/16', kubeconfig: '/var/lib/kube-proxy/kubeconfig.conf', syncPeriod: 30_000, minSyncPeriod: 1000, masqueradeAll: false });
});

test("the sync periods of the mode in use: a --mode flag wins over the file's mode; keys named like Object's members are only unsupported", async (t) => {
  const { opts, warnings } = await effective(`${HEAD}mode: iptables\niptables:\n  syncPeriod: 45s\nipvs:\n  syncPeriod: 50s\nconstructor: 1\ntoString: x\n`, ['--mode', 'ipvs']);
  t.like(opts, { mode: 'ipvs', syncPeriod: 50_000 });
  t.deepEqual(warnings, ['drover: --config F: not supported by drover, ignored: constructor, toString']);
});

test('a sync-period error names the field when the file set the value, and the flag when the command line did', async (t) => {
  const message = async (config: string, flags: string[] = []) => {
    const dir = await mkdtemp(join(tmpdir(), 'drover-config-'));
    try {
      const path = join(dir, 'kube-proxy.yaml');
      await writeFile(path, config);
      const program = buildProgram();
      const argv = ['node', 'drover', 'run', '--config', path, '--source', 'examples', ...flags];
      loadConfigFor(program, argv, () => {});
      const run = program.commands.find((c) => c.name() === 'run')!;
      let opts = { minSyncPeriod: 0, syncPeriod: 0 };
      run.action(async (o: typeof opts) => void (opts = o));
      await program.parseAsync(argv);
      checkSyncPeriods(opts, (flag) => settingName(run, flag));
      return 'accepted';
    } catch (err) {
      return (err as Error).message.replace(/--config \S+:/g, '--config F:');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  };
  t.is(await message(`${HEAD}iptables:\n  syncPeriod: 500ms\n`), '--config F: iptables.syncPeriod must be at least 1s (got 500 ms)');
  t.is(
    await message(`${HEAD}syncPeriod: 10s\niptables:\n  minSyncPeriod: 20s\n`),
    '--config F: iptables.minSyncPeriod (20000 ms) must not be longer than --config F: syncPeriod (10000 ms)',
  );
  t.is(await message(`${HEAD}iptables:\n  minSyncPeriod: 20s\n`, ['--sync-period', '10s']), '--config F: iptables.minSyncPeriod (20000 ms) must not be longer than --sync-period (10000 ms)');
  t.is(await message(`${HEAD}iptables:\n  syncPeriod: 500ms\n`, ['--sync-period', '2s']), 'accepted');
  t.is(await message(`${HEAD}iptables:\n  minSyncPeriod: 2s\n`, ['--sync-period', '999ms']), '--sync-period must be at least 1s (got 999 ms)');
});

test('nodePortAddresses becomes --nodeport-addresses, for run; a value that is no CIDR names the field', async (t) => {
  const { opts, warnings } = await effective(`${HEAD}nodePortAddresses: [10.0.0.0/8, "fd00::/64"]\n`);
  t.deepEqual(warnings, []);
  t.deepEqual((opts.nodeportAddresses as { text: string }[]).map((c) => c.text), ['10.0.0.0/8', 'fd00::/64']);
  t.regex(await refused(`${HEAD}nodePortAddresses: [10.0.0.0/33]\n`), /^--config F: nodePortAddresses: "10.0.0.0\/33" is not a CIDR/);
  t.deepEqual((await effective(`${HEAD}nodePortAddresses: [10.0.0.0/8]\n`, [], 'sync')).warnings, [], 'sync leaves a field of run alone');
});

test("nodePortAddresses: kube-proxy's primary is named as unsupported, not refused; every address is used", async (t) => {
  const primary = await effective(`${HEAD}nodePortAddresses: [primary]\n`);
  t.is(primary.opts.nodeportAddresses, undefined);
  t.deepEqual(primary.warnings, ['drover: --config F: not supported by drover, ignored: nodePortAddresses (primary)']);
});

test("iptables.localhostNodePorts: true becomes --nodeport-localhost in iptables mode; in another mode it is named as unused", async (t) => {
  t.like(await effective(`${HEAD}iptables:\n  localhostNodePorts: true\n`), { opts: { nodeportLocalhost: true }, warnings: [] });
  t.like(await effective(`${HEAD}iptables:\n  localhostNodePorts: false\n`), { opts: { nodeportLocalhost: false }, warnings: [] });
  t.like(await effective(`${HEAD}mode: nftables\niptables:\n  localhostNodePorts: true\n`), {
    opts: { nodeportLocalhost: false },
    warnings: ['drover: --config F: not supported by drover, ignored: iptables.localhostNodePorts (mode nftables)'],
  });
  t.regex(await refused(`${HEAD}iptables:\n  localhostNodePorts: "yes"\n`), /^--config F: iptables.localhostNodePorts: expected true or false, got "yes"$/);
});
