/**
 * The node DNS measured (docs/dns.md#measured), in network namespaces of
 * its own (removed at the end, also on failure):
 *
 *   tsx scripts/dns-bench.ts [--services 1000] [--updates 10] [--seconds 10] [--cpu 0] [--client-cpu LIST] [--rate 5000] [--churn MS] [--server-only [--full] [--cpu-prof DIR]]
 *   tsx scripts/dns-bench.ts --peers [--servers drover,coredns,coredns-cache] [--services 1000] [--updates 10] [--seconds 10] [--cpu 0] [--client-cpu LIST] [--rate 5000]
 *
 * `drover run --dns-address 169.254.20.10` (iptables mode, pinned to CPU
 * `--cpu` with taskset) serves `--services` Services from a folder of
 * manifests in the node namespace of a testbed. Then:
 *
 * 1. name-update latency, `--updates` times: a poller in the client
 *    namespace asks for a new Service's name every millisecond; a Service
 *    file is renamed into the folder; the times from that rename, and from
 *    the end of the partial sync that programmed it (drover's log), to the
 *    first answer with its ClusterIP;
 * 2. `dnsperf` from the client namespace for `--seconds` over every
 *    Service's name (UDP, 4 clients, 200 queries outstanding), twice: as
 *    fast as drover answers (answers per second), and paced at `--rate`
 *    queries per second (latency below saturation); the latency percentiles
 *    come from its per-query lines (`-v`), and the server's CPU time per
 *    answer from its /proc/PID/stat before and after each run (user and
 *    system, 10 ms ticks).
 *
 * `--churn MS`: a third run, paced at `--rate`, while a new Service file
 * is renamed into the folder every MS milliseconds, each a partial sync in
 * drover's one thread: what syncs add to the answers' latency (the syncs
 * done during the run and the longest, from drover's log, are printed).
 *
 * `--server-only`: instead of drover, the DNS server alone
 * (scripts/dns-serve.ts: the same number of names, no proxier or sync loop,
 * pinned the same way) on the same address, put on the node namespace's
 * `lo`; only step 2 is run. `--full`: that server without its cache of
 * encoded zone answers. `--cpu-prof DIR`: that server under
 * `node --cpu-prof`, its profile written to DIR when it exits.
 *
 * `--peers`: drover and CoreDNS side by side, each fed by the real API
 * server (scripts/dns-bench/peers.ts, which says what it measures; needs
 * scripts/peers/build.sh and scripts/peers/build.sh --coredns built);
 * `--servers` picks which of them, in that order.
 *
 * Pinning: the server runs on `--cpu` (taskset); dnsperf, the poller and
 * this process itself (`taskset -a -p`) on `--client-cpu`, by default every
 * online CPU but `--cpu`, so that the load generator never takes the
 * server's core.
 *
 * Prints a Markdown table. Needs root, dnsperf, taskset and iproute2.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createTopology, type Topology } from '../src/testbed/topology.ts';
import { clientCpus } from './dns-bench/cpus.ts';
import { dnsperf, dnsperfHeader, dnsperfRow, firstAnswer, ms, pct, pinSelf, writePoller, type Client } from './dns-bench/measure.ts';
import { PEER_SERVERS, runPeers, type PeerServer } from './dns-bench/peers.ts';

const ROOT = join(fileURLToPath(import.meta.url), '..', '..');
const DNS = '169.254.20.10';
const { values } = parseArgs({
  options: {
    services: { type: 'string', default: '1000' },
    updates: { type: 'string', default: '10' },
    seconds: { type: 'string', default: '10' },
    cpu: { type: 'string', default: '0' },
    'client-cpu': { type: 'string' },
    rate: { type: 'string', default: '5000' },
    'server-only': { type: 'boolean', default: false },
    full: { type: 'boolean', default: false },
    'cpu-prof': { type: 'string' },
    churn: { type: 'string' },
    peers: { type: 'boolean', default: false },
    servers: { type: 'string', default: 'drover,coredns,coredns-cache' },
  },
});
const SERVICES = Number(values.services);
const UPDATES = Number(values.updates);
const SECONDS = Number(values.seconds);
const CLIENT_CPUS = values['client-cpu'] ?? clientCpus(await readFile('/sys/devices/system/cpu/online', 'utf8'), values.cpu!);

/** The manifest of Service bench/svc-I with ClusterIP 10.96.X.Y and one endpoint. */
function manifest(i: number): string {
  const svc = { apiVersion: 'v1', kind: 'Service', metadata: { name: `svc-${i}`, namespace: 'bench' }, spec: { clusterIP: clusterIP(i), ports: [{ name: 'http', port: 80, targetPort: 8080 }] } };
  const slice = {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `svc-${i}-1`, namespace: 'bench', labels: { 'kubernetes.io/service-name': `svc-${i}` } },
    addressType: 'IPv4',
    endpoints: [{ addresses: ['10.244.1.2'], conditions: { ready: true } }],
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  };
  return `${JSON.stringify(svc)}\n---\n${JSON.stringify(slice)}\n`;
}

/** The ClusterIP of Service i (see {@link manifest}). */
function clusterIP(i: number): string {
  return `10.96.${100 + Math.floor(i / 250)}.${(i % 250) + 1}`;
}

/** The file-source bench (and `--server-only`): see the module comment. */
async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-dns-bench-'));
  const source = join(dir, 'manifests');
  let topo: Topology | undefined;
  let drover: ReturnType<typeof spawn> | undefined;
  try {
    topo = await createTopology({ backends: [{ name: 'web-1', ip: '10.244.1.2', ports: [8080] }] });
    await mkdir(source);
    for (let i = 0; i < SERVICES; i++) await writeFile(join(source, `svc-${i}.json`), manifest(i));
    const client: Client = { netns: topo.client().netns, cpus: CLIENT_CPUS, dir, server: DNS };
    await writePoller(client);
    const logs: Array<{ time: string; msg: string; changed?: string[] }> = [];
    if (values['server-only']) {
      await topo.exec(topo.node, 'ip', ['addr', 'add', `${DNS}/32`, 'dev', 'lo']);
      drover = spawn('ip', ['netns', 'exec', topo.node, 'taskset', '-c', values.cpu!, process.execPath, ...(values['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', values['cpu-prof']] : []), '--import', 'tsx', join(ROOT, 'scripts/dns-serve.ts'), '--address', DNS, '--services', String(SERVICES), ...(values.full ? ['--full'] : [])], {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let ready!: () => void;
      const listening = new Promise<void>((r) => (ready = r));
      drover.stdout!.on('data', (b: Buffer) => b.toString().includes('READY') && ready());
      await Promise.race([listening, new Promise((_, reject) => setTimeout(() => reject(new Error('the DNS server did not listen within 60 s')), 60_000))]);
    }
    if (!values['server-only']) {
      drover = spawn(
        'ip',
        ['netns', 'exec', topo.node, 'taskset', '-c', values.cpu!, process.execPath, join(ROOT, 'bin/drover.js'), 'run', '--source', source, '--cluster-cidr', '10.244.0.0/16',
          '--dns-address', DNS, '--dns-upstream', '127.0.0.1:9', '--min-sync-period', '0s', '--status-file', join(dir, 'status.json'), '--state-dir', join(dir, 'state'),
          '--metrics-bind-address', '', '--healthz-bind-address', ''],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let buffered = '';
      drover.stderr!.on('data', (b: Buffer) => {
        buffered += b.toString();
        let nl;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          try {
            logs.push(JSON.parse(line) as (typeof logs)[number]);
          } catch {
            process.stderr.write(`${line}\n`);
          }
        }
      });
      const deadline = Date.now() + 120_000;
      while (!logs.some((l) => l.msg === 'full sync done')) {
        if (Date.now() > deadline) throw new Error('drover did not sync within 2 minutes');
        await new Promise((r) => setTimeout(r, 200));
      }
    }

    // 1. Name-update latency.
    const fromSource: number[] = [];
    const fromSync: number[] = [];
    for (let u = 0; u < (values['server-only'] ? 0 : UPDATES); u++) {
      const i = SERVICES + u;
      const name = `svc-${i}.bench.svc.cluster.local`;
      let t0 = 0;
      const answered = await firstAnswer(client, name, clusterIP(i), async () => {
        await writeFile(join(dir, `svc-${i}.json.tmp`), manifest(i));
        t0 = performance.timeOrigin + performance.now();
        await rename(join(dir, `svc-${i}.json.tmp`), join(source, `svc-${i}.json`));
      });
      if (answered === undefined) throw new Error(`${name} was not answered within 30 s`);
      const sync = logs.find((l) => l.msg === 'partial sync done' && l.changed?.includes(`bench/svc-${i}:http`));
      fromSource.push(answered - t0);
      if (sync) fromSync.push(answered - Date.parse(sync.time));
      await new Promise((r) => setTimeout(r, 200));
    }
    fromSource.sort((a, b) => a - b);
    fromSync.sort((a, b) => a - b);

    // 2. dnsperf.
    const queries = join(dir, 'queries.txt');
    await writeFile(queries, Array.from({ length: SERVICES }, (_, i) => `svc-${i}.bench.svc.cluster.local A\n`).join(''));
    const flat = await dnsperf(client, queries, SECONDS, drover!.pid!);
    const paced = await dnsperf(client, queries, SECONDS, drover!.pid!, ['-Q', values.rate!]);
    // 3. The same paced load while Services are added.
    let churned: typeof paced | undefined;
    const syncsBefore = logs.length;
    if (values.churn !== undefined && !values['server-only']) {
      let next = SERVICES + UPDATES;
      const adding = setInterval(() => {
        const i = next++;
        void writeFile(join(dir, `svc-${i}.json.tmp`), manifest(i)).then(() => rename(join(dir, `svc-${i}.json.tmp`), join(source, `svc-${i}.json`)));
      }, Number(values.churn));
      churned = await dnsperf(client, queries, SECONDS, drover!.pid!, ['-Q', values.rate!]).finally(() => clearInterval(adding));
    }
    const syncs = logs.slice(syncsBefore).filter((l) => l.msg === 'partial sync done') as Array<{ durationMs?: number }>;
    process.stdout.write(
      [
        ...(values['server-only']
          ? [`the DNS server alone${values.full ? ', without its answer cache' : ''} (${SERVICES} Services, on CPU ${values.cpu}, clients on CPU ${CLIENT_CPUS})`]
          : [
              `| measure (${SERVICES} Services, drover on CPU ${values.cpu}, clients on CPU ${CLIENT_CPUS}) | p50 | p90 | max |`,
              '|---|---|---|---|',
              `| name-update: file renamed → first answer (${fromSource.length} updates) | ${ms(pct(fromSource, 50))} | ${ms(pct(fromSource, 90))} | ${ms(fromSource.at(-1)!)} |`,
              `| name-update: partial sync done (log) → first answer | ${ms(pct(fromSync, 50))} | ${ms(pct(fromSync, 90))} | ${ms(fromSync.at(-1)!)} |`,
            ]),
        '',
        ...dnsperfHeader(`dnsperf, cluster names (A), UDP, ${SECONDS} s, 4 clients, 200 outstanding`),
        dnsperfRow('as fast as it answers', flat),
        dnsperfRow(`paced at ${values.rate} queries/s`, paced),
        ...(churned ? [dnsperfRow(`paced at ${values.rate} queries/s, a Service added every ${values.churn} ms (${syncs.length} partial syncs, the longest ${Math.max(0, ...syncs.map((l) => l.durationMs ?? 0))} ms)`, churned)] : []),
        '',
      ].join('\n'),
    );
  } finally {
    if (drover?.pid !== undefined) drover.kill('SIGTERM');
    await topo?.destroy();
    await rm(dir, { recursive: true, force: true });
  }
}

await pinSelf(CLIENT_CPUS);
if (values.peers) {
  const servers = values.servers!.split(',');
  const unknown = servers.filter((s) => !(PEER_SERVERS as readonly string[]).includes(s));
  if (unknown.length > 0) throw new Error(`--servers ${values.servers}: unknown ${unknown.join(', ')} (use ${PEER_SERVERS.join(', ')})`);
  process.stdout.write(await runPeers({ servers: servers as PeerServer[], services: SERVICES, updates: UPDATES, seconds: SECONDS, cpu: values.cpu!, clientCpus: CLIENT_CPUS, rate: Number(values.rate), address: DNS, log: (l) => process.stderr.write(`${l}\n`) }));
} else {
  await main();
}
