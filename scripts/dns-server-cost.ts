/**
 * What one cluster-zone answer costs the node DNS server, in this process,
 * without the network, the proxier or its sync loop (docs/dns.md#measured):
 *
 *   tsx scripts/dns-server-cost.ts [--services 1000] [--queries 200000] [--rounds 3] [--udp] [--full]
 *   node --import tsx --cpu-prof --cpu-prof-dir /tmp/prof scripts/dns-server-cost.ts   # where the time goes
 *
 * A zone of `--services` synthetic ClusterIP Services (src/bench/synth.ts)
 * behind a `DnsServer` that never listens; `--queries` query messages, made
 * as `dnsperf` makes them (recursion desired, no EDNS, the ID counting up)
 * for `A` of every Service's name in turn, are handed to
 * `DnsServer.handle` as UDP messages, `--rounds` times. The answer goes to a
 * function that keeps its length, or with `--udp` to a UDP socket on
 * loopback that sends it to another socket of this process, which receives
 * and discards it: one datagram sent and one received per answer, as the
 * server does for each query (the kernel drops what the receiving buffer
 * cannot hold). Prints, per round, the answers
 * per second and the mean CPU time per answer (µs, user and system), and the
 * answer bytes checked against the first round's. `--full`: the server
 * without its cache of encoded zone answers (every message decoded whole and
 * answered anew, as before the cache).
 */
import { createSocket } from 'node:dgram';
import { parseArgs } from 'node:util';
import * as dns from 'dns-packet';
import { synthSnapshot } from '../src/bench/synth.ts';
import { DnsServer } from '../src/dns/server.ts';
import { ServiceDnsView } from '../src/dns/view.ts';
import { Zone } from '../src/dns/zone.ts';

const { values } = parseArgs({ options: { services: { type: 'string', default: '1000' }, queries: { type: 'string', default: '200000' }, rounds: { type: 'string', default: '3' }, udp: { type: 'boolean', default: false }, full: { type: 'boolean', default: false } } });
const SERVICES = Number(values.services);
const QUERIES = Number(values.queries);
const ROUNDS = Number(values.rounds);

const zone = new Zone({ domain: 'cluster.local', ttl: 5 });
new ServiceDnsView(zone).apply(synthSnapshot(SERVICES, 1));
const server = new DnsServer({ address: '127.0.0.1', port: 0, zone, ...(values.full ? { zoneAnswerCache: false as const } : {}) });

const queries = Array.from({ length: QUERIES }, (_, i) =>
  dns.encode({ type: 'query', id: i & 0xffff, flags: dns.RECURSION_DESIRED, questions: [{ name: `svc-${i % SERVICES}.bench.svc.cluster.local`, type: 'A', class: 'IN' }] }),
);

let sink: (out: Buffer) => void;
let closeSockets = () => {};
if (values.udp) {
  const drain = createSocket('udp4');
  await new Promise<void>((resolve) => drain.bind({ address: '127.0.0.1', port: 0 }, resolve));
  drain.on('message', () => {});
  const sender = createSocket('udp4');
  await new Promise<void>((resolve) => sender.bind({ address: '127.0.0.1', port: 0 }, resolve));
  const port = drain.address().port;
  sink = (out) => sender.send(out, port, '127.0.0.1');
  closeSockets = () => {
    sender.close();
    drain.close();
  };
} else {
  let bytes = 0;
  sink = (out) => {
    bytes += out.length;
  };
  void bytes;
}

/** The answer to the first 1,000 queries, to check every round answers the same bytes (the ID aside). */
const firstAnswers: string[] = [];
const record = (i: number) => (out: Buffer) => {
  const hex = out.subarray(2).toString('hex');
  if (firstAnswers[i] === undefined) firstAnswers[i] = hex;
  else if (firstAnswers[i] !== hex) throw new Error(`query ${i}: the answer changed between rounds`);
};
for (let i = 0; i < Math.min(1000, QUERIES); i++) server.handle(queries[i]!, '127.0.0.1', 'udp', record(i));

for (let round = 1; round <= ROUNDS; round++) {
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < QUERIES; i++) {
    server.handle(queries[i]!, '127.0.0.1', 'udp', sink);
    // Let the UDP socket's sends complete now and then, as the event loop would between datagrams.
    if (values.udp && (i & 1023) === 1023) await new Promise((r) => setImmediate(r));
  }
  const wallNs = Number(process.hrtime.bigint() - t0);
  const cpu = process.cpuUsage(cpu0);
  process.stdout.write(
    `round ${round}: ${QUERIES} answers in ${(wallNs / 1e6).toFixed(0)} ms: ${Math.round(QUERIES / (wallNs / 1e9))} answers/s, CPU ${((cpu.user + cpu.system) / QUERIES).toFixed(2)} µs per answer (user ${(cpu.user / QUERIES).toFixed(2)}, system ${(cpu.system / QUERIES).toFixed(2)})\n`,
  );
}
for (let i = 0; i < Math.min(1000, QUERIES); i++) server.handle(queries[i]!, '127.0.0.1', 'udp', record(i));
process.stdout.write(`zone answers: ${server.stats.zone}, dropped: ${server.stats.dropped}; the first ${Math.min(1000, QUERIES)} answers identical in the first and last pass\n`);
closeSockets();
