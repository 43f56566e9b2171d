/** `drover sync --once`: one full sync (read the kernel back, write what differs), then exit. */
import { configOptions, settingName } from './config-file.ts';
import { checkProxyConfig, commandProxyConfig } from './proxy-config.ts';
import { Command, Option } from 'commander';
import { createLogger } from '../util/log.ts';
import { conntrackOptions, kernelOptions, listTimeoutOption, renderOptions } from './options.ts';
import { markPartial } from './exit.ts';
import { needsNode, withNodeSettings } from './node-settings.ts';
import { applyConntrackOptions, createSource, createSyncBackend, lockNamespace, syncLogFieldsOf, syncModeOptions } from './setup.ts';
import { UsageError } from '../errors.ts';

/** The `sync` command. */
export function syncCommand(): Command {
  const cmd = new Command('sync')
    .description('sync the kernel with the source once and exit (exit 1 if the sync failed, 3 if part of the source was skipped: nothing is then deleted)')
    .addOption(new Option('--once', 'one full sync, then exit (the only mode of sync; drover run is the loop)').default(false))
    .action(async (opts: { once: boolean }) => {
      if (!opts.once) throw new UsageError('drover sync needs --once (for the sync loop, use drover run)');
      const config = commandProxyConfig(cmd);
      checkProxyConfig(config, { name: (flag) => settingName(cmd, flag) });
      const { kernel } = config;
      const logger = createLogger(kernel.logLevel);
      // With settings from the Node (NodeCIDR, primary), the source is read first: the rules depend on it.
      const source = await createSource(config.render, logger, { persist: true });
      let backend;
      try {
        const settled = needsNode(config.render) ? { ...config, render: withNodeSettings(config.render, (await source.load()).snapshot.node) } : config;
        backend = await createSyncBackend(settled, logger);
        await lockNamespace('sync', kernel, logger, { close: backend });
        await applyConntrackOptions(config, logger);
      } catch (err) {
        await source.close();
        throw err;
      }
      const { Proxier } = await import('../proxier/proxier.ts');
      const proxier = new Proxier({ source, backend, logger, minSyncPeriodMs: 0, syncPeriodMs: 0, ...syncLogFieldsOf(kernel.mode) });
      try {
        await proxier.syncOnce({ full: true });
      } finally {
        await source.close();
        await backend.close?.();
      }
      markPartial(proxier.last?.incomplete ?? []);
    });
  for (const o of [...renderOptions(), listTimeoutOption(), ...kernelOptions(), ...conntrackOptions(), ...syncModeOptions(), ...configOptions()]) cmd.addOption(o);
  return cmd;
}
