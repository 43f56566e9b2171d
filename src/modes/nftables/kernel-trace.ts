/**
 * `drover trace --kernel` in nftables mode: one real probe, traced by the
 * kernel. The steps (the chains and the reading of the events are in
 * kernel-path.ts):
 *
 * 1. a listener joins NFNLGRP_NFTRACE (trace-helper.ts `listen`, a child
 *    process: with `--netns` inside that namespace, since a netlink socket
 *    hears the namespace of the process that opened it; and a child in any
 *    case, since the netlink package aborts its process when a receive
 *    buffer overflows);
 * 2. one `nft -f` transaction adds this run's trace chains to drover's
 *    table of the probe's family, `ip drover` or `ip6 drover` (never
 *    another table; without the table it is refused);
 * 3. one probe is sent: a TCP connect() or a UDP datagram from `--src`
 *    and a random source port, from the node's namespace when `--src` is
 *    one of the node's addresses, else from `--probe-from` (a namespace
 *    that holds `--src` and routes to the node);
 * 4. drover waits until the probe's events show its end (a drop, or the
 *    late chains that see it leave), at most {@link EVENT_WAIT_MS} after
 *    the probe, reads the table's rules by handle, and removes the trace
 *    chains, also when anything before failed or a SIGINT or SIGTERM
 *    comes.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { createInterface } from 'node:readline';
import { DroverError, UsageError } from '../../errors.ts';
import type { TraceResult } from '../../inspect/trace.ts';
import { moduleArgv } from '../../util/node-module.ts';
import type { NftExec } from './exec.ts';
import type { LiveTable } from './live.ts';
import { addTraceScript, compareWithEvaluator, formatKernelPath, kernelPath, probeEvents, probeFamily, removeTraceScript, traceChainPrefix, type KernelComparison, type KernelPath, type KernelProbe, type ProbeReport } from './kernel-path.ts';
import { nftFamily, tableRef } from './layout.ts';
import { decodeTraceDatagram, type TraceEvent } from '../../kernel/nftables/trace-codec.ts';
import { sendProbe, type ProbeOutcome, type ProbeSpec } from './trace-helper.ts';

/** Longest wait for the probe's events after it was sent, ms. */
export const EVENT_WAIT_MS = 2000;
/** How long a TCP probe waits for an answer, ms. */
const PROBE_WAIT_MS = 1000;
/** Longest wait for a helper process to start (tsx compiles it on a busy host), ms. */
const HELPER_START_MS = 60_000;

/** Where the probe is sent from. */
export interface KernelTraceOptions {
  /** `--netns`: the node's namespace (drover's table, and the listener). */
  readonly netns?: string;
  /** `--probe-from`: the namespace of a `--src` outside the node. */
  readonly probeFrom?: string;
}

/** The result of `trace --kernel`. */
export interface KernelTraceReport {
  readonly path: KernelPath;
  readonly sent: ProbeReport;
  readonly comparison: KernelComparison;
  /** The kernel part of the text (kernel-path.ts formatKernelPath). */
  readonly text: string;
}

/** The kernel reported nothing for the probe, or a helper failed. */
export class KernelTraceError extends DroverError {
  override name = 'KernelTraceError';
}

/** argv of the helper (trace-helper.ts) in `netns` (undefined: this namespace). */
function helperArgv(netns: string | undefined, args: readonly string[]): [string, string[]] {
  const argv = [...moduleArgv(import.meta.url, 'trace-helper'), ...args];
  return netns ? ['ip', ['netns', 'exec', netns, ...argv]] : [argv[0]!, argv.slice(1)];
}

/** A running listener: the events so far; `close()` ends it. */
interface Listener {
  readonly events: TraceEvent[];
  readonly problems: string[];
  close(): Promise<void>;
}

/**
 * Start the listener in `netns` and wait for it to join the group.
 * @throws KernelTraceError when it exits or says nothing within HELPER_START_MS.
 */
async function startListener(netns: string | undefined): Promise<Listener> {
  const [cmd, args] = helperArgv(netns, ['listen']);
  const child: ChildProcessWithoutNullStreams = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-2000)));
  child.stdin.on('error', () => undefined);
  const events: TraceEvent[] = [];
  const problems: string[] = [];
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const ready = new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), HELPER_START_MS);
    void exited.then(() => resolve(false));
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (line === 'ready') {
        clearTimeout(timer);
        resolve(true);
      } else if (line.startsWith('d ')) {
        try {
          events.push(...decodeTraceDatagram(Buffer.from(line.slice(2), 'hex')));
        } catch (err) {
          problems.push((err as Error).message);
        }
      } else if (line.startsWith('e ')) problems.push(line.slice(2));
    });
  });
  const close = async () => {
    child.stdin.end();
    const timer = setTimeout(() => child.kill('SIGKILL'), 2000);
    await exited;
    clearTimeout(timer);
  };
  if (!(await ready)) {
    await close();
    throw new KernelTraceError(`the trace listener did not start${netns ? ` in namespace ${netns}` : ''}: ${stderr.trim() || 'no output'}`);
  }
  return { events, problems, close };
}

/**
 * Send probe `spec` from `netns` (a helper there), or from this process when undefined.
 * @throws KernelTraceError when the helper fails.
 */
async function send(spec: ProbeSpec, netns: string | undefined): Promise<ProbeOutcome> {
  if (!netns) return sendProbe(spec);
  const [cmd, args] = helperArgv(netns, ['send', JSON.stringify(spec)]);
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: HELPER_START_MS });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const code = await new Promise<number | null>((resolve) => {
    child.once('error', () => resolve(null));
    child.once('close', (c) => resolve(c));
  });
  try {
    if (code === 0) return JSON.parse(out) as ProbeOutcome;
  } catch {
    // reported below
  }
  throw new KernelTraceError(`the probe could not be sent from namespace ${netns}: ${err.trim() || out.trim() || `exit ${code}`}`);
}

/** Whether the probe's events already show its end: a drop, or one of the late chains. */
function ended(events: readonly TraceEvent[], tag: string, probe: KernelProbe): boolean {
  const prefix = traceChainPrefix(tag);
  const table = nftFamily(probeFamily(probe)).table.name;
  return probeEvents(events, tag, probe).some((e) => e.verdict?.code === 'drop' || (e.table === table && (e.chain === `${prefix}in` || e.chain === `${prefix}out`)));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Probe the kernel for the connection the evaluator traced (`result`),
 * and compare. `nft` is nft for drover's table of the connection's family
 * (an IPv6 connection's probe is traced in `ip6 drover`).
 * @throws UsageError without that table, for SCTP, or for a `--src`
 *   outside the node without `--probe-from` (or with it for one inside);
 *   KernelTraceError when the kernel reports nothing for the probe;
 *   CommandError when nft refuses the trace chains.
 */
export async function traceKernel(nft: NftExec, opts: KernelTraceOptions, result: TraceResult): Promise<KernelTraceReport> {
  const { packet, origin } = result;
  if (packet.proto === 'sctp') throw new UsageError('trace --kernel sends a TCP or UDP probe; an SCTP one cannot be sent (Node.js has no SCTP sockets)');
  if (origin === 'outside' && !opts.probeFrom) {
    throw new UsageError(`--src ${packet.src} is not an address of the node: trace --kernel sends the probe from a namespace that holds it and routes to the node; name it with --probe-from NETNS`);
  }
  if (origin === 'node' && opts.probeFrom) throw new UsageError(`--src ${packet.src} is an address of the node: its probe is sent from the node's namespace, drop --probe-from`);
  const family = probeFamily(packet);
  const before = await nft.list({ terse: true });
  if (!before.exists) throw new UsageError(`no table ${tableRef(family)}${opts.netns ? ` in namespace ${opts.netns}` : ''}: trace --kernel adds its trace rule to drover's table only`);
  const probe: KernelProbe = { ...packet, proto: packet.proto, sport: randomInt(32768, 61000), origin };
  const tag = randomBytes(4).toString('hex');
  const listener = await startListener(opts.netns);
  let sent: ProbeOutcome | undefined;
  let after: LiveTable | undefined;
  /** Remove whichever of this run's chains exist (a full sync of drover run may have removed them already). */
  const removeChains = async (names?: Iterable<string>): Promise<void> => {
    const script = removeTraceScript(tag, names ?? (await nft.list({ terse: true })).chains.keys(), family);
    if (script !== '') await nft.run(script);
  };
  /** The transaction that adds the chains, once started; `added` once it committed. */
  let adding: Promise<void> | undefined;
  let added = false;
  // Ctrl-C or a kill from the moment the chains may exist (their transaction is under way): once that transaction
  // has committed or failed, remove whatever of them exists, then end as the signal would.
  const onSignal = (signal: NodeJS.Signals) => {
    void Promise.resolve(adding)
      .catch(() => undefined)
      .then(() => removeChains())
      .catch(() => undefined)
      .finally(() => process.exit(128 + (signal === 'SIGINT' ? 2 : 15)));
  };
  try {
    process.once('SIGINT', onSignal).once('SIGTERM', onSignal);
    try {
      adding = nft.run(addTraceScript(tag, probe));
      await adding;
      added = true;
      sent = await send({ proto: probe.proto, src: probe.src, sport: probe.sport, dst: probe.dst, dport: probe.dport, waitMs: PROBE_WAIT_MS }, opts.probeFrom ?? opts.netns);
      const deadline = Date.now() + EVENT_WAIT_MS;
      while (Date.now() < deadline && !ended(listener.events, tag, probe)) await sleep(50);
      await sleep(100); // events of the same packet that follow its end (a return to a base chain's policy)
      after = await nft.list({ terse: true });
    } finally {
      // A failed add left nothing (one transaction): its error is the one to report.
      if (added) await removeChains(after?.chains.keys());
      process.off('SIGINT', onSignal).off('SIGTERM', onSignal);
    }
  } finally {
    await listener.close();
  }
  const from = opts.probeFrom ?? opts.netns;
  const report: ProbeReport = { ...(from ? { from } : {}), result: sent.result };
  const path = kernelPath(listener.events, tag, probe, after.rules ?? new Map());
  if (!path) {
    const why = listener.problems.length > 0 ? `; the listener reported: ${listener.problems.join('; ')}` : '';
    throw new KernelTraceError(
      `the kernel reported no trace of the probe ${probe.proto} ${probe.src}:${probe.sport} -> ${probe.dst}:${probe.dport} (sent: ${sent.result})${why}. ` +
        'Was it sent from a namespace whose traffic reaches the node, or were the trace chains removed meanwhile (a full sync of drover run)?',
    );
  }
  const comparison = compareWithEvaluator(result, path);
  return { path, sent: report, comparison, text: formatKernelPath(path, report, comparison, result) };
}
