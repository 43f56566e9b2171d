/**
 * nftables mode's Prometheus metrics, under kube-proxy's names and help
 * texts (pkg/proxy/metrics/metrics.go, registered in nftables mode only):
 * - `kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family}`:
 *   syncs whose kernel work failed in that family (reading the table back
 *   or the transaction; the proxier then retries with a full sync);
 * - `kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total{ip_family}`:
 *   clean-ups after a sync, in a transaction of their own, that failed
 *   (kube-proxy's is the deletion of stale chains; drover's, of stale
 *   affinity entries: NftablesSyncDetail.cleanupFailed).
 * Both start at 0 for IPv4, and for IPv6 once a sync covered it.
 */
import { Counter, type Registry } from 'prom-client';
import type { LastSync } from '../../proxier/proxier.ts';
import { IP_FAMILY_LABEL, metricName, syncFamilies, zeroForFamilies, type ModeMetricsListener } from '../../server/metrics.ts';
import { resultsByFamily } from '../shared/dual-stack.ts';
import { isNftablesDetail } from './sync-detail.ts';

/** Register nftables mode's metrics in `registry`; returns the listener that updates them after every sync attempt. */
export function nftablesMetrics(registry: Registry): ModeMetricsListener {
  const registers = [registry];
  const labelNames = [IP_FAMILY_LABEL];
  const syncFailures = new Counter({ name: metricName('sync_proxy_rules_nftables_sync_failures_total'), help: 'Cumulative proxy nftables sync failures', labelNames, registers });
  const cleanupFailures = new Counter({ name: metricName('sync_proxy_rules_nftables_cleanup_failures_total'), help: 'Cumulative proxy nftables cleanup failures', labelNames, registers });
  const know = zeroForFamilies(syncFailures, cleanupFailures);
  return (sync: LastSync) => {
    for (const family of syncFamilies(sync)) know(family);
    if (sync.error !== undefined) {
      for (const family of syncFamilies(sync)) syncFailures.inc({ ip_family: family });
      return;
    }
    for (const [family, result] of sync.result ? resultsByFamily(sync.result) : []) {
      if (isNftablesDetail(result.detail) && result.detail.cleanupFailed) cleanupFailures.inc({ ip_family: family });
    }
  };
}
