import test from 'ava';
import { Command } from 'commander';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { prepareCommandLine } from '../../src/cli/command-line.ts';
import { configz } from '../../src/cli/configz.ts';
import { checkProxyConfig, commandProxyConfig, proxyConfig, sourceOptions } from '../../src/cli/proxy-config.ts';
import { conntrackOptions, kernelOptions, renderOptions, syncPeriodOptions } from '../../src/cli/options.ts';
import { buildProgram } from '../../src/cli/program.ts';
import { syncModeOptions } from '../../src/cli/setup.ts';
import type { ProxyConfig } from '../../src/config/proxy-config.ts';
import { iptablesMode } from '../../src/modes/iptables/driver.ts';
import { ipvsMode } from '../../src/modes/ipvs/driver.ts';
import { NFTABLES_MIN_SYNC_PERIOD_MS } from '../../src/modes/nftables/driver.ts';
import { allModes } from '../../src/modes/registry.ts';

/** The options of a command with `sync`'s flags and the sync periods, as commander parses `args`. */
function parsed(args: readonly string[]): Readonly<Record<string, unknown>> {
  const cmd = new Command('sync').exitOverride();
  for (const o of [...kernelOptions(), ...renderOptions(), ...syncPeriodOptions(), ...conntrackOptions(), ...syncModeOptions()]) cmd.addOption(o);
  cmd.parse([...args], { from: 'user' });
  return cmd.opts();
}

const HEAD = 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n';

/**
 * The ProxyConfig `drover COMMAND` builds from `args`, as its action builds
 * it (commandProxyConfig) after the command line was prepared (kube-proxy's
 * flags, `--config`); with `file`, that text is the `--config` file.
 */
async function configOf(command: string, args: readonly string[], file?: string): Promise<ProxyConfig> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-proxy-config-'));
  try {
    const path = join(dir, 'kube-proxy.yaml');
    if (file !== undefined) await writeFile(path, `${HEAD}${file}`);
    const program = buildProgram();
    const argv = ['node', 'drover', command, '--source', 'examples', ...(file !== undefined ? ['--config', path] : []), ...args];
    const cmd = program.commands.find((c) => c.name() === command)!;
    let config: ProxyConfig | undefined;
    cmd.action(() => void (config = commandProxyConfig(cmd)));
    await program.parseAsync(prepareCommandLine(program, argv, () => undefined));
    if (config === undefined) throw new Error(`drover ${command} did not run its action`);
    return config;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

test('the parsed flags land in their sections, each mode its own flags under its name', (t) => {
  const config = proxyConfig(
    parsed(['--mode', 'ipvs', '--source', 'examples', '--cluster-cidr', '10.244.0.0/16', '--ipvs-scheduler', 'wrr', '--sync-period', '1m', '--conntrack-min', '5']),
    allModes(),
  );
  t.like(config.kernel, { mode: 'ipvs', iptablesBackend: 'auto', logLevel: 'info', logFormat: 'json' });
  t.like(config.render, { source: 'examples', clusterCidr: '10.244.0.0/16', masqueradeAll: false, serviceCidr: '10.96.0.0/12' });
  t.deepEqual(config.sync, { minSyncPeriod: 1000, syncPeriod: 60_000 });
  t.is(config.conntrack.conntrackMin, 5);
  t.is(config.server, undefined, 'sync has no servers');
  t.is(config.dns, undefined, 'nor a DNS server');
  t.deepEqual(config.modes.ipvs, { ipvsScheduler: 'wrr', ipvsGracefulPeriod: 900_000 });
  t.deepEqual(config.modes.iptables, { nodeportLocalhost: false }, 'a switch not given is off');
  t.deepEqual(Object.keys(config.modes), allModes().map((m) => m.name));
  t.false('ipvsScheduler' in config.render, "a mode's flag is not in the shared sections");
});

test("a mode's switch, when given, is in its section", (t) => {
  const config = proxyConfig(parsed(['--source', 'examples', '--nodeport-localhost']), allModes());
  t.is(config.kernel.mode, 'iptables');
  t.deepEqual(config.modes.iptables, { nodeportLocalhost: true });
});

test('run and sync build their ProxyConfig from the command line: run with its periods, servers and DNS, sync --once without', async (t) => {
  const run = await configOf('run', ['--poll-interval', '2s', '--dns-address', '169.254.20.10', '--full-sync-period', '2h']);
  t.deepEqual(run.sync, { minSyncPeriod: 1000, syncPeriod: 30_000, fullSyncPeriod: 7_200_000 });
  t.is(run.render.pollInterval, 2000, '--poll-interval is a source setting');
  t.like(run.dns, { dnsAddress: '169.254.20.10', dnsPort: 53, clusterDomain: 'cluster.local' });
  t.is(run.server?.metricsBindAddress && `${run.server.metricsBindAddress.ip.text}:${run.server.metricsBindAddress.port}`, '127.0.0.1:10249');
  const sync = await configOf('sync', ['--once']);
  t.is(sync.sync, undefined, 'sync --once syncs once: no periods');
  t.is(sync.server, undefined);
  t.is(sync.dns, undefined);
  t.deepEqual(sync.modes, run.modes, "the modes' sections are the same for both commands");
  t.is(sourceOptions(run).dnsAddress, '169.254.20.10', 'with a DNS server, the source is told its address (the Kubernetes source then reads what only DNS needs)');
  t.false('dnsAddress' in sourceOptions(sync));
  t.is(sourceOptions(run).pollInterval, 2000);
});

for (const [mode, flags, file] of [
  [
    'iptables',
    ['--nodeport-localhost', '--masquerade-all', '--min-sync-period', '2s', '--sync-period', '1m', '--cluster-cidr', '10.244.0.0/16', '--conntrack-min', '5', '--metrics-bind-address', '0.0.0.0:9100'],
    'iptables:\n  localhostNodePorts: true\n  masqueradeAll: true\n  minSyncPeriod: 2s\n  syncPeriod: 1m\nclusterCIDR: 10.244.0.0/16\nconntrack:\n  min: 5\nmetricsBindAddress: 0.0.0.0:9100\n',
  ],
  ['ipvs', ['--ipvs-scheduler', 'wrr', '--masquerade-all', '--sync-period', '45s'], 'ipvs:\n  scheduler: wrr\n  syncPeriod: 45s\niptables:\n  masqueradeAll: true\n'],
  ['nftables', ['--masquerade-all', '--min-sync-period', '500ms'], 'nftables:\n  masqueradeAll: true\n  minSyncPeriod: 500ms\n'],
] as const) {
  test(`${mode} mode: the flags and the same settings from the configuration file give the same ProxyConfig`, async (t) => {
    const fromFlags = await configOf('run', ['--mode', mode, ...flags]);
    const fromFile = await configOf('run', ['--mode', mode], file);
    t.deepEqual(fromFile, fromFlags);
    t.not(fromFlags.render.masqueradeAll, false, 'the settings are not the defaults');
  });
}

test("a setting in the file's section of another mode does not reach the mode in use", async (t) => {
  // kube-proxy reads iptables.localhostNodePorts in iptables mode only, and iptables.syncPeriod in iptables mode only.
  const config = await configOf('run', ['--mode', 'nftables'], 'iptables:\n  localhostNodePorts: true\n  syncPeriod: 1m\n');
  t.deepEqual(config.modes.iptables, { nodeportLocalhost: false });
  t.is(config.sync?.syncPeriod, 30_000);
});

test('a mode reads its own section: a setting of the same name in another mode\'s section does not reach it', (t) => {
  t.deepEqual(iptablesMode.runInfo({ iptables: { nodeportLocalhost: true } }), { render: { nodePortLocalhost: true } });
  t.deepEqual(iptablesMode.runInfo({ iptables: { nodeportLocalhost: false }, ipvs: { nodeportLocalhost: true }, nftables: { nodeportLocalhost: true } }), {});
  t.deepEqual(ipvsMode.runInfo({ ipvs: { ipvsScheduler: 'wrr' } }), { ipvs: { scheduler: 'wrr' } });
  t.deepEqual(ipvsMode.runInfo({ iptables: { ipvsScheduler: 'wrr' }, ipvs: {} }), { ipvs: { scheduler: 'rr' } }, 'the default, not the other section\'s value');
});

test("/configz shows the mode's own settings from its section alone", async (t) => {
  const shown = async (args: string[]) => {
    const config = await configOf('run', args);
    return configz({ ...config, sync: config.sync!, server: config.server! })['kubeproxy.config.k8s.io'] as Record<string, Record<string, unknown>>;
  };
  t.deepEqual((await shown(['--mode', 'iptables', '--nodeport-localhost'])).iptables, { masqueradeAll: false, localhostNodePorts: true, syncPeriod: '30s', minSyncPeriod: '1s' });
  const ipvs = await shown(['--mode', 'ipvs', '--ipvs-scheduler', 'sh']);
  t.deepEqual(ipvs.ipvs, { scheduler: 'sh', syncPeriod: '30s', minSyncPeriod: '1s' });
  t.deepEqual(ipvs.iptables, { masqueradeAll: false }, 'no localhostNodePorts outside iptables mode');
  const nft = await shown(['--mode', 'nftables', '--ipvs-scheduler', 'sh']);
  t.deepEqual(nft.nftables, { masqueradeAll: false, syncPeriod: '30s', minSyncPeriod: '50ms' }, "nftables mode's own default");
  t.is(nft.ipvs, undefined, "IPVS mode's scheduler is not shown in nftables mode");
});

test('the configuration is checked as a whole, a setting from the file named by its field', async (t) => {
  const config = await configOf('run', [], 'iptables:\n  minSyncPeriod: 1m\n');
  t.throws(() => checkProxyConfig(config), { message: '--min-sync-period (60000 ms) must not be longer than --sync-period (30000 ms)' });
  const program = buildProgram();
  program.commands.forEach((c) => c.exitOverride());
  const dir = await mkdtemp(join(tmpdir(), 'drover-proxy-config-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'kube-proxy.yaml');
  await writeFile(path, `${HEAD}iptables:\n  minSyncPeriod: 1m\n`);
  // run's action checks its configuration before it reads or touches anything.
  await t.throwsAsync(program.parseAsync(prepareCommandLine(program, ['node', 'drover', 'run', '--source', 'examples', '--config', path], () => undefined)), {
    message: `--config ${path}: iptables.minSyncPeriod (60000 ms) must not be longer than --sync-period (30000 ms)`,
  });
  const dns = { ...config, sync: { minSyncPeriod: 0, syncPeriod: 30_000 }, kernel: { ...config.kernel, netns: 'node' }, dns: { dnsAddress: '169.254.20.10', dnsPort: 53, clusterDomain: 'cluster.local', dnsTtl: 5 } };
  t.throws(() => checkProxyConfig(dns), { message: /^--dns-address 169\.254\.20\.10 with --netns node: / });
  t.throws(() => checkProxyConfig(config, { statusFile: 'examples/status.json' }), { message: '--status-file examples/status.json is inside --source examples; put it elsewhere' });
});

test("run's minimum sync period defaults to the mode's own: 1 s in iptables and IPVS mode, nftables mode's far less", async (t) => {
  t.is(NFTABLES_MIN_SYNC_PERIOD_MS, 50);
  t.is((await configOf('run', [])).sync?.minSyncPeriod, 1000, 'iptables mode, the default mode');
  t.is((await configOf('run', ['--mode', 'iptables'])).sync?.minSyncPeriod, 1000);
  t.is((await configOf('run', ['--mode', 'ipvs'])).sync?.minSyncPeriod, 1000);
  t.is((await configOf('run', ['--mode', 'nftables'])).sync?.minSyncPeriod, NFTABLES_MIN_SYNC_PERIOD_MS);
  t.is((await configOf('run', ['--mode', 'nftables'], 'mode: nftables\n')).sync?.minSyncPeriod, NFTABLES_MIN_SYNC_PERIOD_MS, 'a file without the field');
  t.is((await configOf('run', [], 'mode: nftables\n')).sync?.minSyncPeriod, NFTABLES_MIN_SYNC_PERIOD_MS, "the file's mode picks the default");
});

test('a minimum sync period given by the flag or by the file wins over the mode\'s default', async (t) => {
  t.is((await configOf('run', ['--mode', 'nftables', '--min-sync-period', '1s'])).sync?.minSyncPeriod, 1000);
  t.is((await configOf('run', ['--mode', 'nftables', '--min-sync-period', '0s'])).sync?.minSyncPeriod, 0, '0 is a value, not "unset"');
  t.is((await configOf('run', ['--mode', 'iptables', '--min-sync-period', '200ms'])).sync?.minSyncPeriod, 200);
  t.is((await configOf('run', ['--mode', 'nftables', '--nftables-min-sync-period', '2s'])).sync?.minSyncPeriod, 2000, "kube-proxy's flag");
  t.is((await configOf('run', ['--mode', 'nftables'], 'nftables:\n  minSyncPeriod: 1s\n')).sync?.minSyncPeriod, 1000, "the file's field");
  t.is((await configOf('run', ['--mode', 'nftables', '--min-sync-period', '300ms'], 'nftables:\n  minSyncPeriod: 1s\n')).sync?.minSyncPeriod, 300, 'the flag over the file');
  t.is((await configOf('run', ['--mode', 'nftables'], 'iptables:\n  minSyncPeriod: 2s\n')).sync?.minSyncPeriod, NFTABLES_MIN_SYNC_PERIOD_MS, "another mode's field is not this mode's");
  t.is((await configOf('run', ['--mode', 'ipvs'], 'ipvs:\n  minSyncPeriod: 250ms\n')).sync?.minSyncPeriod, 250);
});

test('run --help names the default of --min-sync-period in every mode', (t) => {
  const run = buildProgram().commands.find((c) => c.name() === 'run')!;
  const help = run.helpInformation({ error: false }).replace(/\s+/g, ' ');
  t.regex(help, /--min-sync-period <duration> least time between two syncs; a change is applied within it \(default: 1s in iptables mode, 1s in IPVS mode, 50ms in nftables mode\)/);
});
