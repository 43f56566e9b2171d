/**
 * The peer bench: the real kube-proxy and drover, one after the other, fed
 * by one real API server (test/peers/), each in its own node namespace of
 * the testbed with its own backends and client. See docs/bench/peers/ for
 * what it measures and the results; scripts/peers/bench.ts is its command.
 *
 * The API server holds, for each size, SERVICES Services of one
 * EndpointSlice of ENDPOINTS endpoints each (written 20 in flight; the
 * larger sizes add to the smaller). Most endpoints are addresses no
 * connection is made to; a few sample Services, the clock Services of the
 * single changes and the churn Services have the testbed's backends b1-b3
 * (10.244.1.2-4:8080) as endpoints, which exist, with the same addresses,
 * in every proxy's own namespaces.
 *
 * For each proxy: a fresh topology, the API server reached from its node
 * namespace through api-bridge.ts, the proxy started there, and:
 * - full sync: from its start until every sample Service answers;
 * - RSS (VmRSS) 8 s after that (steady), VmHWM at the end (peak), and CPU
 *   seconds of the whole run (its own and its children's, /proc/PID/stat);
 * - single changes, each timed from just before the API write is sent
 *   until a new connection from its client shows it (src/bench/prober.mjs,
 *   paced: a connection every 10 ms, counted by send order): an
 *   endpoint swapped (until connections land on the new backend), a Service
 *   added (its EndpointSlice written first, timed from the Service's
 *   creation, until connections land on its backend), the Service removed
 *   (until 3 connections in a row fail);
 * - churn: CHURN_RATE EndpointSlice changes per second for CHURN_SECONDS,
 *   over 2 × CHURN_RATE churn Services (each changed every 2 s, its one
 *   endpoint moved to the next backend), each timed from just before its
 *   write is sent until a connection lands on its new backend
 *   (churn-prober.mjs, paced the same way); a change overtaken by the next change of the same
 *   Service before it showed is counted as superseded, not timed.
 */
import { randomUUID } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { Server } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Prober } from '../../../src/bench/datapath.ts';
import { installedEntry } from '../../../src/bench/drover-process.ts';
import { createTopology, type Topology } from '../../../src/testbed/topology.ts';
import { TestApiServer, type Obj } from '../../../test/cluster/support/apiserver.ts';
import { createNamespace, createNode, endpointSliceObject, serviceObject, type EndpointSpec } from '../../../test/cluster/support/objects.ts';
import type { Peers } from '../../../test/cluster/support/peers.ts';
import { pool } from '../pool.ts';
import { serveApiSocket, startForwarder } from './api-bridge.ts';
import { kubeProxyConfig } from './kube-proxy-config.ts';
import { ProxyProcess } from './processes.ts';
import { LineChild } from '../../../src/bench/line-child.ts';

/** One proxy the bench runs. */
export interface ProxySpec {
  readonly impl: 'kube-proxy' | 'drover';
  readonly mode: 'iptables' | 'nftables';
  /** Its minimum sync period, ms (kube-proxy's `minSyncPeriod`, drover's `--min-sync-period`); absent: its own default (1 s for both). */
  readonly minSyncPeriodMs?: number;
}

/** The proxies of a full run, in the order they run: per mode, kube-proxy and drover each at its defaults and with a minimum sync period of 0. */
export const ALL_PROXIES: readonly ProxySpec[] = (['iptables', 'nftables'] as const).flatMap((mode) =>
  (['kube-proxy', 'drover'] as const).flatMap((impl) => [{ impl, mode }, { impl, mode, minSyncPeriodMs: 0 }]),
);

/** A proxy's label in tables and its Node's name: `kube-proxy-iptables`, `kube-proxy-nftables-min0`, `drover-nftables`. */
export function proxyLabel(p: ProxySpec): string {
  return `${p.impl}-${p.mode}${p.minSyncPeriodMs !== undefined ? `-min${p.minSyncPeriodMs}` : ''}`;
}

/** The proxy a label names (the inverse of {@link proxyLabel}: `drover-nftables-min50` is drover in nftables mode with a minimum sync period of 50 ms), or undefined. Pure. */
export function parseProxyLabel(label: string): ProxySpec | undefined {
  const m = /^(kube-proxy|drover)-(iptables|nftables)(?:-min(0|[1-9][0-9]{0,5}))?$/.exec(label);
  if (!m) return undefined;
  const spec = { impl: m[1] as ProxySpec['impl'], mode: m[2] as ProxySpec['mode'] };
  return m[3] !== undefined ? { ...spec, minSyncPeriodMs: Number(m[3]) } : spec;
}

/** What {@link runPeerBench} is asked to do. */
export interface PeerBenchOptions {
  readonly peers: Peers;
  /** Sizes, ascending: Services in the API server. */
  readonly services: readonly number[];
  /** Endpoints per Service. */
  readonly endpoints: number;
  /** Single changes of each kind per proxy and size. */
  readonly changes: number;
  /** Churn: EndpointSlice changes per second (0: no churn run). */
  readonly churnRate: number;
  /** Churn: how long, s. */
  readonly churnSeconds: number;
  readonly proxies: readonly ProxySpec[];
  /** Progress lines. */
  readonly log?: (line: string) => void;
  /** How long after its full sync a proxy is left alone before its steady RSS is read, ms [8000]. */
  readonly settleMs?: number;
  /** Quiet time after each single change has shown, before the next, ms [1000]. */
  readonly gapMs?: number;
  /** A folder to copy each proxy's log into (LABEL-SIZE.log); absent: the logs are removed with the rest. */
  readonly logsDir?: string;
  /** Ends the run at the next step (the next object written, the next proxy, the next change) with the signal's reason. */
  readonly signal?: AbortSignal;
  /** Called with each proxy's result as it is measured (to write partial reports). */
  readonly onResult?: (r: ProxyResult) => void | Promise<void>;
}

/** The kinds of single change. */
export const CHANGE_KINDS = ['endpoint swapped', 'service added', 'service removed'] as const;
/** One kind of single change. */
export type ChangeKind = (typeof CHANGE_KINDS)[number];

/** What one proxy measured at one size. Times in ms, memory in kB, CPU in s. */
export interface ProxyResult {
  readonly proxy: ProxySpec;
  readonly label: string;
  /** Services in the API server (the size), not counting `default/kubernetes`. */
  readonly services: number;
  /** From the proxy's start until every sample Service answered. */
  readonly fullSyncMs: number;
  readonly rssSteadyKb: number;
  readonly rssPeakKb: number;
  /** CPU seconds of the proxy's process over its whole run, and of its finished children (iptables-restore, nft). */
  readonly cpuSelfS: number;
  readonly cpuChildrenS: number;
  /** Network programming latency of each single change, by kind. */
  readonly changes: Record<ChangeKind, number[]>;
  /** The churn run, when there was one. */
  readonly churn?: { readonly writes: number; readonly latenciesMs: number[]; readonly superseded: number; readonly failed: string[]; readonly writeSpanMs: number };
  /** Load average (1 min) when the proxy started and ended. */
  readonly load: readonly [number, number];
  /** Error lines of the proxy's log (the first 20). */
  readonly errors: readonly string[];
  /** Wall-clock time of this proxy's whole run, s. */
  readonly wallS: number;
  /** The round trip of each timed API write (single changes and churn), ms: the part of each latency before the API server answered. */
  readonly apiWriteMs?: number[];
}

/** How long after its write a churn change is overtaken by the next change of the same Service, ms: 2 × the rate's churn Services, each changed once per 2 s. */
export const SUPERSEDED_AFTER_MS = 2000;

const NS = 'bench';
const BACKENDS = ['b1', 'b2', 'b3'] as const;
const BACKEND_IP: Record<string, string> = { b1: '10.244.1.2', b2: '10.244.1.3', b3: '10.244.1.4' };
const IN_FLIGHT = 20;
const SAMPLES = 5;
const CLOCKS = 3;
const DROVER = fileURLToPath(new URL('../../../bin/drover.js', import.meta.url));
const CHURN_PROBER = fileURLToPath(new URL('./churn-prober.mjs', import.meta.url));
const CLUSTER_CIDR = '10.244.0.0/16';
const SERVICE_CIDR = '10.96.0.0/16';
const nsOf = (ms: bigint) => Number(ms) / 1e6;
/** Paced probes (src/bench/prober.mjs, churn-prober.mjs): a new connection every this many ms, whatever the ones before do. */
const PROBE_INTERVAL_MS = 10;
/** The churn prober's cap on connections per second over every pending change. */
const CHURN_PROBE_RATE = 300;
/**
 * The single changes' probes: paced, each connection given 500 ms (under
 * TCP's 1 s SYN retransmission, so that a connection sent before the change
 * cannot land through a retransmitted SYN), at most 50 in flight.
 */
const PROBE_TIMING = { attemptTimeoutMs: 500, deadlineMs: 120_000, intervalMs: PROBE_INTERVAL_MS, maxInFlight: 50 } as const;

/** One Service the bench wrote, with what it needs to change it. */
interface Written {
  readonly name: string;
  readonly clusterIP: string;
  readonly uid: string;
  /** The resourceVersion of its EndpointSlice as last written. */
  sliceVersion: string;
  /** The backend its endpoint is on now (clock and churn Services). */
  backend: string;
}

/** The bench's world on the API server. */
class Cluster {
  readonly bulk: Written[] = [];
  readonly samples: Written[] = [];
  readonly clocks: Written[] = [];
  readonly churn: Written[] = [];
  /** The round trip of each timed write since the last {@link takeRoundTrips}, ms. */
  private roundTrips: number[] = [];
  private added = 0;

  constructor(
    readonly api: TestApiServer,
    private readonly endpoints: number,
    private readonly signal?: AbortSignal,
  ) {}

  private ep(backend: string, i = 0): EndpointSpec {
    return { ip: BACKEND_IP[backend]!, pod: `${backend}-${i}`, nodeName: 'backends' };
  }

  /** Create a Service and its EndpointSlice (`eps` endpoints). */
  async create(name: string, eps: EndpointSpec[], backend = ''): Promise<Written> {
    const svc = await this.api.must<{ metadata: { uid: string }; spec: { clusterIP: string } }>('POST', `/api/v1/namespaces/${NS}/services`, serviceObject(NS, name, {}));
    const uid = svc.metadata.uid;
    const slice = endpointSliceObject(NS, `${name}-abcde`, { name, uid }, 'IPv4', eps);
    const s = await this.api.must<Obj>('POST', `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`, slice);
    return { name, clusterIP: svc.spec.clusterIP, uid, sliceVersion: s.metadata!.resourceVersion!, backend };
  }

  /** Fill the API server up to `services` Services (the samples, clocks and churn Services among them). */
  async fill(services: number, churnServices: number, log: (l: string) => void): Promise<number> {
    const t0 = performance.now();
    if (this.bulk.length === 0) {
      for (let i = 0; i < SAMPLES; i++) this.samples.push(await this.create(`sample-${i}`, BACKENDS.map((b) => this.ep(b))));
      for (let i = 0; i < CLOCKS; i++) this.clocks.push(await this.create(`clock-${i}`, [this.ep('b1')], 'b1'));
      await pool(churnServices, IN_FLIGHT, async (i) => void this.churn.push(await this.create(`churn-${i}`, [this.ep('b1')], 'b1')));
    }
    const have = this.samples.length + this.clocks.length + this.churn.length + this.bulk.length;
    const from = this.bulk.length;
    const more = Math.max(0, services - have);
    let done = 0;
    await pool(more, IN_FLIGHT, async (j) => {
      this.signal?.throwIfAborted();
      const i = from + j;
      const eps = Array.from({ length: this.endpoints }, (_, e) => {
        const k = i * this.endpoints + e;
        return { ip: `10.${128 + (k >> 16)}.${(k >> 8) & 255}.${k & 255}`, pod: `svc-${i}-${e}`, nodeName: 'backends' };
      });
      this.bulk[i] = await this.create(`svc-${i}`, eps);
      if (++done % 1000 === 0) log(`  ${done}/${more} Services written`);
    });
    return performance.now() - t0;
  }

  /** Move `w`'s one endpoint to `backend` (a PUT of its EndpointSlice with the last resourceVersion); resolves, at the write's response, with the time just before the write was sent. */
  async moveTo(w: Written, backend: string): Promise<bigint> {
    const slice = endpointSliceObject(NS, `${w.name}-abcde`, { name: w.name, uid: w.uid }, 'IPv4', [this.ep(backend)]);
    const put = { ...slice, metadata: { ...slice.metadata, resourceVersion: w.sliceVersion } };
    const at = process.hrtime.bigint();
    const s = await this.api.must<Obj>('PUT', `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices/${w.name}-abcde`, put);
    this.roundTrips.push(nsOf(process.hrtime.bigint() - at));
    w.sliceVersion = s.metadata!.resourceVersion!;
    w.backend = backend;
    return at;
  }

  /** A new Service `added-N` with endpoint b1: its EndpointSlice first, then the Service; `at`: just before the Service's creation was sent. */
  async addService(): Promise<{ name: string; clusterIP: string; at: bigint }> {
    const name = `added-${this.added++}`;
    // Not yet owned: the Service's uid is not known before it exists (no garbage collector runs here).
    const uid = randomUUID();
    await this.api.must('POST', `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`, endpointSliceObject(NS, `${name}-abcde`, { name, uid }, 'IPv4', [this.ep('b1')]));
    const at = process.hrtime.bigint();
    const svc = await this.api.must<{ spec: { clusterIP: string } }>('POST', `/api/v1/namespaces/${NS}/services`, serviceObject(NS, name, {}));
    this.roundTrips.push(nsOf(process.hrtime.bigint() - at));
    return { name, clusterIP: svc.spec.clusterIP, at };
  }

  /** Delete Service `name`; resolves, at the deletion's response, with the time just before it was sent. Its EndpointSlice is deleted after (untimed) by {@link dropSlice}. */
  async removeService(name: string): Promise<bigint> {
    const at = process.hrtime.bigint();
    await this.api.must('DELETE', `/api/v1/namespaces/${NS}/services/${name}`);
    this.roundTrips.push(nsOf(process.hrtime.bigint() - at));
    return at;
  }

  /** The round trips of the timed writes since the last call, ms; starts anew. */
  takeRoundTrips(): number[] {
    const r = this.roundTrips;
    this.roundTrips = [];
    return r;
  }

  async dropSlice(name: string): Promise<void> {
    await this.api.must('DELETE', `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices/${name}-abcde`);
  }
}

const nextBackend = (b: string) => BACKENDS[(BACKENDS.indexOf(b as (typeof BACKENDS)[number]) + 1) % BACKENDS.length]!;

/**
 * Run the bench; resolves with every proxy's result at every size.
 * Everything it starts (API server, namespaces, processes, files) is
 * removed at the end, also on failure.
 * @throws Error when the API server does not start, or a proxy fails to sync or to show a change in time.
 */
export async function runPeerBench(opts: PeerBenchOptions): Promise<ProxyResult[]> {
  const log = opts.log ?? (() => undefined);
  const work = await mkdtemp(join(tmpdir(), 'drover-peer-bench-'));
  let api: TestApiServer | undefined;
  let bridge: Server | undefined;
  const results: ProxyResult[] = [];
  try {
    api = await TestApiServer.start(opts.peers.testApiserver, {
      serviceClusterIPRange: SERVICE_CIDR,
      apiserverArgs: ['--max-requests-inflight=800', '--max-mutating-requests-inflight=400'],
    });
    const socket = join(work, 'api.sock');
    bridge = await serveApiSocket(socket, api.state.securePort);
    await createNamespace(api, NS);
    for (const p of opts.proxies) await createNode(api, proxyLabel(p), 'zone-a', '192.168.100.1');
    const cluster = new Cluster(api, opts.endpoints, opts.signal);
    const churnServices = opts.churnRate > 0 ? 2 * opts.churnRate : 0;
    for (const size of opts.services) {
      log(`writing Services up to ${size} (${IN_FLIGHT} in flight)`);
      const ms = await cluster.fill(size, churnServices, log);
      log(`  done in ${(ms / 1000).toFixed(1)} s`);
      for (const p of opts.proxies) {
        opts.signal?.throwIfAborted();
        log(`${proxyLabel(p)} at ${size} Services`);
        const r = await measureProxy(p, size, cluster, opts, work, socket, log);
        results.push(r);
        await opts.onResult?.(r);
      }
    }
    return results;
  } finally {
    bridge?.close();
    await api?.destroy();
    await rm(work, { recursive: true, force: true });
  }
}

/** The argv that starts proxy `p` inside its node namespace, and its environment. */
async function proxyArgv(p: ProxySpec, node: string, peers: Peers, kubeconfig: string, dir: string): Promise<{ argv: string[]; env: NodeJS.ProcessEnv }> {
  if (p.impl === 'kube-proxy') {
    const config = join(dir, 'kube-proxy.json');
    await writeFile(config, kubeProxyConfig({ mode: p.mode, node, kubeconfig, clusterCIDR: CLUSTER_CIDR, ...(p.minSyncPeriodMs !== undefined ? { minSyncPeriodMs: p.minSyncPeriodMs } : {}) }));
    return { argv: [peers.kubeProxy, '--config', config], env: {} };
  }
  const argv = [
    process.execPath, DROVER, 'run',
    '--source', 'kubernetes', '--kubeconfig', kubeconfig, '--hostname-override', node,
    '--mode', p.mode, '--iptables-backend', 'nft',
    '--cluster-cidr', CLUSTER_CIDR, '--service-cidr', SERVICE_CIDR,
    '--metrics-bind-address', '', '--healthz-bind-address', '',
    '--state-dir', join(dir, 'state'), '--status-file', join(dir, 'status.json'),
    ...(p.minSyncPeriodMs !== undefined ? ['--min-sync-period', `${p.minSyncPeriodMs}ms`] : []),
  ];
  return { argv, env: { DROVER_ENTRY: installedEntry() } };
}

async function measureProxy(p: ProxySpec, size: number, cluster: Cluster, opts: PeerBenchOptions, work: string, socket: string, log: (l: string) => void): Promise<ProxyResult> {
  const label = proxyLabel(p);
  const dir = await mkdtemp(join(work, `${label}-`));
  const wall0 = performance.now();
  const load0 = loadavg()[0]!;
  let topo: Topology | undefined;
  let proxy: ProxyProcess | undefined;
  let prober: Prober | undefined;
  let churnProber: LineChild | undefined;
  try {
    topo = await createTopology({
      backends: BACKENDS.map((b) => ({ name: b, ip: BACKEND_IP[b]!, ports: [8080] })),
      clients: [{ name: 'client', ip: '192.168.100.2' }],
      serviceCidr: SERVICE_CIDR,
    });
    const forwarder = await startForwarder(topo.node, cluster.api.state.securePort, socket);
    forwarder.unref();
    const client = topo.client().netns;
    prober = await Prober.start(client);
    churnProber = await LineChild.start(client, [process.execPath, CHURN_PROBER, String(PROBE_INTERVAL_MS), String(CHURN_PROBE_RATE)]);
    const { argv, env } = await proxyArgv(p, label, opts.peers, cluster.api.state.kubeconfig, dir);
    const started = process.hrtime.bigint();
    proxy = await ProxyProcess.start(topo.node, argv, join(dir, 'proxy.log'), env);

    // Full sync: every sample Service answers (each probed every 50 ms: a coarser clock, so that minutes of waiting leave the CPU to the proxy).
    const answered = await Promise.all(
      cluster.samples.map(async (s) => {
        const a = await churnProber!.send({ op: 'expect', key: s.name, host: s.clusterIP, port: 80, endpoint: '*', deadlineMs: 30 * 60_000, intervalMs: 50 });
        if (!a.ok) throw new Error(`${label}: sample ${s.name} (${s.clusterIP}) never answered: ${String(a.error)}; proxy log:\n${proxy!.logTail}`);
        return BigInt(a.at as string);
      }),
    );
    const fullSyncMs = nsOf(answered.reduce((a, b) => (b > a ? b : a)) - started);
    log(`  full sync ${fullSyncMs.toFixed(0)} ms`);
    await sleep(opts.settleMs ?? 8000);
    const rssSteadyKb = (await proxy.memory()).rssKb;

    const timing = PROBE_TIMING;
    cluster.takeRoundTrips();
    const changes: Record<ChangeKind, number[]> = { 'endpoint swapped': [], 'service added': [], 'service removed': [] };
    for (let r = 0; r < opts.changes; r++) {
      opts.signal?.throwIfAborted();
      const clock = cluster.clocks[r % cluster.clocks.length]!;
      const to = nextBackend(clock.backend);
      const swapped = await cluster.moveTo(clock, to);
      const seen = await prober.until({ until: 'lands', host: clock.clusterIP, port: 80, endpoint: `${to}:8080` }, timing);
      changes['endpoint swapped'].push(nsOf(seen.atNs - swapped));
      await sleep(opts.gapMs ?? 1000);
      const added = await cluster.addService();
      const up = await prober.until({ until: 'lands', host: added.clusterIP, port: 80, endpoint: 'b1:8080' }, timing);
      changes['service added'].push(nsOf(up.atNs - added.at));
      await sleep(opts.gapMs ?? 1000);
      const removedAt = await cluster.removeService(added.name);
      const down = await prober.until({ until: 'fails', host: added.clusterIP, port: 80, consecutive: 3 }, timing);
      changes['service removed'].push(nsOf(down.atNs - removedAt));
      await cluster.dropSlice(added.name);
      await sleep(opts.gapMs ?? 1000);
      proxy.assertRunning();
    }
    log(`  single changes: ${CHANGE_KINDS.map((k) => `${k} ${changes[k].map((x) => x.toFixed(1)).join('/')}`).join('; ')} ms`);

    const churn = opts.churnRate > 0 && opts.churnSeconds > 0 ? await churnRun(cluster, churnProber, opts.churnRate, opts.churnSeconds) : undefined;
    if (churn) log(`  churn: ${churn.latenciesMs.length} timed, ${churn.superseded} superseded, ${churn.failed.length} failed`);
    const cpu = await proxy.cpu();
    const rssPeakKb = (await proxy.memory()).hwmKb;
    return {
      proxy: p,
      label,
      services: size,
      fullSyncMs,
      rssSteadyKb,
      rssPeakKb,
      cpuSelfS: cpu.self,
      cpuChildrenS: cpu.children,
      changes,
      ...(churn ? { churn } : {}),
      load: [load0, loadavg()[0]!],
      errors: [...proxy.errors],
      wallS: (performance.now() - wall0) / 1000,
      apiWriteMs: cluster.takeRoundTrips(),
    };
  } finally {
    await proxy?.stop();
    await prober?.close();
    await churnProber?.close();
    await topo?.destroy();
    if (opts.logsDir && proxy) {
      await mkdir(opts.logsDir, { recursive: true });
      await copyFile(join(dir, 'proxy.log'), join(opts.logsDir, `${label}-${size}.log`)).catch(() => undefined);
    }
  }
}

/** The churn run: `rate` EndpointSlice writes per second for `seconds`, round robin over the churn Services. */
async function churnRun(cluster: Cluster, prober: LineChild, rate: number, seconds: number): Promise<NonNullable<ProxyResult['churn']>> {
  const writes = rate * seconds;
  const latenciesMs: number[] = [];
  const failed: string[] = [];
  let superseded = 0;
  const chains = new Map<string, Promise<void>>();
  const pending: Promise<void>[] = [];
  const t0 = performance.now();
  for (let k = 0; k < writes; k++) {
    const wait = t0 + (k * 1000) / rate - performance.now();
    if (wait > 0) await sleep(wait);
    const w = cluster.churn[k % cluster.churn.length]!;
    // Writes to one Service stay in order: each waits for the one before.
    const prev = chains.get(w.name) ?? Promise.resolve();
    const next = prev.then(async () => {
      const to = nextBackend(w.backend);
      const at = await cluster.moveTo(w, to);
      const seen = prober.send({ op: 'expect', key: w.name, host: w.clusterIP, port: 80, endpoint: `${to}:8080`, deadlineMs: 120_000 });
      pending.push(
        seen.then((a) => {
          if (a.ok) latenciesMs.push(nsOf(BigInt(a.at as string) - at));
          else if (a.superseded) superseded++;
          else failed.push(String(a.error));
        }),
      );
    });
    chains.set(w.name, next);
  }
  await Promise.all(chains.values());
  const writeSpanMs = performance.now() - t0;
  await Promise.all(pending);
  return { writes, latenciesMs, superseded, failed, writeSpanMs };
}
