/**
 * `drover diff --source PATH`: compare what the source renders to with the
 * live kernel and list what differs, one item per line, exactly what the
 * next full sync would write (the mode's driver: modes/iptables/diff.ts,
 * modes/ipvs/diff.ts). For monitoring, the exit code is 0 when the kernel
 * equals desired state ("no differences"), 1 when it differs, 2 when the
 * comparison could not be made (bad flags, unreadable source, no root,
 * iptables-save failed), and 3 when it is equal to what could be read of a
 * source that could not be read whole (exit.ts).
 */
import { Command } from 'commander';
import { allModes, modeDriver } from '../modes/registry.ts';
import { EXIT, markPartial } from './exit.ts';
import { inspectKernelOptions, listTimeoutOption, renderOptions } from './options.ts';
import type { KernelOptions } from '../config/kernel.ts';
import type { RenderCliOptions } from '../config/render-cli.ts';
import { needsNode, withNodeSettings } from './node-settings.ts';
import { compareOptions, loadSource, modeHelp, refuseForeignSwitches } from './setup.ts';
import { kernelSection, modeSections, renderSection } from './proxy-config.ts';

/** The `diff` command. */
export function diffCommand(): Command {
  const cmd = new Command('diff')
    .description(
      'compare the rules the source renders to with the live kernel and list missing, extra and changed chains and rules' +
        modeHelp('diff') +
        '; exit 0 when equal, 1 when they differ, 2 on error, 3 when equal but part of the source could not be read',
    )
    .action(async (opts: KernelOptions & RenderCliOptions) => {
      try {
        const modes = modeSections(opts, allModes());
        refuseForeignSwitches(opts.mode, modes);
        const render = renderSection(opts);
        // The Node's settings (NodeCIDR, primary) take one more read of the source.
        const settled = needsNode(render) ? withNodeSettings(render, (await loadSource(render)).snapshot.node) : render;
        const drift = await modeDriver(opts.mode).diff({ kernel: kernelSection(opts), render: settled, modes });
        for (const p of drift.problems) process.stderr.write(`drover: ${p}\n`);
        process.stdout.write(drift.text);
        process.exitCode = drift.differs ? EXIT.failed : EXIT.ok;
        markPartial(drift.incomplete);
      } catch (err) {
        process.stderr.write(`drover: ${(err as Error).message}\n`);
        process.exitCode = EXIT.diffError;
      }
    })
    // Flag errors exit 2 as well (commander would exit 1); --help and --version exit 0.
    .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : EXIT.diffError));
  for (const o of [...renderOptions(), listTimeoutOption(), ...inspectKernelOptions(), ...compareOptions()]) cmd.addOption(o);
  return cmd;
}
