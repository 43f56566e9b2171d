/**
 * The real kube-proxy beside drover, fed by one real API server (root; the
 * peers built by scripts/peers/build.sh):
 *
 *   tsx scripts/peers/bench.ts [--services 1000,10000] [--endpoints 10] [--changes 5]
 *       [--churn-rate 50] [--churn-seconds 30] [--proxies all|LABEL,…] [--out DIR] [--logs DIR] [--gap-ms 1000]
 *
 * Runs each proxy in turn (bench/run.ts says what is measured), prints the
 * tables and writes them, with results.json and the charts, to DIR
 * (default docs/bench/peers) after each proxy; --logs keeps each proxy's
 * log there; --gap-ms is the quiet time after each single change.
 * `--report-from DIR/results.json[,…] --out DIR` writes the report again
 * from one or more runs' results. --proxies runs them in the order given. LABELs: kube-proxy-iptables,
 * kube-proxy-iptables-min0, drover-iptables, kube-proxy-nftables,
 * kube-proxy-nftables-min0, drover-nftables (and -min0 of each drover: a
 * minimum sync period of 0); any of them with -minN instead runs it with a
 * minimum sync period of N ms (drover-nftables-min50). SIGINT or SIGTERM ends the run at its next
 * step: everything is removed, the report keeps the proxies measured
 * before.
 */
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { locatePeers } from '../../test/cluster/support/peers.ts';
import { writePeerReport, type PeerRunMeta } from './bench/report.ts';
import { ALL_PROXIES, parseProxyLabel, proxyLabel, runPeerBench, type ProxyResult } from './bench/run.ts';

const { values } = parseArgs({
  options: {
    services: { type: 'string', default: '1000' },
    endpoints: { type: 'string', default: '10' },
    changes: { type: 'string', default: '5' },
    'churn-rate': { type: 'string', default: '50' },
    'churn-seconds': { type: 'string', default: '30' },
    proxies: { type: 'string', default: 'all' },
    out: { type: 'string', default: 'docs/bench/peers' },
    logs: { type: 'string' },
    'gap-ms': { type: 'string', default: '1000' },
    'report-from': { type: 'string' },
  },
});

/** A whole number ≥ min from option `name`. */
function whole(name: string, text: string, min: number): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min) throw new Error(`scripts/peers/bench.ts: --${name} ${JSON.stringify(text)} is not a whole number ≥ ${min}`);
  return n;
}

if (values['report-from'] !== undefined) {
  // Only the report, again, from a run's results.json (e.g. after the report's code changed).
  // Several runs' results.json (comma-separated) make one report, under the first run's description.
  const runs = await Promise.all(values['report-from'].split(',').map(async (f) => JSON.parse(await readFile(f, 'utf8')) as { meta: PeerRunMeta; results: ProxyResult[] }));
  const meta = runs[0]!.meta;
  const command = runs.map((r) => r.meta.command).join('`, then `');
  console.log(await writePeerReport(values.out, { ...meta, command, gapMs: meta.gapMs ?? 1000 }, runs.flatMap((r) => r.results)));
  process.exit(0);
}

const services = values.services.split(',').map((s) => whole('services', s, 20));
const labels = values.proxies === 'all' ? ALL_PROXIES.map(proxyLabel) : values.proxies.split(',');
const unknown = labels.filter((l) => parseProxyLabel(l) === undefined);
if (unknown.length > 0) throw new Error(`scripts/peers/bench.ts: --proxies: unknown ${unknown.join(', ')}; known: ${ALL_PROXIES.map(proxyLabel).join(', ')}, or -minN for another minimum sync period of N ms`);
const peers = locatePeers();
if (peers === undefined) {
  console.error('the real peers are not built: run scripts/peers/build.sh');
  process.exit(1);
}
const opts = {
  services: [...services].sort((a, b) => a - b),
  endpoints: whole('endpoints', values.endpoints, 1),
  changes: whole('changes', values.changes, 1),
  churnRate: whole('churn-rate', values['churn-rate'], 0),
  churnSeconds: whole('churn-seconds', values['churn-seconds'], 0),
  gapMs: whole('gap-ms', values['gap-ms'], 0),
};
const done: ProxyResult[] = [];
// The testbed removes its namespaces at once on these signals; the run then ends at its next step and removes the rest.
const abort = new AbortController();
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    console.error(`${sig}: stopping`);
    abort.abort(new Error(`stopped by ${sig}`));
  });
}
const started = new Date();
await runPeerBench({
  ...opts,
  peers,
  ...(values.logs ? { logsDir: values.logs } : {}),
  signal: abort.signal,
  // In the order asked for.
  proxies: labels.map((l) => parseProxyLabel(l)!),
  log: (l) => console.error(`${new Date().toISOString().slice(11, 19)} ${l}`),
  onResult: async (r) => {
    done.push(r);
    await writePeerReport(values.out, { ...opts, started: started.toISOString(), command: process.argv.slice(2).join(' ') }, done);
  },
});
console.log(await writePeerReport(values.out, { ...opts, started: started.toISOString(), command: process.argv.slice(2).join(' ') }, done));
