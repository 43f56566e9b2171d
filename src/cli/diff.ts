/**
 * `drover diff --source PATH`: compare the ruleset the source renders to
 * with the live kernel and list what differs, one item per line (see
 * src/inspect/diff.ts). For monitoring, the exit code is 0 when the kernel
 * equals desired state ("no differences"), 1 when it differs, and 2 when the
 * comparison could not be made (bad flags, unreadable source, no root,
 * iptables-save failed).
 */
import { Command } from 'commander';
import type { RenderOptions, ServiceRules } from '../backends/iptables/render.ts';
import { renderSnapshot } from '../backends/iptables/ruleset.ts';
import { loadStaticRules } from '../backends/iptables/static.ts';
import { DIFF_EXIT, driftExitCode, driftItems, formatDrift } from '../inspect/diff.ts';
import { silentLogger } from '../util/log.ts';
import { inspectKernelOptions, readKernel } from './chains.ts';
import { renderOptions, type KernelOptions, type RenderCliOptions } from './options.ts';
import { createSource, renderConfig } from './setup.ts';

/** The desired ruleset of a source: every service port rendered as a sync would, and the objects skipped. */
export interface Desired {
  readonly services: Map<string, ServiceRules>;
  /** One line per skipped object or dropped entry (as `drover render` prints them). */
  readonly problems: string[];
}

/**
 * Read the source and render it with the given options, exactly as a full
 * sync of `drover run` with the same flags would.
 * @throws Error when the source path is missing or the service CIDR is invalid.
 */
export async function loadDesired(opts: RenderCliOptions): Promise<Desired> {
  const loaded = await createSource(opts, silentLogger()).load();
  const render: RenderOptions = renderConfig(opts);
  return {
    services: renderSnapshot(loaded.snapshot, render),
    problems: [...loaded.errors, ...loaded.warnings].map((e) => e.message),
  };
}

/** The `diff` command. */
export function diffCommand(): Command {
  const cmd = new Command('diff')
    .description(
      'compare the rules the source renders to with the live kernel and list missing, extra and changed chains and rules; ' +
        'exit 0 when equal, 1 when they differ, 2 on error',
    )
    .action(async (opts: KernelOptions & RenderCliOptions) => {
      try {
        const desired = await loadDesired(opts);
        for (const p of desired.problems) process.stderr.write(`drover: ${p}\n`);
        const items = driftItems(loadStaticRules(), desired.services, await readKernel(opts));
        process.stdout.write(formatDrift(items));
        process.exitCode = driftExitCode(items);
      } catch (err) {
        process.stderr.write(`drover: ${(err as Error).message}\n`);
        process.exitCode = DIFF_EXIT.error;
      }
    })
    // Flag errors exit 2 as well (commander would exit 1); --help and --version exit 0.
    .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : DIFF_EXIT.error));
  for (const o of [...renderOptions(), ...inspectKernelOptions()]) cmd.addOption(o);
  return cmd;
}
