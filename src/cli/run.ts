/** `drover run`: the sync loop, until SIGINT or SIGTERM. Rules stay in place on exit. */
import { Command } from 'commander';
import { Proxier } from '../proxier/proxier.ts';
import { createLogger } from '../util/log.ts';
import { kernelOptions, renderOptions, syncPeriodOptions, type SyncCliOptions } from './options.ts';
import { createBackend, createSource, renderConfig } from './setup.ts';

/** The `run` command. */
export function runCommand(): Command {
  const cmd = new Command('run')
    .description('watch the source and keep the kernel in sync with it (the service proxy)')
    .action(async (opts: SyncCliOptions) => {
      const logger = createLogger(opts.logLevel);
      const backend = await createBackend(opts, renderConfig(opts), logger);
      const source = createSource(opts, logger);
      await source.load(); // a missing --source fails here, before the loop starts
      const proxier = new Proxier({
        source,
        backend,
        logger,
        minSyncPeriodMs: opts.minSyncPeriod,
        syncPeriodMs: opts.syncPeriod,
      });
      logger.info(
        { source: opts.source, minSyncPeriodMs: opts.minSyncPeriod, syncPeriodMs: opts.syncPeriod },
        'drover started',
      );
      proxier.start();
      await new Promise<void>((resolve) => {
        const stop = (signal: string) => {
          logger.info({ signal }, 'stopping; programmed rules are left in place');
          void proxier.stop().then(resolve);
        };
        process.once('SIGINT', () => stop('SIGINT'));
        process.once('SIGTERM', () => stop('SIGTERM'));
      });
    });
  for (const o of [...renderOptions(), ...kernelOptions(), ...syncPeriodOptions()]) cmd.addOption(o);
  return cmd;
}
