/**
 * `scripts/dns-bench.ts --peers`: drover's node DNS and CoreDNS side by
 * side, each fed by the same real API server (test/peers/: kube-apiserver
 * with an embedded etcd, on the host's loopback) holding `services`
 * Services, each with one EndpointSlice of one endpoint (the testbed's
 * backend, 10.244.1.2:8080).
 *
 * One server after the other, each in a fresh testbed (node, client and
 * backend namespaces), pinned to CPU `cpu` with taskset, listening on
 * `address` port 53 in the node namespace, and reaching the API server
 * through the peer bench's bridge (scripts/peers/bench/api-bridge.ts:
 * 127.0.0.1:PORT in the node namespace, joined to the API server by a Unix
 * socket), with the API server's admin kubeconfig:
 *
 * - `drover`: `drover run --source kubernetes --dns-address ADDRESS`
 *   (iptables mode, `--min-sync-period 0s` as the file bench);
 * - `coredns`: CoreDNS v1.15.0 (test/peers/coredns/) with kubeadm's Corefile
 *   (scripts/dns-bench/corefile.ts), whose cache leaves cluster names out;
 * - `coredns-cache`: the same with a plain `cache 30`, which caches them.
 *
 * CoreDNS runs with GOMAXPROCS=1 (Go would take the same from its CPU
 * affinity; set so that the one-core comparison does not rest on that).
 *
 * For each: the time from its start until the last Service's name is
 * answered from the client namespace; name-update latency, `updates` times
 * (a poller in the client namespace asks for a new Service's name every
 * millisecond; its EndpointSlice is written, then the Service is created
 * through the API with a ClusterIP of its own; timed from just before that
 * write until the first answer with that ClusterIP; the Service is deleted
 * after); then the same dnsperf runs as the file bench (as fast as it
 * answers, and paced at `rate`), and the server's RSS and peak RSS.
 * Everything (API server, namespaces, processes, files) is removed at the
 * end, also on failure.
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { Server } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { installedEntry } from '../../src/bench/drover-process.ts';
import { createTopology, type Topology } from '../../src/testbed/topology.ts';
import { TestApiServer } from '../../test/cluster/support/apiserver.ts';
import { createNamespace, createNode, endpointSliceObject, serviceObject } from '../../test/cluster/support/objects.ts';
import { locatePeers } from '../../test/cluster/support/peers.ts';
import { serveApiSocket, startForwarder } from '../peers/bench/api-bridge.ts';
import { ProxyProcess } from '../peers/bench/processes.ts';
import { pool } from '../peers/pool.ts';
import { corefile } from './corefile.ts';
import { dnsperf, dnsperfHeader, dnsperfRow, firstAnswer, ms, pct, writePoller, type Client, type DnsperfRun } from './measure.ts';

/** The servers `--peers` can run, in the order of a full run. */
export const PEER_SERVERS = ['drover', 'coredns', 'coredns-cache'] as const;
/** One of {@link PEER_SERVERS}. */
export type PeerServer = (typeof PEER_SERVERS)[number];

/** What {@link runPeers} is asked to do. */
export interface PeersOptions {
  readonly servers: readonly PeerServer[];
  /** Services in the API server. */
  readonly services: number;
  /** Name updates timed per server. */
  readonly updates: number;
  /** Each dnsperf run, s. */
  readonly seconds: number;
  /** The server's CPU (a taskset list). */
  readonly cpu: string;
  /** The client side's CPUs. */
  readonly clientCpus: string;
  /** The paced run's queries per second. */
  readonly rate: number;
  /** Where the servers listen, port 53. */
  readonly address: string;
  /** Progress lines. */
  readonly log: (line: string) => void;
}

/** What one server measured. */
interface PeerResult {
  readonly server: PeerServer;
  /** From its start until the last Service's name answered, ms. */
  readonly startMs: number;
  /** Name-update latencies, sorted, ms. */
  readonly updates: number[];
  /** The round trip of each timed API write, sorted, ms. */
  readonly writes: number[];
  readonly flat: DnsperfRun;
  readonly paced: DnsperfRun;
  readonly rssKb: number;
  readonly hwmKb: number;
  /** Load average (1 min) at its start. */
  readonly load: number;
}

const NS = 'bench';
const NODE = 'dns-bench';
const BACKEND = '10.244.1.2';
const CLUSTER_CIDR = '10.244.0.0/16';
const SERVICE_CIDR = '10.96.0.0/16';
const ZONE = 'cluster.local';
const DEAD_UPSTREAM = '127.0.0.1:9';
const IN_FLIGHT = 20;
const DROVER = fileURLToPath(new URL('../../bin/drover.js', import.meta.url));
const BUILD = fileURLToPath(new URL('../peers/build.sh', import.meta.url));

/** Each server's label in the tables (drover's says whether it ran from dist/ or from the sources through tsx). */
const LABEL: Record<PeerServer, string> = {
  drover: `drover (\`--source kubernetes\`, ${installedEntry()})`,
  coredns: 'CoreDNS, kubeadm Corefile (`cache 30`, cluster names not cached)',
  'coredns-cache': 'CoreDNS, `cache 30` caching cluster names',
};

/** The CoreDNS binary `scripts/peers/build.sh --coredns` built, or undefined. Builds nothing. */
function locateCoreDns(): string | undefined {
  const r = spawnSync('bash', [BUILD, '--coredns', '--locate'], { encoding: 'utf8' });
  return r.status === 0 ? join(r.stdout.trim(), 'coredns') : undefined;
}

/** The one endpoint of a bench Service's EndpointSlice. */
const endpoint = (pod: string) => ({ ip: BACKEND, pod, nodeName: 'backends' });

/**
 * Run the side-by-side bench; resolves with its Markdown tables.
 * @throws Error when a peer is not built, the API server does not start, or a server does not answer in time.
 */
export async function runPeers(opts: PeersOptions): Promise<string> {
  const peers = locatePeers();
  if (!peers) throw new Error('the test API server is not built: run bash scripts/peers/build.sh');
  const coredns = opts.servers.some((s) => s !== 'drover') ? locateCoreDns() : '';
  if (coredns === undefined) throw new Error('CoreDNS is not built: run bash scripts/peers/build.sh --coredns');
  const work = await mkdtemp(join(tmpdir(), 'drover-dns-peers-'));
  let api: TestApiServer | undefined;
  let bridge: Server | undefined;
  try {
    opts.log('starting the API server');
    api = await TestApiServer.start(peers.testApiserver, { serviceClusterIPRange: SERVICE_CIDR, apiserverArgs: ['--max-requests-inflight=800', '--max-mutating-requests-inflight=400'] });
    const socket = join(work, 'api.sock');
    bridge = await serveApiSocket(socket, api.state.securePort);
    await createNamespace(api, NS);
    await createNode(api, NODE, 'zone-a', '192.168.100.1');
    opts.log(`writing ${opts.services} Services and EndpointSlices (${IN_FLIGHT} in flight)`);
    const ips: string[] = [];
    await pool(opts.services, IN_FLIGHT, async (i) => {
      const svc = await api!.must<{ metadata: { uid: string }; spec: { clusterIP: string } }>('POST', `/api/v1/namespaces/${NS}/services`, serviceObject(NS, `svc-${i}`, {}));
      await api!.must('POST', `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`, endpointSliceObject(NS, `svc-${i}-abcde`, { name: `svc-${i}`, uid: svc.metadata.uid }, 'IPv4', [endpoint(`web-${i}`)]));
      ips[i] = svc.spec.clusterIP;
    });
    const queries = join(work, 'queries.txt');
    await writeFile(queries, Array.from({ length: opts.services }, (_, i) => `svc-${i}.${NS}.svc.${ZONE} A\n`).join(''));
    const results: PeerResult[] = [];
    let added = 0;
    for (const server of opts.servers) {
      opts.log(`${server}: load average ${loadavg()[0]!.toFixed(2)}`);
      const dir = await mkdtemp(join(work, `${server}-`));
      let topo: Topology | undefined;
      let proc: ProxyProcess | undefined;
      try {
        topo = await createTopology({ backends: [{ name: 'web-1', ip: BACKEND, ports: [8080] }], serviceCidr: SERVICE_CIDR });
        const forwarder = await startForwarder(topo.node, api.state.securePort, socket);
        forwarder.unref();
        const client: Client = { netns: topo.client().netns, cpus: opts.clientCpus, dir, server: opts.address };
        await writePoller(client);
        const load = loadavg()[0]!;
        let started = 0;
        const last = opts.services - 1;
        const answered = await firstAnswer(
          client,
          `svc-${last}.${NS}.svc.${ZONE}`,
          ips[last]!,
          async () => {
            started = performance.timeOrigin + performance.now();
            proc = await startServer(server, topo!, api!.state.kubeconfig, dir, opts, coredns ?? '');
          },
          5 * 60_000,
          false,
        );
        if (answered === undefined) throw new Error(`${server}: svc-${last} was not answered within 5 minutes of its start; its log ends with:\n${proc?.logTail ?? ''}`);
        const startMs = answered - started;
        opts.log(`  names answered ${startMs.toFixed(0)} ms after its start`);
        await sleep(2000);

        const updates: number[] = [];
        const writes: number[] = [];
        for (let u = 0; u < opts.updates; u++) {
          const k = added++;
          if (k >= 240) throw new Error('at most 240 name updates in one run (the ClusterIPs 10.96.0.10-249)');
          const name = `new-${k}`;
          const ip = `10.96.0.${10 + k}`;
          await api.must('POST', `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`, endpointSliceObject(NS, `${name}-abcde`, { name, uid: randomUUID() }, 'IPv4', [endpoint(name)]));
          let t0 = 0;
          const seen = await firstAnswer(client, `${name}.${NS}.svc.${ZONE}`, ip, async () => {
            t0 = performance.timeOrigin + performance.now();
            await api!.must('POST', `/api/v1/namespaces/${NS}/services`, serviceObject(NS, name, { clusterIP: ip }));
            writes.push(performance.timeOrigin + performance.now() - t0);
          });
          if (seen === undefined) throw new Error(`${server}: ${name} was not answered within 30 s of its creation`);
          updates.push(seen - t0);
          await api.must('DELETE', `/api/v1/namespaces/${NS}/services/${name}`);
          await api.must('DELETE', `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices/${name}-abcde`);
          proc!.assertRunning();
          await sleep(500);
        }
        updates.sort((a, b) => a - b);
        writes.sort((a, b) => a - b);
        opts.log(`  name updates ${updates.map((x) => x.toFixed(1)).join(' / ')} ms`);

        const flat = await dnsperf(client, queries, opts.seconds, proc!.pid);
        const paced = await dnsperf(client, queries, opts.seconds, proc!.pid, ['-Q', String(opts.rate)]);
        const mem = await proc!.memory();
        results.push({ server, startMs, updates, writes, flat, paced, rssKb: mem.rssKb, hwmKb: mem.hwmKb, load });
      } finally {
        await proc?.stop();
        await topo?.destroy();
      }
    }
    return report(results, opts);
  } finally {
    bridge?.close();
    await api?.destroy();
    await rm(work, { recursive: true, force: true });
  }
}

/** Start `server` pinned to `opts.cpu` in the node namespace of `topo`, reading the API server with `kubeconfig`. */
async function startServer(server: PeerServer, topo: Topology, kubeconfig: string, dir: string, opts: PeersOptions, coredns: string): Promise<ProxyProcess> {
  const pin = ['taskset', '-c', opts.cpu];
  const log = join(dir, 'server.log');
  if (server === 'drover') {
    const argv = [
      ...pin, process.execPath, DROVER, 'run',
      '--source', 'kubernetes', '--kubeconfig', kubeconfig, '--hostname-override', NODE,
      '--cluster-cidr', CLUSTER_CIDR, '--service-cidr', SERVICE_CIDR,
      '--dns-address', opts.address, '--dns-upstream', DEAD_UPSTREAM, '--min-sync-period', '0s',
      '--metrics-bind-address', '', '--healthz-bind-address', '',
      '--state-dir', join(dir, 'state'), '--status-file', join(dir, 'status.json'),
    ];
    return ProxyProcess.start(topo.node, argv, log, { DROVER_ENTRY: installedEntry() });
  }
  await topo.exec(topo.node, 'ip', ['addr', 'add', `${opts.address}/32`, 'dev', 'lo']);
  const conf = join(dir, 'Corefile');
  await writeFile(conf, corefile({ address: opts.address, zone: ZONE, kubeconfig, ttl: 5, upstream: DEAD_UPSTREAM, cacheClusterZone: server === 'coredns-cache' }));
  return ProxyProcess.start(topo.node, [...pin, coredns, '-conf', conf], log, { GOMAXPROCS: '1' });
}

/** The Markdown tables of `results`. */
function report(results: readonly PeerResult[], opts: PeersOptions): string {
  const n = opts.services.toLocaleString('en-US');
  return [
    `| server (${n} Services, the real kube-apiserver, server on CPU ${opts.cpu}, clients on CPU ${opts.clientCpus}) | start → names answered | name update: Service created → first answer, p50 / p90 / max (${opts.updates}) | the API write's round trip, p50 | RSS / peak | load |`,
    '|---|---|---|---|---|---|',
    ...results.map(
      (r) =>
        `| ${LABEL[r.server]} | ${(r.startMs / 1000).toFixed(1)} s | ${ms(pct(r.updates, 50))} / ${ms(pct(r.updates, 90))} / ${ms(r.updates.at(-1)!)} | ${ms(pct(r.writes, 50))} | ${Math.round(r.rssKb / 1024)} / ${Math.round(r.hwmKb / 1024)} MB | ${r.load.toFixed(2)} |`,
    ),
    '',
    ...dnsperfHeader(`dnsperf, cluster names (A), UDP, ${opts.seconds} s, 4 clients, 200 outstanding`),
    ...results.flatMap((r) => [dnsperfRow(`${LABEL[r.server]}, as fast as it answers`, r.flat), dnsperfRow(`${LABEL[r.server]}, paced at ${opts.rate} queries/s`, r.paced)]),
    '',
  ].join('\n');
}
