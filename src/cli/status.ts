/**
 * `drover status`: what the last `drover run` recorded in its status file
 * (mode, source, the last sync), with the drover-owned rules counted in the
 * live kernel and the drift computed as `drover diff` does, from the source
 * and render flags that `run` recorded. Exit 1 when there is no status file
 * (drover has not run) or the kernel cannot be read; drift does not change
 * the exit code (use `drover diff` for that).
 */
import { Command, Option } from 'commander';
import { loadStaticRules } from '../backends/iptables/static.ts';
import { driftItems } from '../inspect/diff.ts';
import { DEFAULT_STATUS_FILE, formatStatus, NotRunError, ownedRuleCounts, readStatusFile, type StatusRecord, type StatusView } from '../inspect/status.ts';
import { inspectKernelOptions, readKernel } from './chains.ts';
import { loadDesired } from './diff.ts';
import type { KernelOptions, RenderCliOptions } from './options.ts';

/** --status-file, for `run` (writes it) and `status` (reads it). */
export function statusFileOption(): Option {
  return new Option('--status-file <path>', 'status file, written after every sync by drover run and read by drover status').default(
    DEFAULT_STATUS_FILE,
  );
}

/** The render flags `run` recorded, as CLI options. */
function recordedRenderOptions(r: StatusRecord): RenderCliOptions {
  return {
    source: r.source,
    masqueradeAll: r.render.masqueradeAll,
    serviceCidr: r.render.serviceCidr,
    ...(r.render.clusterCidr !== null ? { clusterCidr: r.render.clusterCidr } : {}),
  };
}

/** True when a process with this pid exists (EPERM: it exists, owned by someone else). */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The `status` command. */
export function statusCommand(): Command {
  const cmd = new Command('status')
    .description(
      'show what drover run recorded after its last sync, the drover-owned rules in the live kernel, and whether the kernel ' +
        'drifted from the source (exit 1 if drover has not run); --netns and --iptables-backend default to those drover run used',
    )
    .addOption(statusFileOption())
    .action(async function (this: Command, opts: KernelOptions & { statusFile: string }) {
      let record: StatusRecord;
      try {
        record = await readStatusFile(opts.statusFile);
      } catch (err) {
        if (!(err instanceof NotRunError)) throw err;
        // An answer, not a failure of the command: on stdout, exit 1.
        process.stdout.write(`${err.message}\n`);
        process.exitCode = 1;
        return;
      }
      // Read the kernel drover ran against, unless told otherwise.
      const kernel = await readKernel({
        ...opts,
        ...(opts.netns === undefined && record.netns !== null ? { netns: record.netns } : {}),
        iptablesBackend: this.getOptionValueSource('iptablesBackend') === 'cli' ? opts.iptablesBackend : record.iptablesBackend,
      });
      const statics = loadStaticRules();
      let drift: StatusView['drift'];
      try {
        drift = { differences: driftItems(statics, (await loadDesired(recordedRenderOptions(record))).services, kernel).length };
      } catch (err) {
        drift = { error: (err as Error).message };
      }
      const running = isRunning(record.pid);
      process.stdout.write(formatStatus({ file: opts.statusFile, record, running, rules: ownedRuleCounts(statics, kernel), drift, now: Date.now() }));
    });
  for (const o of inspectKernelOptions()) cmd.addOption(o);
  return cmd;
}
