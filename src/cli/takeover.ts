/**
 * `drover takeover --mode M`: move the node (or `--netns`) from the proxy
 * state it holds (kube-proxy's iptables layout, or drover's state of another
 * mode) to mode M, with traffic running: survey, program M beside the old
 * state, check every frontend, remove the old state (src/takeover/).
 * `--dry-run` prints the survey and the plan and changes nothing.
 */
import { Command, Option } from 'commander';
import { TakeoverRefusedError } from '../errors.ts';
import type { Backend } from '../proxier/backend.ts';
import { DEFAULT_DRAIN_MS } from '../takeover/defaults.ts';
import { createLogger } from '../util/log.ts';
import { kernelOptions, listTimeoutOption, parseDuration, renderOptions } from './options.ts';
import { createSyncBackend, loadSource, lockNamespace, syncModeOptions } from './setup.ts';
import { commandProxyConfig } from './proxy-config.ts';

/** takeover's own options, beside those ProxyConfig gathers. */
type TakeoverCliOptions = { dryRun: boolean; force: boolean; drainTimeout: number };

/** The `takeover` command. */
export function takeoverCommand(): Command {
  const cmd = new Command('takeover')
    .description(
      'move this node to --mode with traffic running: find the proxy state there (kube-proxy\'s iptables layout, drover\'s state of another mode), ' +
        'program --mode beside it with one full sync, check that every frontend of the source goes to the same endpoints through both, then remove the old state with its own cleanup' +
        '. From IPVS mode, its virtual servers stay until the connections IPVS holds end, at most --drain-timeout. ' +
        'Refused while kube-proxy runs in the namespace, before anything is removed when a frontend differs, and to IPVS mode or from it to iptables mode (not built yet). ' +
        'Exit 0 when only --mode\'s state is left, 1 otherwise',
    )
    .addOption(new Option('--dry-run', 'print what is there and the plan; change nothing').default(false))
    .addOption(
      new Option('--drain-timeout <duration>', "from IPVS mode: how long to wait for the connections IPVS itself holds to end before its virtual servers are deleted, which cuts those still open (Go duration)")
        .default(DEFAULT_DRAIN_MS, '30s')
        .argParser(parseDuration),
    )
    .addOption(new Option('--force', "delete kube-proxy's nftables tables (table ip/ip6 kube-proxy) without checking them").default(false))
    .action(async (opts: TakeoverCliOptions) => {
      const config = commandProxyConfig(cmd);
      const logger = createLogger(config.kernel.logLevel);
      const { snapshot, problems, incomplete } = await loadSource(config.render);
      for (const p of problems) process.stderr.write(`drover: ${p}\n`);
      if (incomplete.length > 0) throw new TakeoverRefusedError(`the source could not be read whole (${incomplete.join('; ')}): a takeover removes state, so it needs all of it; nothing was changed`);
      let backend: Backend | undefined;
      if (!opts.dryRun) await lockNamespace('takeover', config.kernel, logger);
      try {
        const { takeover } = await import('../takeover/takeover.ts');
        const report = await takeover({
          config,
          snapshot,
          force: opts.force,
          dryRun: opts.dryRun,
          drainMs: opts.drainTimeout,
          logger,
          write: (text) => process.stdout.write(text),
          program: async () => {
            backend = await createSyncBackend(config, logger);
            return backend.sync(snapshot, { full: true, changed: new Set() });
          },
        });
        if (report.remaining.length > 0) process.exitCode = 1;
      } finally {
        // An open netlink socket (nftables mode) would keep the process from exiting.
        await backend?.close?.();
      }
    });
  for (const o of [...renderOptions(), listTimeoutOption(), ...kernelOptions(), ...syncModeOptions()]) cmd.addOption(o);
  return cmd;
}
