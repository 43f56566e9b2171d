// @ts-check
/**
 * The peer bench's clock for a stream of changes, run inside the client
 * namespace. Unlike src/bench/prober.mjs, which follows one check at a time,
 * it follows every pending change at once: each pending change's service
 * gets a new connection every INTERVAL_MS, started without waiting for its
 * earlier ones (a dropped SYN waits out its 500 ms timeout without holding
 * anything back), and a change is done at the send time of its first
 * connection, by send order, that lands on the backend it expects
 * (src/bench/send-order.mjs).
 *
 * Started as `churn-prober.mjs [INTERVAL_MS [RATE]]`: INTERVAL_MS (default
 * 10) is the least time between two connections to one pending change;
 * RATE (default 400) caps the connections per second over all of them, so
 * that many pending changes (a proxy that falls behind) share a bounded
 * budget and the probes leave the CPU to the proxy: each pending change
 * then gets about RATE / pending connections per second. At most 16
 * connections per change and 128 in all are in flight.
 *
 * One JSON command per line on stdin, one JSON answer per line on stdout:
 *
 *   {"id":1,"op":"ping"}                         -> {"id":1,"ok":true}
 *   {"id":2,"op":"expect","key":"svc-3","host":"10.96.0.12","port":80,
 *    "endpoint":"b2:8080","deadlineMs":60000}
 *      -> {"id":2,"ok":true,"at":"<ns>"}                     landed
 *      or {"id":2,"ok":false,"superseded":true}              a later expect of the same key came first
 *      or {"id":2,"ok":false,"error":"..."}                  deadline passed
 *
 * An `expect` may carry its own `"intervalMs"` instead of INTERVAL_MS (a
 * coarser one for a long wait, such as a full sync).
 *
 * `at` is process.hrtime.bigint() (CLOCK_MONOTONIC, shared by every process
 * of the machine) just before the landing connection was opened. A later
 * `expect` with the same `key` supersedes a pending one (a rolling update
 * moved on before the proxy showed the earlier state). The endpoint `*`
 * expects any answer at all.
 */
import { connect } from 'node:net';
import { createInterface } from 'node:readline';
import { SendOrder } from '../../../src/bench/send-order.mjs';

/**
 * @typedef {{ id: number, key: string, host: string, port: number, endpoint: string, deadline: bigint, interval: bigint,
 *             order: SendOrder, lastSent: bigint, last: string | undefined, over: boolean }} Pending
 */

const ATTEMPT_TIMEOUT_MS = 500;
const PER_KEY_IN_FLIGHT = 16;
const IN_FLIGHT = 128;
const TICK_MS = 5;

/** @type {Map<string, Pending>} */
const pending = new Map();
const intervalNs = BigInt(Math.max(1, Number(process.argv[2] ?? 10))) * 1_000_000n;
const rate = Math.max(1, Number(process.argv[3] ?? 400));
let inFlight = 0;
/** @type {ReturnType<typeof setInterval> | undefined} */
let ticker;
/** Connections the rate still allows (a token bucket of up to one tick's worth). */
let budget = 0;
/** Where the round robin over the pending changes goes on. */
let next = 0;

/** @param {Record<string, unknown>} msg */
const answer = (msg) => process.stdout.write(`${JSON.stringify(msg)}\n`);

/**
 * One connection and request; the backend that answered ("name:port") or undefined.
 * @param {string} host @param {number} port
 * @returns {Promise<string | undefined>}
 */
function attempt(host, port) {
  return new Promise((resolve) => {
    const sock = connect({ host, port });
    let buf = '';
    let done = false;
    /** @param {string | undefined} endpoint */
    const finish = (endpoint) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve(endpoint);
    };
    const timer = setTimeout(() => finish(undefined), ATTEMPT_TIMEOUT_MS);
    sock.setEncoding('utf8');
    sock.on('connect', () => sock.write(`GET / HTTP/1.0\r\nHost: ${host}\r\nConnection: close\r\n\r\n`));
    sock.on('data', (d) => (buf += d));
    sock.on('end', () => {
      try {
        const reply = JSON.parse(buf.slice(buf.indexOf('\r\n\r\n') + 4));
        finish(`${reply.backend}:${reply.port}`);
      } catch {
        finish(undefined);
      }
    });
    sock.on('error', () => finish(undefined));
    sock.on('close', () => finish(undefined));
  });
}

/** @param {Pending} p */
function probe(p) {
  const sent = process.hrtime.bigint();
  p.lastSent = sent;
  const i = p.order.push(sent);
  inFlight++;
  void attempt(p.host, p.port).then((endpoint) => {
    inFlight--;
    if (p.over) return;
    p.last = endpoint;
    const at = p.order.settle(i, endpoint !== undefined && (p.endpoint === '*' || endpoint === p.endpoint));
    if (at !== undefined) {
      p.over = true;
      pending.delete(p.key);
      answer({ id: p.id, ok: true, at: String(at) });
    }
  });
}

/** Start the connections the pace and the budget allow; answer the changes past their deadline. */
function tick() {
  if (pending.size === 0) {
    clearInterval(ticker);
    ticker = undefined;
    return;
  }
  // Up to 4 ticks' worth, so that a late timer (a busy machine) loses little of the rate.
  budget = Math.min(budget + (rate * TICK_MS) / 1000, Math.max(1, (4 * rate * TICK_MS) / 1000));
  const now = process.hrtime.bigint();
  const all = [...pending.values()];
  const start = next;
  for (let k = 0; k < all.length && budget >= 1 && inFlight < IN_FLIGHT; k++) {
    const p = all[(start + k) % all.length];
    if (p === undefined) continue;
    if (now > p.deadline) {
      p.over = true;
      pending.delete(p.key);
      answer({ id: p.id, ok: false, error: `${p.host}:${p.port} did not land on ${p.endpoint}; last answer ${p.last ?? 'none'}` });
      continue;
    }
    if (now - p.lastSent < p.interval || p.order.inFlight >= PER_KEY_IN_FLIGHT) continue;
    budget--;
    next = (start + k + 1) % all.length;
    probe(p);
  }
}

for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === '') continue;
  const cmd = JSON.parse(line);
  if (cmd.op === 'ping') answer({ id: cmd.id, ok: true });
  else if (cmd.op === 'expect') {
    const before = pending.get(cmd.key);
    if (before) {
      before.over = true;
      answer({ id: before.id, ok: false, superseded: true });
    }
    const deadline = process.hrtime.bigint() + BigInt(cmd.deadlineMs) * 1_000_000n;
    const interval = typeof cmd.intervalMs === 'number' && cmd.intervalMs > 0 ? BigInt(Math.round(cmd.intervalMs * 1e6)) : intervalNs;
    pending.set(cmd.key, { id: cmd.id, key: cmd.key, host: cmd.host, port: cmd.port, endpoint: cmd.endpoint, deadline, interval, order: new SendOrder(1), lastSent: 0n, last: undefined, over: false });
    ticker ??= setInterval(tick, TICK_MS);
  } else answer({ id: cmd.id, ok: false, error: `unknown op ${cmd.op}` });
}
process.exit(0);
