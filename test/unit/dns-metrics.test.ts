import test from 'ava';
import { Registry } from 'prom-client';
import { registerDnsMetrics } from '../../src/dns/metrics.ts';
import type { DnsStats } from '../../src/dns/server.ts';
import { dnsLine } from '../../src/inspect/status.ts';

test('the DNS metrics read the server counters at each scrape', async (t) => {
  const registry = new Registry();
  const stats: DnsStats = { queries: 3, answers: { NOERROR: 2 }, zone: 2, cacheHits: 0, forwardFailures: 1, dropped: 0 };
  registerDnsMetrics(registry, stats);
  stats.queries = 5;
  stats.answers.NXDOMAIN = 1;
  stats.cacheHits = 4;
  const text = await registry.metrics();
  const samples = text.split('\n').filter((l) => l.startsWith('drover_dns_')).sort();
  t.deepEqual(samples, [
    'drover_dns_cache_hits_total 4',
    'drover_dns_dropped_total 0',
    'drover_dns_forward_failures_total 1',
    'drover_dns_requests_total 5',
    'drover_dns_responses_total{rcode="NOERROR"} 2',
    'drover_dns_responses_total{rcode="NXDOMAIN"} 1',
    'drover_dns_zone_responses_total 2',
  ]);
});

test('the dns line of drover status', (t) => {
  const at = Date.parse('2026-12-07T12:00:00Z');
  t.is(
    dnsLine({ at: '2026-12-07T12:00:00.000Z', address: '169.254.20.10', port: 53, zone: 'cluster.local', queries: 120, answers: { NXDOMAIN: 20, NOERROR: 100 }, zoneAnswers: 110, cacheHits: 3, forwardFailures: 0, dropped: 1 }, at + 5000),
    '169.254.20.10:53, zone cluster.local: 120 queries; answers NOERROR 100, NXDOMAIN 20; 110 from the zone, 3 cache hits, 0 forward failures, 1 dropped (5 s ago)',
  );
});
