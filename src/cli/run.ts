/**
 * `drover run`: the sync loop, until SIGINT or SIGTERM (rules stay in place
 * on exit); SIGHUP forces a full resync. Serves metrics and health checks,
 * and the health-check NodePort of each LoadBalancer Service with
 * externalTrafficPolicy Local (server/daemon.ts).
 */
import { Command, Option } from 'commander';
import { resolve } from 'node:path';
import { configOptions, settingName } from './config-file.ts';
import { checkProxyConfig, commandProxyConfig, sourceOptions } from './proxy-config.ts';
import { DEFAULT_STATE_DIR } from '../sources/defaults.ts';
import { fileSettleOption, conntrackOptions, fullSyncPeriodOption, kernelOptions, pollIntervalOption, renderOptions, serverOptions, syncPeriodOptions } from './options.ts';
import { modeDriver } from '../modes/registry.ts';
import { guardNodeSettings, needsNode, nodeSettings } from './node-settings.ts';
import { applyConntrackOptions, createSource, createSyncBackend, lockNamespace, sourceKind, statusFileOption, syncLogFieldsOf, syncModeOptions } from './setup.ts';
import { dnsOptions } from './dns-options.ts';
import type { Logger } from '../util/log.ts';
import { interceptedAddress } from '../dns/intercept.ts';
import type { NodeDns } from '../dns/node-dns.ts';

/** How `run --takeover` tells what `drover takeover` prints: one log line per line of text, `{"line": "…", "msg": "takeover"}`. */
function takeoverLog(logger: Logger): (text: string) => void {
  return (text) => {
    for (const line of text.trimEnd().split('\n')) logger.info({ line }, 'takeover');
  };
}

/** Without `--dns-address`: remove an earlier run's cluster DNS interception, which nothing would answer now (node-dns.ts removeInterceptLeftover). */
async function removeLeftoverIntercept(logger: Logger): Promise<void> {
  try {
    const { removeInterceptLeftover } = await import('../dns/node-dns.ts');
    const removed = await removeInterceptLeftover();
    if (removed !== undefined) logger.warn(removed, 'DNS: no --dns-address, so the cluster DNS interception and node DNS rules of an earlier run are removed');
  } catch (err) {
    logger.warn({ err: (err as Error).message }, 'DNS: could not look for an earlier run\'s cluster DNS interception');
  }
}

/** The `run` command. */
export function runCommand(): Command {
  const cmd = new Command('run')
    .description('watch the source and keep the kernel in sync with it (the service proxy)')
    .action(async (given: { statusFile: string; takeover: boolean }) => {
      // What the loop needs, loaded when it runs: the other commands start without it.
      const [{ SystemConntrack }, { Proxier }, { collectAfterSyncs }, { StatusFileWriter }, { createLogger }, { startServers }, { healthCheckAddresses: healthCheckAddressesFor }, { configz }] = await Promise.all([
        import('../conntrack/exec.ts'),
        import('../proxier/proxier.ts'),
        import('../proxier/collect-after-sync.ts'),
        import('../proxier/status-file.ts'),
        import('../util/log.ts'),
        import('../server/daemon.ts'),
        import('../server/node-addresses.ts'),
        import('./configz.ts'),
      ]);
      let config = commandProxyConfig(cmd);
      checkProxyConfig(config, { name: (flag) => settingName(cmd, flag), statusFile: given.statusFile });
      const { kernel, sync, server } = config;
      if (sync === undefined || server === undefined) throw new Error('unreachable: run without its sync periods or servers');
      const statusFile = resolve(given.statusFile);
      const fromFiles = sourceKind(config.render.source) === 'file';
      const logger = createLogger(kernel.logLevel);
      // SIGHUP's default action ends the process: catch it from the start (the first sync, whenever it comes, is full anyway).
      let onHangup = () => logger.info({ signal: 'SIGHUP' }, 'full resync requested before the first sync, which is full anyway');
      const hangup = () => onHangup();
      process.on('SIGHUP', hangup);
      // With settings from the Node (NodeCIDR, primary), the source is read first: the rules depend on it.
      const fromNode = needsNode(config.render);
      let backend = fromNode ? undefined : await createSyncBackend(config, logger);
      // Held until the process exits; taken before the source is read, so that a refused second run writes no state either.
      await lockNamespace('run', kernel, logger, { close: backend });
      let source = await createSource(sourceOptions(config), logger, { persist: true });
      // A missing --source path fails here, before the loop starts; a server
      // that does not answer yet is waited for (nothing is synced until it does).
      // --dns-intercept-cluster-dns also needs the first read: the cluster DNS ClusterIP is checked against it (dns/intercept.ts).
      const dns0 = config.dns;
      const interceptOf = (read: { readonly snapshot: Parameters<typeof interceptedAddress>[0] }) =>
        dns0?.dnsInterceptClusterDns === true && dns0.dnsAddress !== undefined ? interceptedAddress(read.snapshot, { ...dns0, dnsAddress: dns0.dnsAddress }) : undefined;
      const firstLoad = !fromNode && (fromFiles || dns0?.dnsInterceptClusterDns === true) ? await source.load() : undefined;
      let intercept = firstLoad !== undefined ? interceptOf(firstLoad) : undefined;
      let stopNow = (why: string) => logger.error(why);
      if (fromNode) {
        const asked = config.render;
        const read = await source.load();
        intercept = interceptOf(read);
        const settings = nodeSettings(asked, read.snapshot.node);
        logger.info({ ...settings, nodeportAddresses: settings.nodeportAddresses?.map((c) => c.text) }, 'settings read from the Node');
        config = { ...config, render: { ...asked, ...settings } };
        source = guardNodeSettings(source, asked, settings, (why) => stopNow(why));
        backend = await createSyncBackend(config, logger);
      }
      if (backend === undefined) throw new Error('unreachable: no backend');
      const { render } = config;
      await applyConntrackOptions(config, logger);
      // Before the servers start: drover's own health server would answer on kube-proxy's healthz port.
      const takeoverModule = given.takeover ? await import('../takeover/takeover.ts') : undefined;
      const takeoverPlan = takeoverModule !== undefined ? await takeoverModule.prepareTakeover(config, false, takeoverLog(logger)) : undefined;
      const mode = modeDriver(kernel.mode);
      const { render: modeRender, ...modeInfo } = mode.runInfo(config.modes);
      const status = new StatusFileWriter(
        statusFile,
        {
          pid: process.pid,
          mode: backend.mode,
          iptablesBackend: kernel.iptablesBackend,
          netns: kernel.netns ?? null,
          source: fromFiles ? resolve(render.source) : render.source,
          stateDir: resolve(render.stateDir ?? DEFAULT_STATE_DIR),
          render: {
            clusterCidr: render.clusterCidr ?? null,
            masqueradeAll: render.masqueradeAll,
            serviceCidr: render.serviceCidr,
            ...(render.nodeportAddresses?.length ? { nodePortAddresses: render.nodeportAddresses.map((c) => c.text) } : {}),
            ...modeRender,
            ...(render.conntrackTcpBeLiberal === true ? { conntrackTcpBeLiberal: true } : {}),
          },
          ipvs: null,
          ...modeInfo,
        },
        logger,
      );
      const proxier = new Proxier({
        source,
        backend,
        logger,
        minSyncPeriodMs: sync.minSyncPeriod,
        syncPeriodMs: sync.syncPeriod,
        ...(sync.fullSyncPeriod !== undefined ? { fullSyncPeriodMs: sync.fullSyncPeriod } : {}),
        conntrack: new SystemConntrack(kernel.netns),
        ...syncLogFieldsOf(kernel.mode),
      });
      status.listen(proxier);
      if (takeoverModule !== undefined && takeoverPlan !== undefined) {
        // The rest of the takeover after the first full sync of a source read whole: check, then remove the old state.
        const start = Date.now();
        const off = proxier.on('sync', (last) => {
          if (!last.full || last.result === undefined || last.snapshot === undefined || last.incomplete.length > 0) return;
          off();
          const write = takeoverLog(logger);
          void takeoverModule.completeTakeover({ config, plan: takeoverPlan, snapshot: last.snapshot, logger, write, start }).catch((err: Error) =>
            logger.error({ err: err.message }, 'takeover stopped; the old state is left in place beside this mode\'s'),
          );
        });
      }
      const healthCheckAddresses = healthCheckAddressesFor(render.nodeportAddresses);
      if (healthCheckAddresses.length === 0) {
        logger.warn({ nodeportAddresses: render.nodeportAddresses?.map((c) => c.text) }, 'no IPv4 address of this node is in --nodeport-addresses: no Service health check is served');
      }
      // A sync leaves garbage behind (a full one, the size of the whole ruleset), which V8 would keep until it needs room.
      const stopCollecting = collectAfterSyncs(proxier);
      // Before the first sync, so that the zone takes it.
      const dnsAddress = config.dns?.dnsAddress;
      const dns: NodeDns | undefined =
        config.dns !== undefined && dnsAddress !== undefined
          ? await (await import('../dns/node-dns.ts')).startNodeDns(proxier, { ...config.dns, dnsAddress, dataplane: { nftables: mode.filter === 'nftables', iptables: kernel.iptablesBackend }, ...(intercept !== undefined ? { intercept } : {}) }, logger)
          : undefined;
      if (dnsAddress === undefined && kernel.netns === undefined) await removeLeftoverIntercept(logger);
      if (kernel.netns !== undefined) {
        const left = await (await import('../dns/node-dns.ts')).nodeDnsStateIn(kernel.netns);
        if (left.length > 0) logger.warn({ netns: kernel.netns, left }, `network namespace ${kernel.netns} holds node DNS state that --netns cannot remove; its rules may still send DNS queries to a server no longer there: run \`ip netns exec ${kernel.netns} drover cleanup\``);
      }
      const servers = await startServers(proxier, {
        metrics: server.metricsBindAddress,
        healthz: server.healthzBindAddress,
        proxyMode: backend.mode,
        healthCheckAddresses,
        syncPeriodMs: sync.syncPeriod,
        ...(mode.metrics !== undefined ? { modeMetrics: await mode.metrics() } : {}),
        ...(kernel.netns ? { netns: kernel.netns } : {}),
        configz: configz({ ...config, sync, server }),
        logger,
      });
      let refreshStatus: NodeJS.Timeout | undefined;
      if (dns !== undefined && dnsAddress !== undefined) {
        const { registerDnsMetrics } = await import('../dns/metrics.ts');
        registerDnsMetrics(servers.metrics.registry, dns.server.stats);
        const { stats } = dns.server;
        status.withDns(() => ({
          at: new Date().toISOString(),
          address: dnsAddress,
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
        { source: render.source, minSyncPeriodMs: sync.minSyncPeriod, syncPeriodMs: sync.syncPeriod, ...(fromFiles ? {} : { pollIntervalMs: render.pollInterval }) },
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
