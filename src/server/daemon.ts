/**
 * `drover run`'s HTTP servers, each on its own address as in kube-proxy,
 * or off: the metrics server (/metrics from metrics.ts, /proxyMode,
 * /configz, and /healthz answering `ok` as kube-proxy's metrics server
 * does) and the health server (/healthz and /livez, health.ts); and one
 * health check per LoadBalancer Service with externalTrafficPolicy Local
 * (service-health.ts).
 */
import type { BindAddress, IPAddress } from '../model/addr.ts';
import type { Proxier } from '../proxier/proxier.ts';
import type { Logger } from '../util/log.ts';
import { ProxyHealth } from './health.ts';
import type { RouteAnswer } from './http.ts';
import { keepServing, type KeptServer } from './kept.ts';
import { ProxyMetrics, type ModeMetricsFactory } from './metrics.ts';
import { ServiceHealthServer } from './service-health.ts';

/** The metrics server's /healthz: k8s.io/apiserver's healthz handler with its one ping check, as kube-proxy serves it. */
const PING: RouteAnswer = { status: 200, contentType: 'text/plain; charset=utf-8', body: 'ok' };

/** Options of {@link startServers}; times in ms. */
export interface ServersOptions {
  /** Where /metrics is served; null: nowhere. */
  readonly metrics: BindAddress | null;
  /** Where /healthz and /livez are served; null: nowhere. */
  readonly healthz: BindAddress | null;
  /** The mode's name (Backend.mode), which /proxyMode answers. */
  readonly proxyMode: string;
  /**
   * Where the Services' health checks listen, each on its
   * healthCheckNodePort (service-health.ts); empty: no health checks.
   */
  readonly healthCheckAddresses: readonly IPAddress[];
  /** `--sync-period`: a queued sync may wait twice this before the health check fails (kube-proxy's healthTimeout). */
  readonly syncPeriodMs: number;
  /** The mode's own metrics (ModeDriver.metrics). */
  readonly modeMetrics?: ModeMetricsFactory;
  /** `--netns`: the namespace the mode's metrics read the kernel of; undefined: drover's own. */
  readonly netns?: string;
  /** What /configz answers, as JSON (cli/configz.ts: `{"kubeproxy.config.k8s.io": {…}}`); absent: /configz is not served. */
  readonly configz?: unknown;
  readonly logger: Logger;
}

/** The running servers and what they serve. */
export interface Servers {
  readonly metrics: ProxyMetrics;
  readonly health: ProxyHealth;
  readonly serviceHealth: ServiceHealthServer;
  /** The ports bound at start, for a listen address with port 0 (absent: off, or not listening yet). */
  readonly ports: { readonly metrics?: number; readonly healthz?: number };
  close(): Promise<void>;
}

/**
 * Follow `proxier` with the metrics, the health state and the Services'
 * health checks, and serve them.
 * Call before `proxier.start()`, so that the first sync is counted. A
 * server that cannot listen (the address is taken) is logged and tried
 * again every 5 s, as kube-proxy does: the proxy itself keeps running.
 */
export async function startServers(proxier: Pick<Proxier, 'on'>, opts: ServersOptions): Promise<Servers> {
  const metrics = new ProxyMetrics(opts.modeMetrics, opts.netns === undefined ? {} : { netns: opts.netns });
  const health = new ProxyHealth(2 * opts.syncPeriodMs);
  const serviceHealth = new ServiceHealthServer({ addresses: opts.healthCheckAddresses, isHealthy: () => health.isHealthy(), logger: opts.logger });
  // The health state first: a Service's check reads it.
  const unlisten = [metrics.listen(proxier), health.listen(proxier)];
  if (opts.healthCheckAddresses.length > 0) unlisten.push(serviceHealth.listen(proxier));
  const probe = (answer: () => { status: number; body: string }, path: 'healthz' | 'livez') => (): RouteAnswer => {
    const a = answer();
    metrics.countProbe(path, a.status);
    return { status: a.status, contentType: 'application/json', body: a.body };
  };
  const kept: KeptServer[] = [];
  if (opts.metrics) {
    kept.push(
      await keepServing(opts.metrics, 'metrics at /metrics, /proxyMode, /configz and /healthz', opts.logger, {
        '/metrics': async () => ({ status: 200, contentType: metrics.registry.contentType, body: await metrics.registry.metrics() }),
        // kube-proxy's answer (cmd/kube-proxy/app/server.go serveMetrics): the mode's name, no newline.
        '/proxyMode': () => ({ status: 200, contentType: 'text/plain; charset=utf-8', body: opts.proxyMode }),
        // kube-proxy installs k8s.io/apiserver's healthz handler on this server too: its ping check, `ok`, says the process answers.
        '/healthz': () => PING,
        '/healthz/ping': () => PING,
        ...(opts.configz !== undefined ? { '/configz': () => ({ status: 200, contentType: 'application/json', body: JSON.stringify(opts.configz) }) } : {}),
      }),
    );
  }
  if (opts.healthz) {
    kept.push(await keepServing(opts.healthz, '/healthz and /livez', opts.logger, { '/healthz': probe(() => health.healthz(), 'healthz'), '/livez': probe(() => health.livez(), 'livez') }));
  }
  return {
    metrics,
    health,
    serviceHealth,
    ports: {
      ...(opts.metrics ? { metrics: kept[0]!.port() } : {}),
      ...(opts.healthz ? { healthz: kept[kept.length - 1]!.port() } : {}),
    },
    close: async () => {
      for (const off of unlisten) off();
      await Promise.all([...kept.map((k) => k.close()), serviceHealth.close()]);
    },
  };
}
