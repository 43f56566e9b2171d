import test from 'ava';
import { Command } from 'commander';
import { proxyConfig } from '../../src/cli/proxy-config.ts';
import { conntrackOptions, kernelOptions, renderOptions, syncPeriodOptions } from '../../src/cli/options.ts';
import { syncModeOptions } from '../../src/cli/setup.ts';
import type { SyncCliOptions } from '../../src/config/sync.ts';
import { allModes } from '../../src/modes/registry.ts';

/** The options of `drover sync` as commander parses `args`. */
function parsed(args: readonly string[]): SyncCliOptions & Readonly<Record<string, unknown>> {
  const cmd = new Command('sync').exitOverride();
  for (const o of [...kernelOptions(), ...renderOptions(), ...syncPeriodOptions(), ...conntrackOptions(), ...syncModeOptions()]) cmd.addOption(o);
  cmd.parse([...args], { from: 'user' });
  return cmd.opts();
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
