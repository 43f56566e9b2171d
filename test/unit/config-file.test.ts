/** `--config`: kube-proxy's KubeProxyConfiguration as the defaults of drover's flags. */
import test from 'ava';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { prepareCommandLine } from '../../src/cli/command-line.ts';
import { settingName } from '../../src/cli/config-file.ts';
import { minSyncPeriod } from '../../src/cli/proxy-config.ts';
import { allModes } from '../../src/modes/registry.ts';
import { checkSyncPeriods } from '../../src/cli/options.ts';
import { buildProgram } from '../../src/cli/program.ts';

const HEAD = 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n';

/** The options `command` gets from `config` (YAML) and `flags`, and the warning lines; `--source examples` unless `source` is false. */
async function effective(config: string, flags: string[] = [], command = 'run', source = true): Promise<{ opts: Record<string, unknown>; warnings: string[] }> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-config-'));
  try {
    const path = join(dir, 'kube-proxy.yaml');
    await writeFile(path, config);
    const program = buildProgram();
    const argv = ['node', 'drover', command, '--config', path, ...(source ? ['--source', 'examples'] : []), ...flags];
    const warnings: string[] = [];
    const args = prepareCommandLine(program, argv, (l) => warnings.push(l.replace(path, 'F')));
    let opts: Record<string, unknown> = {};
    program.commands.find((c) => c.name() === command)!.action(async (o: Record<string, unknown>) => void (opts = o));
    await program.parseAsync(args);
    return { opts, warnings };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The error `config` (and `flags`) end in, with the file's path as F. */
async function refused(config: string, flags: string[] = []): Promise<string> {
  try {
    await effective(config, flags);
  } catch (err) {
    return (err as Error).message.replace(/--config \S+:/, '--config F:');
  }
  return 'accepted';
}

test('every supported field becomes the value of its flag, quietly', async (t) => {
  const { opts, warnings } = await effective(
    `${HEAD}mode: ipvs\nclusterCIDR: 10.244.0.0/16\nmetricsBindAddress: 0.0.0.0:9100\nhealthzBindAddress: "[::1]:9101"\n` +
      'hostnameOverride: Node-A\nclientConnection:\n  kubeconfig: /etc/drover/kubeconfig\n  qps: 5\n' +
      'iptables:\n  masqueradeAll: true\n  masqueradeBit: 14\nipvs:\n  scheduler: wrr\n  syncPeriod: 1m30s\n  minSyncPeriod: 250ms\n' +
      'detectLocalMode: ClusterCIDR\nlogging:\n  verbosity: 2\n',
  );
  t.deepEqual(warnings, []);
  t.like(opts, {
    mode: 'ipvs',
    hostnameOverride: 'node-a',
    kubeconfig: '/etc/drover/kubeconfig',
    clusterCidr: '10.244.0.0/16',
    masqueradeAll: true,
    ipvsScheduler: 'wrr',
    syncPeriod: 90_000,
    minSyncPeriod: 250,
    detectLocalMode: 'ClusterCIDR',
    verbosity: 2,
    metricsBindAddress: { ip: { text: '0.0.0.0' }, port: 9100 },
    healthzBindAddress: { ip: { text: '::1' }, port: 9101 },
  });
});

test("the sync periods of the mode in use; another mode's section is not used; an address without a port gets kube-proxy's", async (t) => {
  const { opts } = await effective(`${HEAD}iptables:\n  syncPeriod: 45s\n  minSyncPeriod: 2s\nipvs:\n  minSyncPeriod: 5s\nmetricsBindAddress: 0.0.0.0\nhealthzBindAddress: ""\n`);
  t.like(opts, { mode: 'iptables', syncPeriod: 45_000, minSyncPeriod: 2000, metricsBindAddress: { port: 10249 } });
  t.like(opts.healthzBindAddress as object, { port: 10256 }, 'an empty value is not set: the default stays');
  t.like((await effective(`${HEAD}mode: nftables\niptables:\n  syncPeriod: 45s\n  masqueradeAll: true\nnftables:\n  syncPeriod: 1m\n`)).opts, { syncPeriod: 60_000, masqueradeAll: false });
});

test('a flag on the command line overrides the file', async (t) => {
  const { opts } = await effective(`${HEAD}clusterCIDR: 10.244.0.0/16\niptables:\n  minSyncPeriod: 5s\n`, ['--cluster-cidr', '10.32.0.0/12', '--min-sync-period', '100ms']);
  t.like(opts, { clusterCidr: '10.32.0.0/12', minSyncPeriod: 100 });
});

test('values drover cannot honour are refused in one line naming each field; --config-unsupported=warn names them and goes on', async (t) => {
  const config = `${HEAD}mode: ipvs\nbindAddress: 0.0.0.0\nclusterCIDR: 10.244.0.0/16\niptables:\n  masqueradeBit: 13\nipvs:\n  strictARP: true\nfeatureGates: {}\noomScoreAdj: 0\ndetectLocalMode: BridgeInterface\n`;
  const why =
    'iptables.masqueradeBit=13 (drover marks packets to masquerade with bit 14 (0x4000) in every mode, kube-proxy\'s default); ' +
    'ipvs.strictARP (drover does not set arp_ignore and arp_announce; set them on the node); ' +
    "oomScoreAdj=0 (drover does not set its OOM score; set it where drover is started (systemd's OOMScoreAdjust=, the pod's priority class)); " +
    'detectLocalMode=BridgeInterface (drover tells local traffic by its source address only: ClusterCIDR or NodeCIDR)';
  t.is(await refused(config), `not supported by drover: --config F: ${why}; to start without them, add --config-unsupported=warn`);
  const { opts, warnings } = await effective(config, ['--config-unsupported', 'warn']);
  t.deepEqual(warnings, [`drover: not supported by drover: --config F: ${why}; going on without them (--config-unsupported=warn)`]);
  t.like(opts, { clusterCidr: '10.244.0.0/16', detectLocalMode: 'ClusterCIDR' });
});

test('a field kube-proxy does not have is an error naming it, with the field it was probably meant to be', async (t) => {
  t.is(
    await refused(`${HEAD}iptable:\n  syncPeriod: 30s\nclusterCidr: 10.0.0.0/8\nbogus: 1\nsyncPeriod: 1m\nconstructor: 1\n`),
    '--config F: not a field of KubeProxyConfiguration kubeproxy.config.k8s.io/v1alpha1: iptable.syncPeriod (did you mean iptables.syncPeriod?); ' +
      'clusterCidr (did you mean clusterCIDR?); bogus; syncPeriod (did you mean iptables.syncPeriod or ipvs.syncPeriod or nftables.syncPeriod?); constructor',
  );
  t.is(await refused(`${HEAD}iptables: 3\n`), '--config F: iptables: expected a section of fields, got 3');
  t.is(await refused(`${HEAD}ipvs:\n  masqueradeAll: true\n`), '--config F: not a field of KubeProxyConfiguration kubeproxy.config.k8s.io/v1alpha1: ipvs.masqueradeAll (did you mean iptables.masqueradeAll?)');
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
  t.is(await refused(`${HEAD}iptables:\n  syncPeriod: soon\n`), '--config F: iptables.syncPeriod: "soon" is not a duration: expected a number at "soon" (e.g. 30s, 1m0s, 500ms, 1h2m3.5s)');
  t.is(await refused(`${HEAD}iptables:\n  syncPeriod: 30\n`), '--config F: iptables.syncPeriod: expected a string, got 30');
  t.is(await refused(`${HEAD}iptables:\n  masqueradeAll: "yes"\n`), '--config F: iptables.masqueradeAll: expected true or false, got "yes"');
  t.is(await refused(`${HEAD}metricsBindAddress: localhost:10249\n`), '--config F: metricsBindAddress: "localhost:10249" is not an address to listen on (IP:PORT, or [IPv6]:PORT; "" for none)');
  t.is(await refused('apiVersion: kubeproxy.config.k8s.io/v1beta9\nkind: KubeProxyConfiguration\n'), '--config F: apiVersion: expected kubeproxy.config.k8s.io/v1alpha1, got "kubeproxy.config.k8s.io/v1beta9"');
  t.is(await refused('apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n'), '--config F: kind: expected KubeProxyConfiguration, got "KubeletConfiguration"');
  t.is(await refused(`${HEAD}mode: [\n`), '--config F: not YAML or JSON: Flow sequence in block collection must be sufficiently indented and end with a ] at line 4, column 1');
});

test("kubeadm's kube-proxy configuration is read as kube-proxy reads it: its zeros and nulls are not set, and nothing is refused", async (t) => {
  const { readFile } = await import('node:fs/promises');
  const { opts, warnings } = await effective(await readFile(new URL('../fixtures/config/kubeadm-kube-proxy.yaml', import.meta.url), 'utf8'));
  t.deepEqual(warnings, []);
  t.like(opts, { mode: 'iptables', clusterCidr: '10.244.0.0/16', kubeconfig: '/var/lib/kube-proxy/kubeconfig.conf', syncPeriod: 30_000, masqueradeAll: false });
  t.is(opts.minSyncPeriod, undefined, 'its minSyncPeriod: 0s is not set');
  t.is(minSyncPeriod(opts, allModes()), 1000, "so iptables mode's default applies");
  t.deepEqual(opts.bindAddress, [], '0.0.0.0 is no node IP');
});

test("the sync periods of the mode in use: a --mode flag wins over the file's mode", async (t) => {
  const { opts, warnings } = await effective(`${HEAD}mode: iptables\niptables:\n  syncPeriod: 45s\nipvs:\n  syncPeriod: 50s\n`, ['--mode', 'ipvs']);
  t.like(opts, { mode: 'ipvs', syncPeriod: 50_000 });
  t.deepEqual(warnings, []);
});

test('a sync-period error names the field when the file set the value, and the flag when the command line did', async (t) => {
  const message = async (config: string, flags: string[] = []) => {
    const dir = await mkdtemp(join(tmpdir(), 'drover-config-'));
    try {
      const path = join(dir, 'kube-proxy.yaml');
      await writeFile(path, config);
      const program = buildProgram();
      const argv = ['node', 'drover', 'run', '--config', path, '--source', 'examples', ...flags];
      const args = prepareCommandLine(program, argv, () => {});
      const run = program.commands.find((c) => c.name() === 'run')!;
      let opts = { minSyncPeriod: 0, syncPeriod: 0 };
      run.action(async (o: typeof opts) => void (opts = o));
      await program.parseAsync(args);
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
    await message(`${HEAD}iptables:\n  syncPeriod: 10s\n  minSyncPeriod: 20s\n`),
    '--config F: iptables.minSyncPeriod (20000 ms) must not be longer than --config F: iptables.syncPeriod (10000 ms)',
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

test("nodePortAddresses: kube-proxy's primary is taken, alone", async (t) => {
  const primary = await effective(`${HEAD}nodePortAddresses: [primary]\n`);
  t.deepEqual(primary.warnings, []);
  t.true((primary.opts.nodeportAddresses as { primary?: true }).primary);
  t.regex(await refused(`${HEAD}nodePortAddresses: [primary, 10.0.0.0/8]\n`), /^--config F: nodePortAddresses: "primary,10.0.0.0\/8": primary stands alone, without CIDRs$/);
});

test('iptables.localhostNodePorts becomes --nodeport-localhost in iptables mode; in another mode it has no effect, as in kube-proxy', async (t) => {
  t.like(await effective(`${HEAD}iptables:\n  localhostNodePorts: true\n`), { opts: { nodeportLocalhost: true }, warnings: [] });
  t.like(await effective(`${HEAD}iptables:\n  localhostNodePorts: false\n`), { opts: { nodeportLocalhost: false }, warnings: [] });
  t.like(await effective(`${HEAD}mode: nftables\niptables:\n  localhostNodePorts: true\n`), { opts: { nodeportLocalhost: false }, warnings: [] });
  t.regex(await refused(`${HEAD}iptables:\n  localhostNodePorts: "yes"\n`), /^--config F: iptables.localhostNodePorts: expected true or false, got "yes"$/);
});

test('conntrack.*: each field sets its kube-proxy flag (durations in ms, whole seconds); 0 and false leave the setting alone; a bad value names the field', async (t) => {
  const { opts, warnings } = await effective(
    `${HEAD}conntrack:\n  maxPerCore: 32768\n  min: 131072\n  tcpEstablishedTimeout: 24h0m0s\n  tcpCloseWaitTimeout: 1h0m0s\n  udpTimeout: 30s\n  udpStreamTimeout: 2m0s\n  tcpBeLiberal: true\n`,
  );
  t.deepEqual(warnings, []);
  t.like(opts, {
    conntrackMaxPerCore: 32768,
    conntrackMin: 131072,
    conntrackTcpTimeoutEstablished: 86_400_000,
    conntrackTcpTimeoutCloseWait: 3_600_000,
    conntrackUdpTimeout: 30_000,
    conntrackUdpTimeoutStream: 120_000,
    conntrackTcpBeLiberal: true,
  });
  const zero = await effective(`${HEAD}conntrack:\n  maxPerCore: 0\n  min: null\n  tcpEstablishedTimeout: 0s\n  udpTimeout: 0s\n  tcpBeLiberal: false\n`, [], 'sync');
  t.deepEqual(zero.warnings, []);
  t.like(zero.opts, { conntrackMaxPerCore: 0, conntrackMin: 0, conntrackTcpTimeoutEstablished: 0, conntrackUdpTimeout: 0 });
  t.is(zero.opts.conntrackTcpBeLiberal, undefined);
  await t.throwsAsync(effective(`${HEAD}conntrack:\n  maxPerCore: -1\n`), { message: /: conntrack\.maxPerCore: "-1" is not a whole number of connections$/ });
  await t.throwsAsync(effective(`${HEAD}conntrack:\n  udpTimeout: 1500ms\n`), { message: /: conntrack\.udpTimeout: "1500ms" is not a whole number of seconds/ });
});

test("drover's own section: drover.dns.interceptClusterDns and drover.dns.clusterDns become --dns-intercept-cluster-dns and --cluster-dns; a bad value names the field", async (t) => {
  t.like(await effective(`${HEAD}drover:\n  dns:\n    address: 169.254.20.10\n    interceptClusterDns: true\n    clusterDns: 10.96.0.10\n`), {
    opts: { dnsAddress: '169.254.20.10', dnsInterceptClusterDns: true, clusterDns: '10.96.0.10' },
    warnings: [],
  });
  t.regex(await refused(`${HEAD}drover:\n  dns:\n    interceptClusterDns: "yes"\n`), /^--config F: drover\.dns\.interceptClusterDns: expected true or false, got "yes"$/);
  t.regex(await refused(`${HEAD}drover:\n  dns:\n    clusterDns: 10.96.0\n`), /drover\.dns\.clusterDns.*"10\.96\.0" is not an IPv4 or IPv6 address/);
});
