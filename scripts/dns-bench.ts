/**
 * The node DNS measured (docs/dns.md#measured), in network namespaces of
 * its own (removed at the end, also on failure):
 *
 *   tsx scripts/dns-bench.ts [--services 1000] [--updates 10] [--seconds 10] [--cpu 0] [--rate 5000] [--churn MS] [--server-only [--full] [--cpu-prof DIR]]
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
 * Prints a Markdown table. Needs root, dnsperf and iproute2.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createTopology, type Topology } from '../src/testbed/topology.ts';

const ROOT = join(fileURLToPath(import.meta.url), '..', '..');
const DNS = '169.254.20.10';
const { values } = parseArgs({ options: { services: { type: 'string', default: '1000' }, updates: { type: 'string', default: '10' }, seconds: { type: 'string', default: '10' }, cpu: { type: 'string', default: '0' }, rate: { type: 'string', default: '5000' }, 'server-only': { type: 'boolean', default: false }, full: { type: 'boolean', default: false }, 'cpu-prof': { type: 'string' }, churn: { type: 'string' } } });
const SERVICES = Number(values.services);
const UPDATES = Number(values.updates);
const SECONDS = Number(values.seconds);

/** The manifest of Service bench/svc-I with ClusterIP 10.96.X.Y and one endpoint. */
function manifest(i: number): string {
  const ip = `10.96.${100 + Math.floor(i / 250)}.${(i % 250) + 1}`;
  const svc = { apiVersion: 'v1', kind: 'Service', metadata: { name: `svc-${i}`, namespace: 'bench' }, spec: { clusterIP: ip, ports: [{ name: 'http', port: 80, targetPort: 8080 }] } };
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
const clusterIP = (i: number) => `10.96.${100 + Math.floor(i / 250)}.${(i % 250) + 1}`;

/** Percentile `p` (0-100) of sorted `xs`. */
const pct = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]!;

/** The poller run in the client namespace: asks NAME every ms until the answer holds IP, prints READY first and then the epoch ms of the answer. */
const POLLER = `
import { createSocket } from 'node:dgram';
import { createRequire } from 'node:module';
const dns = createRequire(${JSON.stringify(join(ROOT, 'package.json'))})('dns-packet');
const [name, ip, server] = process.argv.slice(2);
const sock = createSocket('udp4');
let id = 0;
sock.on('message', (m) => {
  const p = dns.decode(m);
  if ((p.answers || []).some((a) => a.data === ip)) {
    process.stdout.write(String(performance.timeOrigin + performance.now()) + '\\n');
    process.exit(0);
  }
});
sock.bind(0, () => {
  process.stdout.write('READY\\n');
  setInterval(() => sock.send(dns.encode({ type: 'query', id: (id = (id + 1) & 0xffff), questions: [{ type: 'A', name }] }), 53, server), 1);
});
`;

/** CPU time process `pid` has used so far, user and system, ms (proc(5): /proc/PID/stat, fields 14 and 15, in clock ticks of 10 ms). */
async function cpuMs(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** Run `cmd` in `netns`, resolving with its stdout, calling `onLine` for each stdout line. */
function inNetns(netns: string, cmd: string[], onLine?: (line: string) => void): { done: Promise<string>; kill: () => void } {
  const child = spawn('ip', ['netns', 'exec', netns, ...cmd], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  let pending = '';
  child.stdout.on('data', (b: Buffer) => {
    out += b.toString();
    pending += b.toString();
    let nl;
    while ((nl = pending.indexOf('\n')) >= 0) {
      onLine?.(pending.slice(0, nl));
      pending = pending.slice(nl + 1);
    }
  });
  return { done: new Promise((resolve) => child.on('close', () => resolve(out))), kill: () => child.kill('SIGKILL') };
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-dns-bench-'));
  const source = join(dir, 'manifests');
  let topo: Topology | undefined;
  let drover: ReturnType<typeof spawn> | undefined;
  try {
    topo = await createTopology({ backends: [{ name: 'web-1', ip: '10.244.1.2', ports: [8080] }] });
    await (await import('node:fs/promises')).mkdir(source);
    for (let i = 0; i < SERVICES; i++) await writeFile(join(source, `svc-${i}.json`), manifest(i));
    await writeFile(join(dir, 'poller.mjs'), POLLER);
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
    const client = topo.client().netns;

    // 1. Name-update latency.
    const fromSource: number[] = [];
    const fromSync: number[] = [];
    for (let u = 0; u < (values['server-only'] ? 0 : UPDATES); u++) {
      const i = SERVICES + u;
      const name = `svc-${i}.bench.svc.cluster.local`;
      let ready!: () => void;
      const isReady = new Promise<void>((r) => (ready = r));
      const poller = inNetns(client, [process.execPath, join(dir, 'poller.mjs'), name, clusterIP(i), DNS], (line) => line === 'READY' && ready());
      await isReady;
      await writeFile(join(dir, `svc-${i}.json.tmp`), manifest(i));
      const t0 = performance.timeOrigin + performance.now();
      await rename(join(dir, `svc-${i}.json.tmp`), join(source, `svc-${i}.json`));
      const out = await Promise.race([poller.done, new Promise<string>((r) => setTimeout(() => r(''), 30_000))]);
      poller.kill();
      const answered = Number(out.trim().split('\n').pop());
      if (!Number.isFinite(answered)) throw new Error(`${name} was not answered within 30 s`);
      const sync = logs.find((l) => l.msg === 'partial sync done' && l.changed?.includes(`bench/svc-${i}:http`));
      fromSource.push(answered - t0);
      if (sync) fromSync.push(answered - Date.parse(sync.time));
      await new Promise((r) => setTimeout(r, 200));
    }
    fromSource.sort((a, b) => a - b);
    fromSync.sort((a, b) => a - b);

    // 2. dnsperf.
    await writeFile(join(dir, 'queries.txt'), Array.from({ length: SERVICES }, (_, i) => `svc-${i}.bench.svc.cluster.local A\n`).join(''));
    /** One dnsperf run: answers per second, completed, lost, the server's CPU time per answer (µs), and the sorted latencies (ms) of the NOERROR answers. */
    const dnsperf = async (extra: string[]) => {
      const cpu0 = await cpuMs(drover!.pid!);
      const perf = await inNetns(client, ['dnsperf', '-s', DNS, '-d', join(dir, 'queries.txt'), '-l', String(SECONDS), '-c', '4', '-q', '200', '-v', ...extra]).done;
      const cpu = (await cpuMs(drover!.pid!)) - cpu0;
      return {
        cpuPerAnswer: (cpu * 1000) / Number(/Queries completed:\s+(\d+)/.exec(perf)?.[1]),
        qps: Number(/Queries per second:\s+([\d.]+)/.exec(perf)?.[1]),
        completed: /Queries completed:\s+(\d+)/.exec(perf)?.[1],
        lost: /Queries lost:\s+(\d+)/.exec(perf)?.[1],
        latencies: [...perf.matchAll(/^> NOERROR \S+ A ([\d.]+)$/gm)].map((m) => Number(m[1]) * 1000).sort((a, b) => a - b),
      };
    };
    const flat = await dnsperf([]);
    const paced = await dnsperf(['-Q', values.rate!]);
    // 3. The same paced load while Services are added.
    let churned: typeof paced | undefined;
    const syncsBefore = logs.length;
    if (values.churn !== undefined && !values['server-only']) {
      let next = SERVICES + UPDATES;
      const adding = setInterval(() => {
        const i = next++;
        void writeFile(join(dir, `svc-${i}.json.tmp`), manifest(i)).then(() => rename(join(dir, `svc-${i}.json.tmp`), join(source, `svc-${i}.json`)));
      }, Number(values.churn));
      churned = await dnsperf(['-Q', values.rate!]).finally(() => clearInterval(adding));
    }
    const syncs = logs.slice(syncsBefore).filter((l) => l.msg === 'partial sync done') as Array<{ durationMs?: number }>;
    const ms = (x: number) => `${x.toFixed(2)} ms`;
    process.stdout.write(
      [
        ...(values['server-only']
          ? [`the DNS server alone${values.full ? ', without its answer cache' : ''} (${SERVICES} Services, on CPU ${values.cpu})`]
          : [
              `| measure (${SERVICES} Services, drover on CPU ${values.cpu}) | p50 | p90 | max |`,
              '|---|---|---|---|',
              `| name-update: file renamed → first answer (${fromSource.length} updates) | ${ms(pct(fromSource, 50))} | ${ms(pct(fromSource, 90))} | ${ms(fromSource.at(-1)!)} |`,
              `| name-update: partial sync done (log) → first answer | ${ms(pct(fromSync, 50))} | ${ms(pct(fromSync, 90))} | ${ms(fromSync.at(-1)!)} |`,
            ]),
        '',
        `| dnsperf, cluster names (A), UDP, ${SECONDS} s, 4 clients, 200 outstanding | answers/s | completed | lost | server CPU per answer | p50 | p99 | p99.9 |`,
        '|---|---|---|---|---|---|---|---|',
        ...[
          ['as fast as it answers', flat],
          [`paced at ${values.rate} queries/s`, paced],
          ...(churned ? [[`paced at ${values.rate} queries/s, a Service added every ${values.churn} ms (${syncs.length} partial syncs, the longest ${Math.max(0, ...syncs.map((l) => l.durationMs ?? 0))} ms)`, churned]] : []),
        ].map(([what, r]) => {
          const run = r as typeof flat;
          return `| ${what as string} | ${Math.round(run.qps)} | ${run.completed} | ${run.lost} | ${run.cpuPerAnswer.toFixed(1)} µs | ${ms(pct(run.latencies, 50))} | ${ms(pct(run.latencies, 99))} | ${ms(pct(run.latencies, 99.9))} |`;
        }),
        '',
      ].join('\n'),
    );
  } finally {
    if (drover?.pid !== undefined) drover.kill('SIGTERM');
    await topo?.destroy();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
