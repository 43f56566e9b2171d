/**
 * Client probes: HTTP requests to echo servers from inside a namespace of a
 * topology, run by helper processes (probe-cli.mjs): {@link probe} by one
 * helper per namespace of the topology, kept for the next probe from there
 * (a Node start costs more than a probe); the others by one helper per call.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { run } from '../kernel/exec.ts';
import type { ProbeRequest, ProbeSummary, RequestResult, TrafficRequest, TrafficSummary } from './protocol.ts';
import { helperArgv, type Topology } from './topology.ts';

export type { EchoReply, ProbeSummary, RequestResult, TrafficSummary } from './protocol.ts';

/** Longest wait for a probe helper's first answer beyond the request's own timeout, ms: the helper's start, a Node process, which takes tens of seconds in the emulated IPVS guest on a busy host. */
const HELPER_START_MS = 90_000;

/** Options of {@link probe}. */
export interface ProbeOptions {
  /** Namespace to send from: a client's netns (default: the first client), or `topology.node`, or a backend's. */
  from?: string;
  host: string;
  port: number;
  /** Number of sequential requests, each on a new TCP connection [1]. */
  count?: number;
  /** Per-request deadline, connect + response, in ms [2000]. */
  timeoutMs?: number;
}

/**
 * Make `count` sequential requests, each on a new TCP connection, and tally
 * which backend answered (`counts`), which client address each backend saw
 * (`clientsSeen`) and the failures by error code (`errors`: ECONNREFUSED,
 * ETIMEDOUT, ECONNRESET, EHOSTUNREACH, ...).
 */
export async function probe(topology: Topology, opts: ProbeOptions): Promise<ProbeSummary> {
  const count = opts.count ?? 1;
  const timeoutMs = opts.timeoutMs ?? 2000;
  const netns = opts.from ?? topology.client().netns;
  const request: ProbeRequest = { host: opts.host, port: opts.port, count, timeoutMs };
  const deadlineMs = HELPER_START_MS + count * (timeoutMs + 500);
  // A namespace of the topology: its helper goes with it (destroy() kills what runs in its namespaces).
  if (topology.namespaces?.includes(netns)) {
    const first = await probeAgent(topology, netns).probe(request, deadlineMs);
    if ('summary' in first) return first.summary;
    // The helper had exited (this probe may have found it dying): once more, on a new one.
    const again = await probeAgent(topology, netns).probe(request, deadlineMs);
    if ('summary' in again) return again.summary;
    throw new Error(again.exited);
  }
  const [node, ...args] = helperArgv('probe-cli.mjs', ['probe']) as [string, ...string[]];
  const res = await run(node, args, { netns, input: JSON.stringify(request), timeoutMs: deadlineMs });
  return JSON.parse(res.stdout) as ProbeSummary;
}

/** A `probe-cli.mjs serve` helper in one namespace: {@link probe}'s requests, answered by id. */
interface ProbeAgent {
  /**
   * Send `request`: its summary, or why not when the helper exited before
   * answering (also when it had exited already).
   * @throws Error when no answer came within `deadlineMs` (the helper is then killed), or the helper failed the request.
   */
  probe(request: ProbeRequest, deadlineMs: number): Promise<{ summary: ProbeSummary } | { exited: string }>;
}

/** The probe helpers of each topology, by namespace; a helper that exits is dropped, and the next probe starts another. */
const agents = new WeakMap<Topology, Map<string, ProbeAgent>>();

/** The probe helper of `netns` in `topology`, started on first use. */
function probeAgent(topology: Topology, netns: string): ProbeAgent {
  let byNetns = agents.get(topology);
  if (byNetns === undefined) agents.set(topology, (byNetns = new Map()));
  let agent = byNetns.get(netns);
  if (agent === undefined) {
    const mine = byNetns;
    agent = startProbeAgent(netns, () => {
      if (mine.get(netns) === agent) mine.delete(netns);
    });
    byNetns.set(netns, agent);
  }
  return agent;
}

/**
 * Start `probe-cli.mjs serve` in `netns`. It does not keep this process
 * alive: a pending request's deadline does. `gone` is called once it exits,
 * or once a request misses its deadline (it is then killed).
 */
function startProbeAgent(netns: string, gone: () => void): ProbeAgent {
  const child: ChildProcess = spawn('ip', ['netns', 'exec', netns, ...helperArgv('probe-cli.mjs', ['serve'])], { stdio: ['pipe', 'pipe', 'pipe'] });
  type Answer = { summary: ProbeSummary } | { exited: string };
  const pending = new Map<number, { resolve: (a: Answer) => void; reject: (e: Error) => void }>();
  let nextId = 0;
  let stderr = '';
  let exited: string | undefined;
  const fail = (why: string): void => {
    exited ??= `probe: the helper in ${netns} ${why}${stderr.trim() ? `; stderr: ${stderr.trim()}` : ''}`;
    gone();
    for (const p of pending.values()) p.resolve({ exited });
    pending.clear();
  };
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-2000)));
  // A write after the helper died fails here; its 'close' answers what is pending.
  child.stdin!.on('error', () => {});
  createInterface({ input: child.stdout! }).on('line', (line) => {
    let answer: { id: number; summary?: ProbeSummary; error?: string };
    try {
      answer = JSON.parse(line) as typeof answer;
    } catch {
      return;
    }
    const p = pending.get(answer.id);
    pending.delete(answer.id);
    if (answer.summary !== undefined) p?.resolve({ summary: answer.summary });
    else p?.reject(new Error(`probe: ${answer.error ?? 'no summary'}`));
  });
  child.on('error', (e) => fail(`failed to start: ${e.message}`));
  child.on('close', (code, signal) => fail(`exited (${signal ?? code})`));
  child.unref();
  for (const s of [child.stdin, child.stdout, child.stderr]) (s as Socket | null)?.unref();
  return {
    probe(request, deadlineMs) {
      if (exited !== undefined) return Promise.resolve({ exited });
      const id = nextId++;
      return new Promise<Answer>((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error(`probe: no answer from the helper in ${netns} within ${deadlineMs} ms`));
          gone();
          child.kill('SIGKILL');
        }, deadlineMs);
        pending.set(id, {
          resolve: (s) => (clearTimeout(timer), resolve(s)),
          reject: (e) => (clearTimeout(timer), reject(e)),
        });
        child.stdin!.write(JSON.stringify({ id, ...request }) + '\n');
      });
    },
  };
}

/** One request on a new connection; the echo reply or the error code. */
export async function connectOnce(topology: Topology, opts: Omit<ProbeOptions, 'count'>): Promise<RequestResult> {
  const summary = await probe(topology, { ...opts, count: 1 });
  const [result] = summary.results;
  if (!result) throw new Error('probe: no result');
  return result;
}

/** Options of {@link udpOnce}. */
export interface UdpOptions extends Omit<ProbeOptions, 'count'> {
  /** The client's source port, 1-65535: the same one every time keeps one UDP flow (one conntrack entry). */
  sourcePort: number;
}

/**
 * One UDP datagram from `opts.from`, sent from `opts.sourcePort` to
 * `host:port`, and the echo server's reply datagram (echo-server.mjs
 * `--udp-ports`), or `{ ok: false, code: 'ETIMEDOUT' }` when none came
 * within `timeoutMs`.
 */
export async function udpOnce(topology: Topology, opts: UdpOptions): Promise<RequestResult> {
  const { sourcePort, ...rest } = opts;
  const [result] = await udpEach(topology, { ...rest, sourcePorts: [sourcePort] });
  if (!result) throw new Error('udp: no result');
  return result;
}

/** Options of {@link udpEach}. */
export interface UdpEachOptions extends Omit<ProbeOptions, 'count'> {
  /** The client's source ports, 1-65535, one datagram from each, in this order (a port may repeat: the same UDP flow again). */
  sourcePorts: readonly number[];
}

/**
 * {@link udpOnce} for each of `opts.sourcePorts` in turn, from ONE helper
 * process: the datagrams go out milliseconds apart, where a helper per
 * datagram costs a Node start between two of them (seconds in the emulated
 * IPVS guest). The results are in the order of the ports.
 */
export async function udpEach(topology: Topology, opts: UdpEachOptions): Promise<RequestResult[]> {
  const timeoutMs = opts.timeoutMs ?? 2000;
  const [node, ...args] = helperArgv('probe-cli.mjs', ['udp', opts.host, String(opts.port), opts.sourcePorts.join(','), String(timeoutMs)]) as [string, ...string[]];
  const res = await run(node, args, { netns: opts.from ?? topology.client().netns, timeoutMs: HELPER_START_MS + opts.sourcePorts.length * timeoutMs });
  return res.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as RequestResult);
}

/** A single TCP connection kept open; see {@link holdConnection}. */
export interface HeldConnection {
  /** Result of the request made when the connection was opened. */
  readonly first: RequestResult;
  /** Send another request on the same connection (never reconnects). */
  request(): Promise<RequestResult>;
  /** Close the connection and end the helper process. */
  close(): Promise<void>;
}

/**
 * Open one TCP connection from `opts.from` and make a first request on it;
 * later requests reuse that connection, e.g. to check that an established
 * connection survives an endpoint going away. Always `close()` it.
 */
export async function holdConnection(topology: Topology, opts: Omit<ProbeOptions, 'count'>): Promise<HeldConnection> {
  const timeoutMs = opts.timeoutMs ?? 2000;
  const argv = helperArgv('probe-cli.mjs', ['hold', opts.host, String(opts.port), String(timeoutMs)]);
  const netns = opts.from ?? topology.client().netns;
  const child = spawn('ip', ['netns', 'exec', netns, ...argv], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  // The first answer waits for the helper's own start too: a Node process,
  // which takes tens of seconds in the emulated IPVS guest on a busy host.
  let allowanceMs = HELPER_START_MS;
  const request = async (): Promise<RequestResult> => {
    child.stdin.write('req\n');
    const waitMs = timeoutMs + allowanceMs;
    allowanceMs = 5000;
    const next = await Promise.race([
      lines.next(),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`hold: helper unresponsive after ${waitMs} ms`)), waitMs).unref()),
    ]);
    if (next.done) throw new Error('hold: helper process exited');
    return JSON.parse(next.value) as RequestResult;
  };
  const close = async (): Promise<void> => {
    child.stdin.end();
    const timer = setTimeout(() => child.kill('SIGKILL'), 2000);
    await exited;
    clearTimeout(timer);
  };
  try {
    return { first: await request(), request, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** Options of {@link startTraffic}. */
export interface TrafficOptions extends Omit<ProbeOptions, 'count'> {
  /** Long-lived connections, opened first [4]. */
  held?: number;
  /** Pause between two rounds, ms [100]. */
  intervalMs?: number;
  /** Deadline of one reply on a long-lived connection, ms [`timeoutMs`]; one that misses it counts as lost. */
  heldTimeoutMs?: number;
  /** `udp`: UDP flows instead of TCP connections (TrafficRequest.protocol) [tcp]. */
  protocol?: 'tcp' | 'udp';
}

/** Traffic running from a namespace; see {@link startTraffic}. */
export interface Traffic {
  /** Stop the traffic and return its counts; calling it again returns the same counts. */
  stop(): Promise<TrafficSummary>;
}

/**
 * Start steady traffic to `host:port` from one helper process: `held`
 * long-lived connections, each making a request every round, and one new
 * connection per round, until {@link Traffic.stop}. Resolves once every
 * long-lived connection has had its first reply.
 * @throws Error when a long-lived connection cannot be opened (the helper has then exited).
 */
export async function startTraffic(topology: Topology, opts: TrafficOptions): Promise<Traffic> {
  const timeoutMs = opts.timeoutMs ?? 1000;
  const request: TrafficRequest = { host: opts.host, port: opts.port, held: opts.held ?? 4, intervalMs: opts.intervalMs ?? 100, timeoutMs, heldTimeoutMs: opts.heldTimeoutMs ?? timeoutMs, ...(opts.protocol ? { protocol: opts.protocol } : {}) };
  const argv = helperArgv('probe-cli.mjs', ['traffic', JSON.stringify(request)]);
  const child = spawn('ip', ['netns', 'exec', opts.from ?? topology.client().netns, ...argv], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.done || first.value !== 'READY') {
    child.kill('SIGKILL');
    throw new Error(`traffic: the long-lived connections could not be opened (${first.done ? 'helper exited' : first.value})`);
  }
  let stopped: Promise<TrafficSummary> | undefined;
  const stop = async (): Promise<TrafficSummary> => {
    child.stdin.end();
    // The last round waits for its slowest reply before the summary.
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000 + Math.max(request.timeoutMs, request.heldTimeoutMs));
    const last = await lines.next();
    clearTimeout(timer);
    if (last.done) throw new Error('traffic: the helper exited without a summary');
    return JSON.parse(last.value) as TrafficSummary;
  };
  return { stop: () => (stopped ??= stop()) };
}
