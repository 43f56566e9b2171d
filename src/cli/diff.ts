/**
 * `drover diff --source PATH`: compare the ruleset the source renders to
 * with the live kernel and list what differs, one item per line (see
 * src/inspect/diff.ts). For monitoring, the exit code is 0 when the kernel
 * equals desired state ("no differences"), 1 when it differs, 2 when the
 * comparison could not be made (bad flags, unreadable source, no root,
 * iptables-save failed), and 3 when it is equal to what could be read of a
 * source that could not be read whole (exit.ts). With `--mode ipvs` it compares IPVS mode's desired
 * state instead (src/modes/ipvs/diff.ts).
 */
import { Command } from 'commander';
import type { RenderOptions, ServiceRules } from '../modes/iptables/render.ts';
import { renderSnapshot } from '../modes/iptables/ruleset.ts';
import { loadStaticRules } from '../modes/iptables/static.ts';
import { DIFF_EXIT, driftExitCode, driftItems, formatDrift } from '../modes/iptables/diff.ts';
import { formatIpvsDrift, ipvsDriftExitCode } from '../modes/ipvs/diff.ts';
import { inspectKernelOptions, readKernel } from './chains.ts';
import { ipvsDriftFromSource, ipvsSchedulerOption, readIpvsKernel } from '../modes/ipvs/inspect.ts';
import { renderOptions, type KernelOptions, type RenderCliOptions } from './options.ts';
import { markPartial } from './exit.ts';
import { loadSource, renderConfig } from './setup.ts';

/** The desired ruleset of a source: every service port rendered as a sync would, and the objects skipped. */
export interface Desired {
  readonly services: Map<string, ServiceRules>;
  /** One line per skipped object or dropped entry (as `drover render` prints them). */
  readonly problems: string[];
  /** The parts of the source that could not be read; empty when it was read whole. */
  readonly incomplete: readonly string[];
}

/**
 * Read the source and render it with the given options, exactly as a full
 * sync of `drover run` with the same flags would.
 * @throws Error when the source path is missing or the service CIDR is invalid.
 */
export async function loadDesired(opts: RenderCliOptions): Promise<Desired> {
  const { snapshot, problems, incomplete } = await loadSource(opts);
  const render: RenderOptions = renderConfig(opts);
  return { services: renderSnapshot(snapshot, render), problems, incomplete };
}

/** The `diff` command. */
export function diffCommand(): Command {
  const cmd = new Command('diff')
    .description(
      'compare the rules the source renders to with the live kernel and list missing, extra and changed chains and rules ' +
        '(with --mode ipvs: virtual servers, real servers, kube-ipvs0 addresses, ipset entries and IPVS mode\'s rules); ' +
        'exit 0 when equal, 1 when they differ, 2 on error, 3 when equal but part of the source could not be read',
    )
    .action(async (opts: KernelOptions & RenderCliOptions & { ipvsScheduler: string }) => {
      try {
        if (opts.mode === 'ipvs') {
          const live = await readIpvsKernel(opts, true);
          const { drift, problems, incomplete } = await ipvsDriftFromSource(opts, live);
          for (const p of problems) process.stderr.write(`drover: ${p}\n`);
          process.stdout.write(formatIpvsDrift(drift));
          process.exitCode = ipvsDriftExitCode(drift);
          markPartial(incomplete);
          return;
        }
        const desired = await loadDesired(opts);
        for (const p of desired.problems) process.stderr.write(`drover: ${p}\n`);
        const items = driftItems(loadStaticRules(), desired.services, await readKernel(opts), { incomplete: desired.incomplete.length > 0 });
        process.stdout.write(formatDrift(items));
        process.exitCode = driftExitCode(items);
        markPartial(desired.incomplete);
      } catch (err) {
        process.stderr.write(`drover: ${(err as Error).message}\n`);
        process.exitCode = DIFF_EXIT.error;
      }
    })
    // Flag errors exit 2 as well (commander would exit 1); --help and --version exit 0.
    .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : DIFF_EXIT.error));
  for (const o of [...renderOptions(), ...inspectKernelOptions(), ipvsSchedulerOption()]) cmd.addOption(o);
  return cmd;
}
