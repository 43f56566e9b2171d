/**
 * drover's Prometheus metrics, under kube-proxy's names
 * (pkg/proxy/metrics/metrics.go, subsystem `kubeproxy`), so that
 * dashboards and alerts written for kube-proxy work unchanged; plus the
 * process metrics of prom-client's collectDefaultMetrics
 * (`process_cpu_seconds_total`, `process_resident_memory_bytes`, …).
 *
 * Everything is fed by the proxier's events (proxier.ts `sync` and
 * `queued`); a mode adds its own metrics through its driver
 * (ModeDriver.metrics), e.g. iptables mode's `sync_proxy_rules_iptables_*`.
 *
 * The `ip_family` label ("IPv4" or "IPv6") is on the metrics that carry it
 * in kube-proxy 1.33 and later, where each family has its own proxier:
 * the sync durations, the last synced and last queued times, the network
 * programming latency and the Local-policy counts. drover syncs both
 * families in one attempt, so an attempt's duration is observed once for
 * each family it ran. IPv6 appears once a sync has covered it (a Service
 * with an IPv6 ClusterIP, or drover's state in the IPv6 tables).
 *
 * Differences from kube-proxy, by design: the change counters count
 * service ports changed (kube-proxy counts Service and EndpointSlice
 * events).
 */
import { collectDefaultMetrics, Counter, exponentialBuckets, Gauge, Histogram, linearBuckets, Registry } from 'prom-client';
import { usesLocalEndpoints, categorizeEndpoints, externallyAccessible } from '../model/policy.ts';
import type { IPFamily, ServicePort, Snapshot } from '../model/types.ts';
import { failuresByFamily, resultsByFamily } from '../modes/shared/dual-stack.ts';
import type { LastSync, Proxier } from '../proxier/proxier.ts';

/** The metric names' prefix: kube-proxy's subsystem. */
export const SUBSYSTEM = 'kubeproxy';

/** kube-proxy's sync latency buckets: 1 ms doubling 15 times (to about 16 s). */
const SYNC_BUCKETS = exponentialBuckets(0.001, 2, 15);

/** kube-proxy's network programming buckets: 0.25 s, 0.5 s, 1-59 s, 60-115 s by 5, 2-5 min by 30 s. */
const PROGRAMMING_BUCKETS = [
  ...linearBuckets(0.25, 0.25, 2),
  ...linearBuckets(1, 1, 59),
  ...linearBuckets(60, 5, 12),
  ...linearBuckets(120, 30, 7),
];

/** What a mode adds to the metrics: called after every sync attempt, with the registry the mode registered its metrics in. */
export type ModeMetricsListener = (last: LastSync) => void;

/** Where the mode's metrics read the kernel from, when they read it at scrape time. */
export interface ModeMetricsContext {
  /** `--netns`: the namespace drover programs; undefined: its own. */
  readonly netns?: string;
}

/**
 * Creates a mode's own metrics in `registry` (names from {@link metricName})
 * and returns the listener that updates them; see ModeDriver.metrics.
 */
export type ModeMetricsFactory = (registry: Registry, context: ModeMetricsContext) => ModeMetricsListener;

/** The label kube-proxy 1.33+ puts on its per-family metrics; values "IPv4" and "IPv6" (Kubernetes' IPFamily). */
export const IP_FAMILY_LABEL = 'ip_family';

/**
 * The IP families a sync attempt concerned, for the `ip_family` label: on
 * success, the families it synced (SyncResult.families); on a failure of
 * the mode's kernel work, the families that failed (dual-stack.ts
 * failuresByFamily); none when the source could not be read. A failure
 * after a read (`changes` present) is the backend's: nothing after the
 * backend's sync throws in the proxier.
 */
export function syncFamilies(last: LastSync): IPFamily[] {
  if (last.result) return resultsByFamily(last.result).map(([family]) => family);
  if (last.error !== undefined && last.changes !== undefined) return failuresByFamily(last.cause).map((f) => f.family);
  return [];
}

/**
 * A function that shows each of `counters` at 0 for an IP family the first
 * time it is named (later calls do nothing), so that `rate()` and
 * `increase()` see a family's first failure. Starts with IPv4.
 */
export function zeroForFamilies(...counters: ReadonlyArray<Counter<'ip_family'>>): (family: IPFamily) => void {
  const seen = new Set<IPFamily>();
  const know = (family: IPFamily) => {
    if (seen.has(family)) return;
    seen.add(family);
    for (const c of counters) c.inc({ ip_family: family }, 0);
  };
  know('IPv4');
  return know;
}

/** `kubeproxy_<name>`. */
export function metricName(name: string): string {
  return `${SUBSYSTEM}_${name}`;
}

/** The registry and the metrics of one `drover run`. */
export class ProxyMetrics {
  /** Every metric, for the /metrics handler (registry.metrics()). */
  readonly registry = new Registry();
  private readonly duration: Histogram<'ip_family'>;
  private readonly fullDuration: Histogram<'ip_family'>;
  private readonly partialDuration: Histogram<'ip_family'>;
  private readonly programming: Histogram<'ip_family'>;
  private readonly lastTimestamp: Gauge<'ip_family'>;
  private readonly lastQueued: Gauge<'ip_family'>;
  private readonly endpointChanges: Counter;
  private readonly serviceChanges: Counter;
  private readonly endpointPending: Gauge;
  private readonly servicePending: Gauge;
  private readonly noLocal: Gauge<'ip_family' | 'traffic_policy'>;
  private readonly probes: Record<'healthz' | 'livez', Counter<'code'>>;
  private readonly modeListener: ModeMetricsListener | undefined;
  private pending = { services: 0, endpoints: 0 };
  /** The families synced so far (IPv4 from the start), whose last queued time a queued sync sets. */
  private readonly families = new Set<IPFamily>(['IPv4']);

  /**
   * @param mode the mode's own metrics (ModeDriver.metrics), if it has any.
   * @param context where they read the kernel (the programmed namespace).
   */
  constructor(mode?: ModeMetricsFactory, context: ModeMetricsContext = {}) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    const histogram = (name: string, help: string, buckets: number[]) => new Histogram({ name: metricName(name), help, buckets, labelNames: [IP_FAMILY_LABEL], registers });
    const gauge = (name: string, help: string) => new Gauge({ name: metricName(name), help, registers });
    const familyGauge = (name: string, help: string) => new Gauge({ name: metricName(name), help, labelNames: [IP_FAMILY_LABEL], registers });
    const counter = (name: string, help: string) => new Counter({ name: metricName(name), help, registers });
    this.duration = histogram('sync_proxy_rules_duration_seconds', 'SyncProxyRules latency in seconds', SYNC_BUCKETS);
    this.fullDuration = histogram('sync_full_proxy_rules_duration_seconds', 'SyncProxyRules latency in seconds for full resyncs', SYNC_BUCKETS);
    this.partialDuration = histogram('sync_partial_proxy_rules_duration_seconds', 'SyncProxyRules latency in seconds for partial resyncs', SYNC_BUCKETS);
    this.programming = histogram('network_programming_duration_seconds', 'In Cluster Network Programming Latency in seconds', PROGRAMMING_BUCKETS);
    this.lastTimestamp = familyGauge('sync_proxy_rules_last_timestamp_seconds', 'The last time proxy rules were successfully synced');
    this.lastQueued = familyGauge('sync_proxy_rules_last_queued_timestamp_seconds', 'The last time a sync of proxy rules was queued');
    this.endpointChanges = counter('sync_proxy_rules_endpoint_changes_total', 'Cumulative proxy rules Endpoint changes');
    this.serviceChanges = counter('sync_proxy_rules_service_changes_total', 'Cumulative proxy rules Service changes');
    this.endpointPending = gauge('sync_proxy_rules_endpoint_changes_pending', 'Pending proxy rules Endpoint changes');
    this.servicePending = gauge('sync_proxy_rules_service_changes_pending', 'Pending proxy rules Service changes');
    this.noLocal = new Gauge({
      name: metricName('sync_proxy_rules_no_local_endpoints_total'),
      help: 'Number of services with a Local traffic policy and no endpoints',
      labelNames: [IP_FAMILY_LABEL, 'traffic_policy'],
      registers,
    });
    this.probes = {
      healthz: new Counter({ name: metricName('proxy_healthz_total'), help: 'Cumulative proxy healthz HTTP status', labelNames: ['code'], registers }),
      livez: new Counter({ name: metricName('proxy_livez_total'), help: 'Cumulative proxy livez HTTP status', labelNames: ['code'], registers }),
    };
    this.modeListener = mode?.(this.registry, context);
  }

  /** Count one answer of the health server (`kubeproxy_proxy_healthz_total{code}`, `…_livez_total`). */
  countProbe(path: 'healthz' | 'livez', status: number): void {
    this.probes[path].inc({ code: String(status) });
  }

  /** Follow `proxier`'s events. @returns a function that stops following. */
  listen(proxier: Pick<Proxier, 'on'>): () => void {
    const offSync = proxier.on('sync', (last) => this.onSync(last));
    const offQueued = proxier.on('queued', (at) => {
      for (const family of this.families) this.lastQueued.set({ ip_family: family }, at / 1000);
    });
    return () => {
      offSync();
      offQueued();
    };
  }

  /** Update every metric from one sync attempt (proxier.ts LastSync). */
  onSync(last: LastSync): void {
    const seconds = last.durationMs / 1000;
    const synced = syncFamilies(last);
    for (const family of synced) this.families.add(family);
    // A failed attempt ran every family in use (a dual-stack backend syncs each one, whichever fails), or none if the source could not be read: observed for all.
    for (const family of last.error === undefined ? synced : this.families) {
      this.duration.observe({ ip_family: family }, seconds);
      (last.full ? this.fullDuration : this.partialDuration).observe({ ip_family: family }, seconds);
    }
    if (last.changes) {
      this.serviceChanges.inc(last.changes.services);
      this.endpointChanges.inc(last.changes.endpoints);
      this.pending = { services: this.pending.services + last.changes.services, endpoints: this.pending.endpoints + last.changes.endpoints };
    }
    if (last.error === undefined) {
      this.pending = { services: 0, endpoints: 0 };
      for (const family of synced) this.lastTimestamp.set({ ip_family: family }, last.at / 1000);
      for (const { family, at } of changeTimes(last.triggerTimes, last.snapshot)) {
        const latency = (last.at - at) / 1000;
        if (latency >= 0) this.programming.observe({ ip_family: family }, latency);
      }
      if (last.snapshot) {
        for (const family of synced) {
          const counts = noLocalEndpoints(last.snapshot, family);
          this.noLocal.set({ ip_family: family, traffic_policy: 'internal' }, counts.internal);
          this.noLocal.set({ ip_family: family, traffic_policy: 'external' }, counts.external);
        }
      }
    }
    this.servicePending.set(this.pending.services);
    this.endpointPending.set(this.pending.endpoints);
    this.modeListener?.(last);
  }
}

/**
 * Service ports of `family`'s view (the IPv4 one by default) whose Local
 * traffic policy has no local endpoint to use while other nodes have some
 * (the DROP case; a port with no usable endpoint anywhere is rejected and
 * not counted): `internal` for internalTrafficPolicy Local, `external` for
 * externalTrafficPolicy Local on an externally reachable service port, as
 * kube-proxy counts them in its sync loop (pkg/proxy/iptables/proxier.go,
 * serviceNoLocalEndpointsTotalInternal and …External, in the branch where
 * the service has endpoints), each family's proxier its own. Costs
 * O(service ports).
 */
export function noLocalEndpoints(snapshot: Snapshot, family: IPFamily = 'IPv4'): { internal: number; external: number } {
  let internal = 0;
  let external = 0;
  const ports: ReadonlyMap<string, ServicePort> = family === 'IPv4' ? snapshot.services : (snapshot.ipv6Services ?? new Map());
  for (const sp of ports.values()) {
    if (!usesLocalEndpoints(sp)) continue;
    const { local, hasAnyEndpoints } = categorizeEndpoints(sp, snapshot.node);
    if (local === null || local.length > 0 || !hasAnyEndpoints) continue;
    if (sp.internalTrafficPolicy === 'Local') internal++;
    if (externallyAccessible(sp) && sp.externalTrafficPolicy === 'Local') external++;
  }
  return { internal, external };
}

/**
 * The change times to observe, once per Service ("namespace/name"), IP
 * family and time: a source reports them per service port, and one
 * EndpointSlice change of a three-port Service is one change, as
 * kube-proxy counts it (pkg/proxy/endpointschangetracker.go keys them by
 * Service). A service port's family is that of the views of `snapshot`
 * that hold it (both for a dual-stack one: each family's proxier observes
 * it in kube-proxy); one in neither (removed) counts as IPv4's.
 */
export function changeTimes(byPort: ReadonlyMap<string, readonly number[]> | undefined, snapshot?: Snapshot): Array<{ family: IPFamily; at: number }> {
  const seen = new Set<string>();
  const out: Array<{ family: IPFamily; at: number }> = [];
  for (const [key, times] of byPort ?? []) {
    const service = key.includes(':') ? key.slice(0, key.indexOf(':')) : key;
    const families: IPFamily[] = [];
    if (snapshot?.services.has(key)) families.push('IPv4');
    if (snapshot?.ipv6Services?.has(key)) families.push('IPv6');
    if (families.length === 0) families.push('IPv4');
    for (const family of families) {
      for (const at of times) {
        if (seen.has(`${family} ${service} ${at}`)) continue;
        seen.add(`${family} ${service} ${at}`);
        out.push({ family, at });
      }
    }
  }
  return out;
}
