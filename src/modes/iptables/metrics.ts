/**
 * iptables mode's Prometheus metrics, under kube-proxy's names
 * (pkg/proxy/metrics/metrics.go), each with kube-proxy 1.33's `ip_family`
 * label ("IPv4", "IPv6": iptables-restore and ip6tables-restore): rules
 * owned and written per table, and restore failures (a failed partial
 * restore is also counted as a partial failure; the proxier then retries
 * with a full sync, as kube-proxy does). The failure counters start at 0
 * for IPv4, and for IPv6 once a sync covered it. And kube-proxy's two nfacct
 * counters, read from the kernel at scrape time (nfacct-metrics.ts).
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { LastSync } from '../../proxier/proxier.ts';
import { IP_FAMILY_LABEL, metricName, zeroForFamilies, type ModeMetricsContext, type ModeMetricsListener } from '../../server/metrics.ts';
import type { Nfacct } from '../../kernel/nfacct/types.ts';
import { registerNfacctMetrics } from './nfacct-metrics.ts';
import { namespaceNfacct } from './nfacct.ts';
import { failuresByFamily, resultsByFamily } from '../shared/dual-stack.ts';
import { RestoreError } from '../../kernel/iptables/exec.ts';
import { TABLES } from '../../kernel/iptables/parse.ts';
import { isIptablesDetail } from './sync-detail.ts';

/**
 * Register iptables mode's metrics in `registry`; returns the listener that updates them after every sync attempt.
 * @param context the namespace whose nfacct counters the nfacct metrics read.
 * @param nfacct where they read them (default: that namespace's, nfacct.ts namespaceNfacct).
 */
export function iptablesMetrics(registry: Registry, context: ModeMetricsContext = {}, nfacct: Nfacct = namespaceNfacct(context.netns)): ModeMetricsListener {
  const registers = [registry];
  registerNfacctMetrics(registry, nfacct);
  const byTable = [IP_FAMILY_LABEL, 'table'];
  const total = new Gauge({ name: metricName('sync_proxy_rules_iptables_total'), help: 'Total number of iptables rules owned by kube-proxy', labelNames: byTable, registers });
  const last = new Gauge({ name: metricName('sync_proxy_rules_iptables_last'), help: 'Number of iptables rules written by kube-proxy in last sync', labelNames: byTable, registers });
  const failures = new Counter({ name: metricName('sync_proxy_rules_iptables_restore_failures_total'), help: 'Cumulative proxy iptables restore failures', labelNames: [IP_FAMILY_LABEL], registers });
  const partialFailures = new Counter({
    name: metricName('sync_proxy_rules_iptables_partial_restore_failures_total'),
    help: 'Cumulative proxy iptables partial restore failures',
    labelNames: [IP_FAMILY_LABEL],
    registers,
  });
  const know = zeroForFamilies(failures, partialFailures);
  return (sync: LastSync) => {
    if (sync.error !== undefined) {
      // A dual-stack sync names each family that failed, with its own error.
      for (const { family, error } of failuresByFamily(sync.cause)) {
        if (!(error instanceof RestoreError)) continue;
        know(family);
        failures.inc({ ip_family: family });
        if (!sync.full) partialFailures.inc({ ip_family: family });
      }
      return;
    }
    for (const [family, result] of sync.result ? resultsByFamily(sync.result) : []) {
      know(family);
      const detail = result.detail;
      if (!isIptablesDetail(detail)) continue;
      for (const table of TABLES) {
        total.set({ ip_family: family, table }, detail.rules[table]);
        last.set({ ip_family: family, table }, detail.written[table]);
      }
    }
  };
}
