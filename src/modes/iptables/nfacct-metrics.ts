/**
 * kube-proxy's two nfacct metrics of iptables mode (pkg/proxy/metrics/metrics.go,
 * its nfacct collector): counters without labels, read from the kernel at
 * each scrape, as kube-proxy's collector reads them:
 *
 * - `kubeproxy_iptables_ct_state_invalid_dropped_packets_total`, "packets
 *   dropped by iptables to work around conntrack problems": the packets of
 *   counter ct_state_invalid_dropped_pkts;
 * - `kubeproxy_iptables_localhost_nodeports_accepted_packets_total`, "Number
 *   of packets accepted on nodeports of loopback interface": the packets of
 *   localhost_nps_accepted_pkts.
 *
 * A counter the kernel does not hold (nfacct unavailable, or the counter
 * could not be created: nfacct.ts) gives no sample, as kube-proxy's
 * collector emits none; prom-client still prints the HELP and TYPE lines.
 * One scrape reads both with one list (with `--netns`, one helper process,
 * kernel/nfacct/netns.ts).
 */
import type { Registry } from 'prom-client';
import type { Nfacct, NfacctCounter } from '../../kernel/nfacct/types.ts';
import { metricName } from '../../server/metrics.ts';
import { CT_STATE_INVALID_DROPPED, LOCALHOST_NODEPORTS_ACCEPTED, type KubeProxyCounter } from './nfacct-names.ts';

/** The metrics: name (without `kubeproxy_`), help, and the counter they read. */
export const NFACCT_METRICS: ReadonlyArray<{ readonly name: string; readonly help: string; readonly counter: KubeProxyCounter }> = [
  { name: 'iptables_ct_state_invalid_dropped_packets_total', help: 'packets dropped by iptables to work around conntrack problems', counter: CT_STATE_INVALID_DROPPED },
  { name: 'iptables_localhost_nodeports_accepted_packets_total', help: 'Number of packets accepted on nodeports of loopback interface', counter: LOCALHOST_NODEPORTS_ACCEPTED },
];

/** How long one read of the counters serves the metrics of a scrape, ms. */
const READ_REUSE_MS = 1000;

/**
 * Register the metrics in `registry`, reading `nfacct` at scrape time. A
 * failed read gives no sample and is told to `onError` once per scrape.
 */
export function registerNfacctMetrics(registry: Registry, nfacct: Nfacct, onError: (err: Error) => void = () => undefined): void {
  let last: { at: number; read: Promise<Map<string, NfacctCounter> | undefined> } | undefined;
  const read = (): Promise<Map<string, NfacctCounter> | undefined> => {
    const now = Date.now();
    if (last === undefined || now - last.at > READ_REUSE_MS) {
      last = {
        at: now,
        read: nfacct.list().then(
          (all) => new Map(all.map((c) => [c.name, c])),
          (err: Error) => {
            onError(err);
            return undefined;
          },
        ),
      };
    }
    return last.read;
  };
  for (const m of NFACCT_METRICS) {
    const name = metricName(m.name);
    const metric = {
      name,
      help: m.help,
      type: 'counter' as const,
      aggregator: 'sum' as const,
      async get() {
        const c = (await read())?.get(m.counter);
        return { name, help: m.help, type: 'counter' as const, aggregator: 'sum' as const, values: c === undefined ? [] : [{ value: c.packets, labels: {} }] };
      },
      reset: () => undefined,
    };
    registry.registerMetric(metric as unknown as Parameters<Registry['registerMetric']>[0]);
  }
}
