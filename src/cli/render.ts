/**
 * `drover render`: print the iptables-restore payload that a full sync
 * writes onto empty tables. Pure: needs no root and touches no kernel.
 */
import { Command } from 'commander';
import { renderRestore } from '../backends/iptables/ruleset.ts';
import { servingEndpoints } from '../model/serving.ts';
import type { Snapshot } from '../model/types.ts';
import { FileSource } from '../sources/file.ts';
import { silentLogger } from '../util/log.ts';
import { renderOptions, type RenderCliOptions } from './options.ts';
import { renderConfig } from './setup.ts';

/** One `#` header line per service port: key, ClusterIP:port/protocol, where the IP came from, endpoints. */
export function serviceSummary(snapshot: Snapshot): string[] {
  return [...snapshot.services.values()].map((sp) => {
    const origin = sp.clusterIPAllocated ? 'allocated by drover' : 'from the manifest';
    const ready = servingEndpoints(sp).length;
    return `${sp.key}: ClusterIP ${sp.clusterIP}:${sp.port}/${sp.protocol} (${origin}), ${ready} ready of ${sp.endpoints.length} endpoints`;
  });
}

/** The `render` command. */
export function renderCommand(): Command {
  const cmd = new Command('render')
    .description('print the iptables-restore input for the source (no root needed; exit 1 if an object was skipped)')
    .action(async (opts: RenderCliOptions) => {
      const source = new FileSource(opts.source, { serviceCIDR: opts.serviceCidr, logger: silentLogger() });
      const loaded = await source.load();
      for (const e of [...loaded.errors, ...loaded.warnings]) process.stderr.write(`drover: ${e.message}\n`);
      const header = ['drover render: iptables-restore --noflush input', ...serviceSummary(loaded.snapshot)];
      process.stdout.write(renderRestore(loaded.snapshot, renderConfig(opts), header));
      if (loaded.errors.length > 0) process.exitCode = 1;
    });
  for (const o of renderOptions()) cmd.addOption(o);
  return cmd;
}
