/**
 * The health checks of Services with externalTrafficPolicy Local:
 * kube-proxy's ServiceHealthServer (pkg/proxy/healthcheck/service_health.go).
 * Each LoadBalancer Service with `spec.healthCheckNodePort` gets an HTTP
 * server on that port, which its cloud load balancer probes to learn
 * whether this node has endpoints of the Service: 200 when it has local
 * ready endpoints and the proxy is healthy, 503 otherwise, with
 * kube-proxy's JSON body on any path.
 *
 * The servers follow the proxier's successful syncs (model/health-check.ts
 * says which Services and how many endpoints): a Service's server opens
 * when the Service first asks for it, and closes when the Service goes or
 * changes its port. A port that cannot be bound is logged and tried again
 * every 5 s (kept.ts), without holding up anything else. While the source
 * is incomplete no server is closed, as no rule is deleted then.
 */
import type { IPAddress } from '../model/addr.ts';
import { healthCheckServices, type HealthCheckService } from '../model/health-check.ts';
import type { Proxier } from '../proxier/proxier.ts';
import type { Logger } from '../util/log.ts';
import type { RouteAnswer } from './http.ts';
import { keepServing, type KeptServer } from './kept.ts';

/** Options of a {@link ServiceHealthServer}; times in ms. */
export interface ServiceHealthOptions {
  /** The addresses each health check listens on (kube-proxy: the node's addresses in --nodeport-addresses, else all). */
  readonly addresses: readonly IPAddress[];
  /** The proxy's own health, node eligibility aside (ProxyHealth.isHealthy): kube-proxy's serviceProxyHealthy. */
  readonly isHealthy: () => boolean;
  readonly logger: Logger;
  /** Time between two attempts to bind a port; default 5 s (kept.ts RETRY_MS). */
  readonly retryMs?: number;
}

/** One Service's health check: what it reports, and its servers (one per address). */
interface Instance {
  readonly key: string;
  readonly namespace: string;
  readonly name: string;
  readonly port: number;
  localEndpoints: number;
  servers: KeptServer[];
  /** Removed: its servers are (to be) closed. */
  closed: boolean;
}

/**
 * The answer of a Service's health check (kube-proxy's hcHandler): 200
 * when `localEndpoints` is not 0 and the proxy is healthy, else 503; the
 * body is kube-proxy's JSON, indented with tabs, without a final newline:
 * `{"service": {"namespace": …, "name": …}, "localEndpoints": N, "serviceProxyHealthy": B}`;
 * header `X-Load-Balancing-Endpoint-Weight: N`, which weighted load
 * balancers read.
 */
export function serviceHealthAnswer(svc: { readonly namespace: string; readonly name: string }, localEndpoints: number, proxyHealthy: boolean): RouteAnswer {
  const body = [
    '{',
    '\t"service": {',
    `\t\t"namespace": ${JSON.stringify(svc.namespace)},`,
    `\t\t"name": ${JSON.stringify(svc.name)}`,
    '\t},',
    `\t"localEndpoints": ${localEndpoints},`,
    `\t"serviceProxyHealthy": ${proxyHealthy}`,
    '}',
  ].join('\n');
  return {
    status: localEndpoints !== 0 && proxyHealthy ? 200 : 503,
    contentType: 'application/json',
    body,
    headers: { 'X-Load-Balancing-Endpoint-Weight': String(localEndpoints) },
  };
}

/** See the module comment. */
export class ServiceHealthServer {
  private readonly services = new Map<string, Instance>();
  /** Opening and closing servers, one update after the other (a port closed is free before it is opened again). */
  private work: Promise<void> = Promise.resolve();

  constructor(private readonly opts: ServiceHealthOptions) {}

  /**
   * Follow `proxier`: after each successful sync, serve the health checks
   * its snapshot asks for. @returns a function that stops following.
   */
  listen(proxier: Pick<Proxier, 'on'>): () => void {
    return proxier.on('sync', (last) => {
      if (last.error !== undefined || last.snapshot === undefined) return;
      void this.update(healthCheckServices(last.snapshot), { keepMissing: last.incomplete.length > 0 });
    });
  }

  /**
   * Make `wanted` (by "namespace/name") the health checks served
   * (kube-proxy's SyncServices, then SyncEndpoints): the counts change at
   * once; servers of Services no longer wanted, or wanted on another port,
   * are closed, and new ones opened. With `keepMissing` (the source is
   * incomplete) a Service missing from `wanted` keeps its server and count.
   * Resolves once every server has been tried once; never rejects.
   */
  update(wanted: ReadonlyMap<string, HealthCheckService>, opts: { keepMissing?: boolean } = {}): Promise<void> {
    const removed: Instance[] = [];
    const added: Instance[] = [];
    for (const [key, inst] of this.services) {
      const want = wanted.get(key);
      if (want === undefined ? opts.keepMissing === true : want.port === inst.port) continue;
      inst.closed = true;
      this.services.delete(key);
      removed.push(inst);
    }
    for (const [key, want] of wanted) {
      const inst = this.services.get(key);
      if (inst !== undefined) {
        inst.localEndpoints = want.localEndpoints;
        continue;
      }
      const fresh: Instance = { key, namespace: want.namespace, name: want.name, port: want.port, localEndpoints: want.localEndpoints, servers: [], closed: false };
      this.services.set(key, fresh);
      added.push(fresh);
    }
    if (removed.length === 0 && added.length === 0) return this.work;
    this.work = this.work.then(async () => {
      await Promise.all(removed.map((inst) => this.stop(inst)));
      await Promise.all(added.map((inst) => this.start(inst)));
    });
    return this.work;
  }

  /** The Services served, by "namespace/name": the port and the ports bound (one per address; undefined while not listening). */
  served(): Map<string, { port: number; bound: (number | undefined)[]; localEndpoints: number }> {
    const out = new Map<string, { port: number; bound: (number | undefined)[]; localEndpoints: number }>();
    for (const [key, inst] of this.services) out.set(key, { port: inst.port, bound: inst.servers.map((s) => s.port()), localEndpoints: inst.localEndpoints });
    return out;
  }

  /** Close every server (stop following the proxier first, or the next sync opens them again). */
  async close(): Promise<void> {
    await this.update(new Map());
  }

  private async start(inst: Instance): Promise<void> {
    if (inst.closed) return;
    const what = `the health check of Service ${inst.key} on port ${inst.port}`;
    const routes = { '*': () => serviceHealthAnswer(inst, inst.localEndpoints, this.opts.isHealthy()) };
    const fields = { service: inst.key };
    inst.servers = await Promise.all(
      this.opts.addresses.map((ip) =>
        keepServing({ ip, port: inst.port }, what, this.opts.logger, routes, { fields, ...(this.opts.retryMs !== undefined ? { retryMs: this.opts.retryMs } : {}) }),
      ),
    );
    if (inst.closed) await this.stop(inst);
  }

  private async stop(inst: Instance): Promise<void> {
    const servers = inst.servers;
    inst.servers = [];
    if (servers.length === 0) return;
    await Promise.all(servers.map((s) => s.close()));
    this.opts.logger.info({ service: inst.key, port: inst.port }, `stopped serving the health check of Service ${inst.key} on port ${inst.port}`);
  }
}
