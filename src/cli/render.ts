/**
 * `drover render`: print what a full sync writes onto an empty node: in
 * iptables mode the iptables-restore payload; with `--mode ipvs` the
 * sysctls, ipsets, iptables rules, kube-ipvs0 addresses and virtual servers
 * (modes/ipvs/render.ts). Pure: needs no root and touches no kernel.
 */
import { Command, Option } from 'commander';
import { renderRestore } from '../modes/iptables/ruleset.ts';
import { desiredIpvsState } from '../modes/ipvs/assemble.ts';
import { renderIpvs } from '../modes/ipvs/render.ts';
import { ipvsStaticRules } from '../modes/ipvs/rules.ts';
import { clusterEndpoints } from '../model/policy.ts';
import type { Snapshot } from '../model/types.ts';
import { FileSource } from '../sources/file.ts';
import { silentLogger } from '../util/log.ts';
import { ipvsSchedulerOption } from '../modes/ipvs/inspect.ts';
import { renderOptions, type RenderCliOptions } from './options.ts';
import { EXIT, markPartial } from './exit.ts';
import { renderConfig } from './setup.ts';

/** One `#` header line per service port: key, ClusterIP:port/protocol, where the IP came from, endpoints. */
export function serviceSummary(snapshot: Snapshot): string[] {
  return [...snapshot.services.values()].map((sp) => {
    const origin = sp.clusterIPAllocated ? 'allocated by drover' : 'from the manifest';
    const ready = clusterEndpoints(sp, snapshot.node).length;
    return `${sp.key}: ClusterIP ${sp.clusterIP}:${sp.port}/${sp.protocol} (${origin}), ${ready} ready of ${sp.endpoints.length} endpoints`;
  });
}

/** The `render` command. */
export function renderCommand(): Command {
  const cmd = new Command('render')
    .description('print what a full sync writes onto an empty node: the iptables-restore input, or with --mode ipvs also ipsets, kube-ipvs0 and virtual servers (no root needed; exit 3 if part of the source was skipped)')
    .addOption(new Option('-m, --mode <mode>', 'proxy mode').choices(['iptables', 'ipvs']).default('iptables'))
    .addOption(ipvsSchedulerOption())
    .action(async (opts: RenderCliOptions & { mode: 'iptables' | 'ipvs'; ipvsScheduler: string }) => {
      const source = new FileSource(opts.source, { serviceCIDR: opts.serviceCidr, logger: silentLogger() });
      const loaded = await source.load();
      for (const e of [...loaded.errors, ...loaded.warnings]) process.stderr.write(`drover: ${e.message}\n`);
      const services = serviceSummary(loaded.snapshot);
      if (opts.mode === 'ipvs') {
        const desired = desiredIpvsState(loaded.snapshot, { scheduler: opts.ipvsScheduler });
        for (const c of desired.conflicts) {
          process.stderr.write(`drover: service port ${c}: its ClusterIP:port/protocol belongs to another service port; left out\n`);
          process.exitCode = EXIT.partial;
        }
        process.stdout.write(renderIpvs(desired, ipvsStaticRules(renderConfig(opts)), ['drover render --mode ipvs: what a full sync writes onto an empty node', ...services]));
      } else {
        process.stdout.write(renderRestore(loaded.snapshot, renderConfig(opts), ['drover render: iptables-restore --noflush input', ...services]));
      }
      markPartial(loaded.incomplete);
    });
  for (const o of renderOptions()) cmd.addOption(o);
  return cmd;
}
