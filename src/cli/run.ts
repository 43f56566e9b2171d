/** `drover run`: the sync loop, until SIGINT or SIGTERM. Rules stay in place on exit. */
import { Command } from 'commander';
import { relative, resolve } from 'node:path';
import { SystemConntrack } from '../conntrack/exec.ts';
import { Proxier } from '../proxier/proxier.ts';
import { StatusFileWriter } from '../proxier/status-file.ts';
import { createLogger } from '../util/log.ts';
import { checkSyncPeriods, kernelOptions, renderOptions, syncPeriodOptions, type SyncCliOptions } from './options.ts';
import { modeDriver } from '../modes/registry.ts';
import { createSource, createSyncBackend, sourcePath, statusFileOption, syncModeOptions, UsageError } from './setup.ts';

/** The `run` command. */
export function runCommand(): Command {
  const cmd = new Command('run')
    .description('watch the source and keep the kernel in sync with it (the service proxy)')
    .action(async (opts: SyncCliOptions & { statusFile: string }) => {
      const statusFile = resolve(opts.statusFile);
      const path = sourcePath(opts.source);
      if (path !== undefined && !relative(resolve(path), statusFile).startsWith('..')) {
        // Each write would be a source change, and each change a sync.
        throw new UsageError(`--status-file ${opts.statusFile} is inside --source ${opts.source}; put it elsewhere`);
      }
      checkSyncPeriods(opts);
      const logger = createLogger(opts.logLevel);
      const backend = await createSyncBackend(opts, logger);
      const source = createSource(opts, logger);
      await source.load(); // a missing --source fails here, before the loop starts (an API source waits for its first lists)
      const status = new StatusFileWriter(
        statusFile,
        {
          pid: process.pid,
          mode: backend.mode,
          iptablesBackend: opts.iptablesBackend,
          netns: opts.netns ?? null,
          source: path !== undefined ? resolve(path) : opts.source,
          render: { clusterCidr: opts.clusterCidr ?? null, masqueradeAll: opts.masqueradeAll, serviceCidr: opts.serviceCidr },
          ipvs: null,
          ...modeDriver(opts.mode).runInfo(opts),
        },
        logger,
      );
      const proxier = new Proxier({
        source,
        backend,
        logger,
        minSyncPeriodMs: opts.minSyncPeriod,
        syncPeriodMs: opts.syncPeriod,
        conntrack: new SystemConntrack(opts.netns),
      });
      status.listen(proxier);
      logger.info(
        { source: opts.source, minSyncPeriodMs: opts.minSyncPeriod, syncPeriodMs: opts.syncPeriod },
        'drover started',
      );
      await proxier.start();
      await new Promise<void>((resolvePromise) => {
        const stop = (signal: string) => {
          logger.info({ signal }, 'stopping; programmed rules are left in place');
          void proxier
            .stop()
            .then(() => status.idle())
            .then(resolvePromise);
        };
        process.once('SIGINT', () => stop('SIGINT'));
        process.once('SIGTERM', () => stop('SIGTERM'));
      });
    });
  for (const o of [...renderOptions(), ...kernelOptions(), ...syncModeOptions(), ...syncPeriodOptions(), statusFileOption()]) cmd.addOption(o);
  return cmd;
}
