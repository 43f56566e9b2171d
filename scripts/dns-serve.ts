/**
 * The node DNS server alone, for `scripts/dns-bench.ts --server-only`: a
 * zone of `--services` synthetic ClusterIP Services (src/bench/synth.ts,
 * names `svc-<i>.bench.svc.cluster.local`) served by a `DnsServer` on
 * `--address` port 53, UDP and TCP, with no proxier, source or sync loop in
 * the process; questions outside the zone are refused. Prints `READY` when
 * it listens; runs until killed, and exits normally on SIGTERM (so that
 * `node --cpu-prof` writes its profile).
 *
 *   tsx scripts/dns-serve.ts --address 169.254.20.10 [--services 1000] [--full]
 *
 * `--full`: without the cache of encoded zone answers.
 */
import { parseArgs } from 'node:util';
import { synthSnapshot } from '../src/bench/synth.ts';
import { DnsServer } from '../src/dns/server.ts';
import { ServiceDnsView } from '../src/dns/view.ts';
import { Zone } from '../src/dns/zone.ts';

const { values } = parseArgs({ options: { address: { type: 'string' }, services: { type: 'string', default: '1000' }, full: { type: 'boolean', default: false } } });
if (values.address === undefined) throw new Error('--address is required');
const zone = new Zone({ domain: 'cluster.local', ttl: 5 });
new ServiceDnsView(zone).apply(synthSnapshot(Number(values.services), 1));
const server = new DnsServer({ address: values.address, port: 53, zone, ...(values.full ? { zoneAnswerCache: false as const } : {}) });
await server.listen();
process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
process.stdout.write('READY\n');
