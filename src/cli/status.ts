/**
 * `drover status`: what the last `drover run` recorded in its status file
 * (mode, source, the last sync), with the drover-owned rules counted in the
 * live kernel and the drift computed as `drover diff` does, from the source
 * and render flags that `run` recorded; in IPVS mode (the mode `run`
 * recorded, or `--mode`) the virtual servers, real servers, ipset entries and
 * kube-ipvs0 addresses too. Exit 1 when there is no status file
 * (drover has not run) or the kernel cannot be read; drift does not change
 * the exit code (use `drover diff` for that).
 */
import { Command } from 'commander';
import type { StatusRecord } from '../inspect/status.ts';
import { modeDriver, modeNames } from '../modes/registry.ts';
import { inspectKernelOptions, nodePortAddressesArg } from './options.ts';
import type { KernelOptions } from '../config/kernel.ts';
import type { RenderCliOptions } from '../config/render-cli.ts';
import { modeHelp, statusFileOption } from './setup.ts';

/** The render flags `run` recorded, as CLI options. */
function recordedRenderOptions(r: StatusRecord): RenderCliOptions {
  return {
    source: r.source,
    ...(r.stateDir !== undefined ? { stateDir: r.stateDir } : {}),
    masqueradeAll: r.render.masqueradeAll,
    serviceCidr: r.render.serviceCidr,
    ...(r.render.clusterCidr !== null ? { clusterCidr: r.render.clusterCidr } : {}),
    ...(r.render.conntrackTcpBeLiberal === true ? { conntrackTcpBeLiberal: true } : {}),
    ...(r.render.nodePortAddresses?.length ? { nodeportAddresses: nodePortAddressesArg(r.render.nodePortAddresses.join(',')) } : {}),
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
        'drifted from the source (exit 1 if drover has not run)' + modeHelp('status') +
        '; --mode, --netns and --iptables-backend default to those drover run used',
    )
    .addOption(statusFileOption())
    .action(async function (this: Command, opts: KernelOptions & { statusFile: string }) {
      const { formatStatus, NotRunError, readStatusFile } = await import('../inspect/status.ts');
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
      // Read the kernel drover ran against, in the mode it ran in, unless told otherwise.
      const fromCli = (name: string) => this.getOptionValueSource(name) === 'cli';
      const mode = fromCli('mode') || !modeNames().includes(record.mode) ? opts.mode : record.mode;
      const kernelOpts: KernelOptions = {
        ...opts,
        mode,
        ...(opts.netns === undefined && record.netns !== null ? { netns: record.netns } : {}),
        iptablesBackend: fromCli('iptablesBackend') ? opts.iptablesBackend : record.iptablesBackend,
      };
      const driver = modeDriver(mode);
      const kernel = await driver.status(kernelOpts, { render: recordedRenderOptions(record), modes: { [mode]: driver.recordedSection(record) } });
      process.stdout.write(
        formatStatus({ file: opts.statusFile, record, running: isRunning(record.pid), rules: kernel.rules, drift: kernel.drift, modeLines: kernel.lines, now: Date.now() }),
      );
    });
  for (const o of inspectKernelOptions()) cmd.addOption(o);
  return cmd;
}
