/**
 * iptables mode's Prometheus metrics, under kube-proxy's names
 * (pkg/proxy/metrics/metrics.go): rules owned and written per table, and
 * restore failures (a failed partial restore is also counted as a partial
 * failure; the proxier then retries with a full sync, as kube-proxy does).
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { LastSync } from '../../proxier/proxier.ts';
import { metricName, type ModeMetricsListener } from '../../server/metrics.ts';
import { RestoreError } from './exec.ts';
import { TABLES } from './parse.ts';

/** Register iptables mode's metrics in `registry`; returns the listener that updates them after every sync attempt. */
export function iptablesMetrics(registry: Registry): ModeMetricsListener {
  const registers = [registry];
  const total = new Gauge({ name: metricName('sync_proxy_rules_iptables_total'), help: 'Total number of iptables rules owned by kube-proxy', labelNames: ['table'], registers });
  const last = new Gauge({ name: metricName('sync_proxy_rules_iptables_last'), help: 'Number of iptables rules written by kube-proxy in last sync', labelNames: ['table'], registers });
  const failures = new Counter({ name: metricName('sync_proxy_rules_iptables_restore_failures_total'), help: 'Cumulative proxy iptables restore failures', registers });
  const partialFailures = new Counter({
    name: metricName('sync_proxy_rules_iptables_partial_restore_failures_total'),
    help: 'Cumulative proxy iptables partial restore failures',
    registers,
  });
  failures.inc(0);
  partialFailures.inc(0);
  return (sync: LastSync) => {
    if (sync.cause instanceof RestoreError) {
      failures.inc();
      if (!sync.full) partialFailures.inc();
    }
    const detail = sync.result?.detail;
    if (detail?.mode !== 'iptables') return;
    for (const table of TABLES) {
      total.set({ table }, detail.rules[table]);
      last.set({ table }, detail.written[table]);
    }
  };
}
