/**
 * `drover run`: the sync loop, until SIGINT or SIGTERM (rules stay in place
 * on exit); SIGHUP forces a full resync. Serves metrics and health checks,
 * and the health-check NodePort of each LoadBalancer Service with
 * externalTrafficPolicy Local (server/daemon.ts).
 */
import { Command, Option } from 'commander';
import { relative, resolve } from 'node:path';
import { SystemConntrack } from '../conntrack/exec.ts';
import { Proxier } from '../proxier/proxier.ts';
import { collectAfterSyncs } from '../proxier/collect-after-sync.ts';
import { StatusFileWriter } from '../proxier/status-file.ts';
import { createLogger } from '../util/log.ts';
import { startServers } from '../server/daemon.ts';
import { healthCheckAddresses as healthCheckAddressesFor } from '../server/node-addresses.ts';
import { configOptions, settingName } from './config-file.ts';
import { configz } from './configz.ts';
import { checkSyncPeriods, fileSettleOption, conntrackOptions, fullSyncPeriodOption, kernelOptions, pollIntervalOption, renderOptions, serverOptions, syncPeriodOptions } from './options.ts';
import type { ServerCliOptions } from '../config/server.ts';
import type { SyncCliOptions } from '../config/sync.ts';
import { modeDriver } from '../modes/registry.ts';
import { guardNodeSettings, needsNode, nodeSettings } from './node-settings.ts';
import { applyConntrackOptions, createSource, createSyncBackend, lockNamespace, sourceKind, statusFileOption, syncLogFieldsOf, syncModeOptions } from './setup.ts';
import { UsageError } from '../errors.ts';
import { dnsOptions } from './dns-options.ts';
import type { DnsCliOptions } from '../config/dns.ts';
import { startNodeDns, type NodeDns } from '../dns/node-dns.ts';
import { registerDnsMetrics } from '../dns/metrics.ts';
import { completeTakeover, prepareTakeover } from '../takeover/takeover.ts';
import type { Logger } from '../util/log.ts';

/** How `run --takeover` tells what `drover takeover` prints: one log line per line of text, `{"line": "…", "msg": "takeover"}`. */
function takeoverLog(logger: Logger): (text: string) => void {
  return (text) => {
    for (const line of text.trimEnd().split('\n')) logger.info({ line }, 'takeover');
  };
}

/** The `run` command. */
export function runCommand(): Command {
  const cmd = new Command('run')
    .description('watch the source and keep the kernel in sync with it (the service proxy)')
    .action(async (given: SyncCliOptions & ServerCliOptions & DnsCliOptions & { statusFile: string; pollInterval: number; stateDir: string; takeover: boolean }) => {
      let opts = given;
      if (opts.dnsAddress !== undefined && opts.netns !== undefined) {
        throw new UsageError(`--dns-address ${opts.dnsAddress} with --netns ${opts.netns}: the DNS server listens in drover's own network namespace; run drover inside ${opts.netns} (ip netns exec ${opts.netns} drover run …) instead of --netns`);
      }
      const statusFile = resolve(opts.statusFile);
      const fromFiles = sourceKind(opts.source) === 'file';
      for (const [flag, path] of [['--status-file', opts.statusFile], ['--state-dir', opts.stateDir]] as const) {
        if (fromFiles && !relative(resolve(opts.source), resolve(path)).startsWith('..')) {
          // Each write would be a source change, and each change a sync.
          throw new UsageError(`${flag} ${path} is inside --source ${opts.source}; put it elsewhere`);
        }
      }
      checkSyncPeriods(opts, (flag) => settingName(cmd, flag));
      const logger = createLogger(opts.logLevel);
      // SIGHUP's default action ends the process: catch it from the start (the first sync, whenever it comes, is full anyway).
      let onHangup = () => logger.info({ signal: 'SIGHUP' }, 'full resync requested before the first sync, which is full anyway');
      const hangup = () => onHangup();
      process.on('SIGHUP', hangup);
      // With settings from the Node (NodeCIDR, primary), the source is read first: the rules depend on it.
      const fromNode = needsNode(opts);
      let backend = fromNode ? undefined : await createSyncBackend(opts, logger);
      // Held until the process exits; taken before the source is read, so that a refused second run writes no state either.
      await lockNamespace('run', opts, logger, { close: backend });
      let source = await createSource(opts, logger, { persist: true });
      // A missing --source path fails here, before the loop starts; a server
      // that does not answer yet is waited for (nothing is synced until it does).
      if (fromFiles && !fromNode) await source.load();
      let stopNow = (why: string) => logger.error(why);
      if (fromNode) {
        const settings = nodeSettings(opts, (await source.load()).snapshot.node);
        logger.info({ ...settings, nodeportAddresses: settings.nodeportAddresses?.map((c) => c.text) }, 'settings read from the Node');
        opts = { ...opts, ...settings };
        source = guardNodeSettings(source, opts, settings, (why) => stopNow(why));
        backend = await createSyncBackend(opts, logger);
      }
      if (backend === undefined) throw new Error('unreachable: no backend');
      await applyConntrackOptions(opts, logger);
      // Before the servers start: drover's own health server would answer on kube-proxy's healthz port.
      const takeoverPlan = opts.takeover ? await prepareTakeover(opts, false, takeoverLog(logger)) : undefined;
      const status = new StatusFileWriter(
        statusFile,
        {
          pid: process.pid,
          mode: backend.mode,
          iptablesBackend: opts.iptablesBackend,
          netns: opts.netns ?? null,
          source: fromFiles ? resolve(opts.source) : opts.source,
          stateDir: resolve(opts.stateDir),
          render: {
            clusterCidr: opts.clusterCidr ?? null,
            masqueradeAll: opts.masqueradeAll,
            serviceCidr: opts.serviceCidr,
            ...(opts.nodeportAddresses?.length ? { nodePortAddresses: opts.nodeportAddresses.map((c) => c.text) } : {}),
            ...((opts as { nodeportLocalhost?: boolean }).nodeportLocalhost === true ? { nodePortLocalhost: true } : {}),
            ...(opts.conntrackTcpBeLiberal === true ? { conntrackTcpBeLiberal: true } : {}),
          },
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
        ...(opts.fullSyncPeriod !== undefined ? { fullSyncPeriodMs: opts.fullSyncPeriod } : {}),
        conntrack: new SystemConntrack(opts.netns),
        ...syncLogFieldsOf(opts.mode),
      });
      status.listen(proxier);
      if (takeoverPlan !== undefined) {
        // The rest of the takeover after the first full sync of a source read whole: check, then remove the old state.
        const start = Date.now();
        const off = proxier.on('sync', (last) => {
          if (!last.full || last.result === undefined || last.snapshot === undefined || last.incomplete.length > 0) return;
          off();
          const write = takeoverLog(logger);
          void completeTakeover({ opts, plan: takeoverPlan, snapshot: last.snapshot, logger, write, start }).catch((err: Error) =>
            logger.error({ err: err.message }, 'takeover stopped; the old state is left in place beside this mode\'s'),
          );
        });
      }
      const healthCheckAddresses = healthCheckAddressesFor(opts.nodeportAddresses);
      if (healthCheckAddresses.length === 0) {
        logger.warn({ nodeportAddresses: opts.nodeportAddresses?.map((c) => c.text) }, 'no IPv4 address of this node is in --nodeport-addresses: no Service health check is served');
      }
      // A sync leaves garbage behind (a full one, the size of the whole ruleset), which V8 would keep until it needs room.
      const stopCollecting = collectAfterSyncs(proxier);
      // Before the first sync, so that the zone takes it.
      const dns: NodeDns | undefined = opts.dnsAddress !== undefined ? await startNodeDns(proxier, { ...opts, dnsAddress: opts.dnsAddress, dataplane: { nftables: opts.mode === 'nftables', iptables: opts.iptablesBackend } }, logger) : undefined;
      const servers = await startServers(proxier, {
        metrics: opts.metricsBindAddress,
        healthz: opts.healthzBindAddress,
        proxyMode: backend.mode,
        healthCheckAddresses,
        syncPeriodMs: opts.syncPeriod,
        modeMetrics: modeDriver(opts.mode).metrics,
        ...(opts.netns ? { netns: opts.netns } : {}),
        configz: configz(opts),
        logger,
      });
      let refreshStatus: NodeJS.Timeout | undefined;
      if (dns !== undefined) {
        registerDnsMetrics(servers.metrics.registry, dns.server.stats);
        const { stats } = dns.server;
        status.withDns(() => ({
          at: new Date().toISOString(),
          address: opts.dnsAddress!,
          port: dns.server.port,
          zone: dns.zone.domain,
          queries: stats.queries,
          answers: { ...stats.answers },
          zoneAnswers: stats.zone,
          cacheHits: stats.cacheHits,
          forwardFailures: stats.forwardFailures,
          dropped: stats.dropped,
        }));
        // The DNS counters move between syncs: `drover status` reads them at most 10 s old.
        refreshStatus = setInterval(() => status.refresh(), 10_000).unref();
      }
      logger.info(
        { source: opts.source, minSyncPeriodMs: opts.minSyncPeriod, syncPeriodMs: opts.syncPeriod, ...(fromFiles ? {} : { pollIntervalMs: opts.pollInterval }) },
        'drover started',
      );
      await proxier.start();
      await new Promise<void>((resolvePromise) => {
        const stop = (signal: string) => {
          logger.info({ signal }, 'stopping; programmed rules are left in place');
          process.off('SIGHUP', hangup);
          clearInterval(refreshStatus);
          stopCollecting();
          void proxier
            .stop()
            .then(() => servers.close())
            .then(() => dns?.close())
            .then(() => status.idle())
            .then(resolvePromise);
        };
        stopNow = (why: string) => {
          logger.error(why);
          process.exitCode = 1;
          stop('node settings changed');
        };
        onHangup = () => {
          logger.info({ signal: 'SIGHUP' }, 'full resync requested');
          proxier.resync();
        };
        process.once('SIGINT', () => stop('SIGINT'));
        process.once('SIGTERM', () => stop('SIGTERM'));
      });
    });
  const takeover = new Option(
    '--takeover',
    "move the node to --mode as drover takeover does: before the first sync, refuse while kube-proxy runs and find the other modes' state; after the first full sync of a source read whole, check every frontend against it and remove it (docs/takeover.md)",
  ).default(false);
  const options = [...renderOptions(), ...kernelOptions(), ...conntrackOptions(), ...syncModeOptions(), ...syncPeriodOptions(), fullSyncPeriodOption(), pollIntervalOption(), fileSettleOption(), ...serverOptions(), ...dnsOptions(), statusFileOption(), takeover, ...configOptions()];
  for (const o of options) cmd.addOption(o);
  return cmd;
}
