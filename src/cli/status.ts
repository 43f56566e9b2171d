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
import { Command, Option } from 'commander';
import { loadStaticRules } from '../modes/iptables/static.ts';
import { driftItems } from '../modes/iptables/diff.ts';
import { DEFAULT_STATUS_FILE, formatStatus, NotRunError, ownedRuleCounts, readStatusFile, type StatusRecord, type StatusView } from '../inspect/status.ts';
import { ipvsStaticRules } from '../modes/ipvs/rules.ts';
import { ipvsDriftCount } from '../modes/ipvs/diff.ts';
import { ipvsCounts } from '../modes/ipvs/live.ts';
import { inspectKernelOptions, readKernel } from './chains.ts';
import { loadDesired } from './diff.ts';
import { ipvsDriftFromSource, readIpvsKernel } from '../modes/ipvs/inspect.ts';
import { renderConfig } from './setup.ts';
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

/** What `drover status` reads from the live kernel. */
type KernelStatus = Pick<StatusView, 'rules' | 'drift' | 'ipvs'>;

/** The drift count, or why it could not be computed (an unreadable source is not a failure of `status`). */
async function driftOf(count: () => Promise<number>): Promise<StatusView['drift']> {
  try {
    return { differences: await count() };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

/** iptables mode: drover-owned rules and the drift of the rules. */
async function iptablesKernelStatus(opts: KernelOptions, record: StatusRecord): Promise<KernelStatus> {
  const kernel = await readKernel(opts);
  const statics = loadStaticRules();
  const drift = await driftOf(async () => {
    const desired = await loadDesired(recordedRenderOptions(record));
    return driftItems(statics, desired.services, kernel, { incomplete: desired.incomplete.length > 0 }).length;
  });
  return { rules: ownedRuleCounts(statics, kernel), drift };
}

/** IPVS mode: virtual and real servers, ipset entries, kube-ipvs0, IPVS mode's rules, and the drift of all of them. */
async function ipvsKernelStatus(opts: KernelOptions, record: StatusRecord): Promise<KernelStatus> {
  const live = await readIpvsKernel(opts, true);
  const render = recordedRenderOptions(record);
  const drift = await driftOf(async () => ipvsDriftCount((await ipvsDriftFromSource({ ...render, ipvsScheduler: record.ipvs?.scheduler ?? 'rr' }, live)).drift));
  return { rules: ownedRuleCounts(ipvsStaticRules(renderConfig(render)), live.tables), drift, ipvs: ipvsCounts(live) };
}

/** The `status` command. */
export function statusCommand(): Command {
  const cmd = new Command('status')
    .description(
      'show what drover run recorded after its last sync, the drover-owned rules in the live kernel, and whether the kernel ' +
        'drifted from the source (exit 1 if drover has not run); in IPVS mode also the virtual servers, real servers, ipset entries ' +
        'and kube-ipvs0 addresses; --mode, --netns and --iptables-backend default to those drover run used',
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
      // Read the kernel drover ran against, in the mode it ran in, unless told otherwise.
      const fromCli = (name: string) => this.getOptionValueSource(name) === 'cli';
      const mode = fromCli('mode') || (record.mode !== 'iptables' && record.mode !== 'ipvs') ? opts.mode : record.mode;
      const kernelOpts: KernelOptions = {
        ...opts,
        mode,
        ...(opts.netns === undefined && record.netns !== null ? { netns: record.netns } : {}),
        iptablesBackend: fromCli('iptablesBackend') ? opts.iptablesBackend : record.iptablesBackend,
      };
      const kernel = mode === 'ipvs' ? await ipvsKernelStatus(kernelOpts, record) : await iptablesKernelStatus(kernelOpts, record);
      process.stdout.write(formatStatus({ file: opts.statusFile, record, running: isRunning(record.pid), ...kernel, now: Date.now() }));
    });
  for (const o of inspectKernelOptions()) cmd.addOption(o);
  return cmd;
}
