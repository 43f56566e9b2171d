/**
 * The node DNS server's Prometheus metrics, read from its counters
 * (server.ts DnsStats) at each scrape, under drover's own names (kube-proxy
 * has none for DNS; the names follow CoreDNS's `coredns_dns_*` where one
 * exists):
 * - `drover_dns_requests_total`: messages that decoded as queries;
 * - `drover_dns_responses_total{rcode}`: answers sent, by rcode;
 * - `drover_dns_zone_responses_total`: questions answered from the cluster zone;
 * - `drover_dns_cache_hits_total`: forwarded questions answered from the cache;
 * - `drover_dns_forward_failures_total`: forwarded questions no upstream answered (SERVFAIL);
 * - `drover_dns_dropped_total`: messages dropped (malformed, or over a client's forwarding share).
 */
import { Counter, type Registry } from 'prom-client';
import type { DnsStats } from './server.ts';

/** Set a counter to `value`, the server's own count (which only goes up). */
function setTo(counter: Counter, value: number): void {
  counter.reset();
  counter.inc(value);
}

/** Register the DNS metrics in `registry`, read from `stats` at each scrape. */
export function registerDnsMetrics(registry: Registry, stats: DnsStats): void {
  const plain: Array<[string, string, () => number]> = [
    ['drover_dns_requests_total', 'DNS messages received that decoded as queries', () => stats.queries],
    ['drover_dns_zone_responses_total', 'DNS questions answered from the cluster zone', () => stats.zone],
    ['drover_dns_cache_hits_total', 'forwarded DNS questions answered from the cache', () => stats.cacheHits],
    ['drover_dns_forward_failures_total', 'forwarded DNS questions no upstream answered (answered SERVFAIL)', () => stats.forwardFailures],
    ['drover_dns_dropped_total', "DNS messages dropped: malformed, or over a client's share of forwarded questions", () => stats.dropped],
  ];
  for (const [name, help, read] of plain) {
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        setTo(this, read());
      },
    });
  }
  new Counter({
    name: 'drover_dns_responses_total',
    help: 'DNS answers sent, by rcode',
    labelNames: ['rcode'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [rcode, n] of Object.entries(stats.answers)) this.inc({ rcode }, n);
    },
  });
}
