/**
 * `drover render`: print what a full sync writes onto an empty node, in the
 * mode's own form (its driver: modes/iptables/driver.ts prints the
 * iptables-restore payload, modes/ipvs/render.ts the sysctls, ipsets,
 * iptables rules, kube-ipvs0 addresses and virtual servers). Pure: needs no
 * root and touches no kernel.
 */
import { Command } from 'commander';
import { internalEndpoints } from '../model/policy.ts';
import type { Endpoint, Snapshot } from '../model/types.ts';
import { allModes, modeDriver } from '../modes/registry.ts';
import { EXIT, markPartial } from './exit.ts';
import { listTimeoutOption, modeOption, renderOptions } from './options.ts';
import type { RenderCliOptions } from '../config/render-cli.ts';
import { withNodeSettings } from './node-settings.ts';
import { compareOptions, loadSource, modeHelp, refuseForeignSwitches } from './setup.ts';
import { modeSections, renderSection } from './proxy-config.ts';

/**
 * The `#` header lines: one per service port (key, ClusterIP:port/protocol,
 * where the IP came from, endpoints), followed by one line per endpoint
 * derived from a Pod, naming it and its conditions:
 * `  10.244.1.5:8080 from Pod default/web-1 (ready)`.
 */
export function serviceSummary(snapshot: Snapshot): string[] {
  return [...snapshot.services.values()].flatMap((sp) => {
    const origin = sp.clusterIPAllocated ? 'allocated by drover' : 'from the manifest';
    const ready = internalEndpoints(sp, snapshot.node).endpoints.length;
    const pods = sp.endpoints.flatMap((e) => (e.pod === undefined ? [] : [`  ${e.ip}:${e.port} from Pod ${e.pod} (${conditions(e)})`]));
    return [`${sp.key}: ClusterIP ${sp.clusterIP}:${sp.port}/${sp.protocol} (${origin}), ${ready} ready of ${sp.endpoints.length} endpoints`, ...pods];
  });
}

/** An endpoint's conditions in words: "ready", "serving, terminating", "not ready". */
function conditions(e: Endpoint): string {
  if (e.ready) return e.terminating ? 'ready, terminating' : 'ready';
  return [e.serving ? 'serving' : 'not ready', ...(e.terminating ? ['terminating'] : [])].join(', ');
}

/** The `render` command. */
export function renderCommand(): Command {
  const cmd = new Command('render')
    .description(
      'print what a full sync writes onto an empty node: the iptables-restore input' +
        modeHelp('render') +
        ' (no root needed; exit 3 if part of the source was skipped)',
    )
    .addOption(modeOption())
    .action(async (opts: RenderCliOptions & { mode: string }) => {
      const modes = modeSections(opts, allModes());
      refuseForeignSwitches(opts.mode, modes);
      const render = renderSection(opts);
      const loaded = await loadSource(render);
      for (const p of loaded.problems) process.stderr.write(`drover: ${p}\n`);
      const rendered = await modeDriver(opts.mode).render(loaded.snapshot, { render: withNodeSettings(render, loaded.snapshot.node), modes }, serviceSummary(loaded.snapshot));
      for (const line of rendered.leftOut) process.stderr.write(`drover: ${line}\n`);
      if (rendered.leftOut.length > 0) process.exitCode = EXIT.partial;
      process.stdout.write(rendered.text);
      markPartial(loaded.incomplete);
    });
  for (const o of [...renderOptions(), listTimeoutOption(), ...compareOptions()]) cmd.addOption(o);
  return cmd;
}
