// @ts-check
/**
 * The benchmark's data-path clock, run by datapath.ts inside the client
 * namespace for a whole benchmark size. Plain JavaScript so that it needs
 * nothing but node.
 *
 * Reads one JSON command per line on stdin and answers one JSON line each on
 * stdout, with the same `id`:
 *
 *   {"id":1,"op":"ping"}                       -> {"id":1,"ok":true}
 *   {"id":2,"op":"until","until":"lands","host":"10.110.0.10","port":80,
 *    "endpoint":"b2:8080","consecutive":1,"attemptTimeoutMs":1000,"deadlineMs":30000}
 *      -> {"id":2,"ok":true,"at":"<ns>","tries":3}
 *      or {"id":2,"ok":false,"error":"...","tries":N}
 *
 * `until` makes new TCP connections back to back (each a fresh socket and
 * one HTTP/1.0 GET to an echo server, which names itself and its port) until
 * `consecutive` connections in a row qualify:
 *   lands    answered by `endpoint` ("<backend>:<port>");
 *   avoids   answered, by another endpoint than `endpoint`;
 *   answers  answered at all;
 *   fails    not answered (refused, unreachable, reset or no answer within attemptTimeoutMs).
 * `at` is process.hrtime.bigint() (CLOCK_MONOTONIC, the same clock in every
 * process of the machine) taken just before the first qualifying
 * connection of the run was opened.
 *
 * With `"intervalMs":N` (> 0) the connections are paced instead: a new one
 * starts every N ms without waiting for those before (at most
 * `maxInFlight`, default 32, at once), and the run is counted by send order
 * (send-order.mjs): `at` is the send time of the first connection of the
 * first run of `consecutive` qualifying ones, known once every connection
 * sent before it has finished. So a connection whose SYN was dropped, which
 * waits out its `attemptTimeoutMs`, does not hold back the next one: the
 * resolution is about N ms whatever the proxy does. Keep `attemptTimeoutMs`
 * under TCP's first SYN retransmission (1 s), so that a connection sent
 * before the change cannot qualify through its retransmitted SYN.
 */
import { connect } from 'node:net';
import { createInterface } from 'node:readline';
import { SendOrder } from './send-order.mjs';

/** @typedef {{ ok: true, sent: bigint, endpoint: string } | { ok: false, sent: bigint, code: string }} Attempt */

/**
 * One connection and request.
 * @param {string} host @param {number} port @param {number} timeoutMs
 * @returns {Promise<Attempt>}
 */
function attempt(host, port, timeoutMs) {
  return new Promise((resolve) => {
    const sent = process.hrtime.bigint();
    const sock = connect({ host, port });
    let buf = '';
    let done = false;
    /** @param {{ ok: true, endpoint: string } | { ok: false, code: string }} r */
    const finish = (r) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ ...r, sent });
    };
    const timer = setTimeout(() => finish({ ok: false, code: 'ETIMEDOUT' }), timeoutMs);
    sock.setEncoding('utf8');
    sock.on('connect', () => sock.write(`GET / HTTP/1.0\r\nHost: ${host}\r\nConnection: close\r\n\r\n`));
    sock.on('data', (d) => (buf += d));
    sock.on('end', () => {
      const body = buf.slice(buf.indexOf('\r\n\r\n') + 4);
      try {
        const reply = JSON.parse(body);
        finish({ ok: true, endpoint: `${reply.backend}:${reply.port}` });
      } catch {
        finish({ ok: false, code: 'EBADREPLY' });
      }
    });
    sock.on('error', (err) => finish({ ok: false, code: /** @type {{ code?: string }} */ (err).code ?? 'EUNKNOWN' }));
    sock.on('close', () => finish({ ok: false, code: 'ECONNCLOSED' }));
  });
}

/**
 * Whether attempt `r` qualifies for `cmd`.
 * @param {{ until: string, endpoint?: string }} cmd @param {Attempt} r
 */
function qualifies(cmd, r) {
  return cmd.until === 'lands' ? r.ok && r.endpoint === cmd.endpoint
    : cmd.until === 'avoids' ? r.ok && r.endpoint !== cmd.endpoint
    : cmd.until === 'answers' ? r.ok
    : !r.ok;
}

/**
 * @typedef {{ until: string, host: string, port: number, endpoint?: string, consecutive: number,
 *             attemptTimeoutMs: number, deadlineMs: number, intervalMs?: number, maxInFlight?: number }} UntilCmd
 */

/**
 * `until` with paced connections (see the module comment).
 * @param {UntilCmd} cmd
 */
function paced(cmd) {
  const interval = /** @type {number} */ (cmd.intervalMs);
  const maxInFlight = Math.max(1, cmd.maxInFlight ?? 32);
  const need = Math.max(1, cmd.consecutive);
  const deadline = process.hrtime.bigint() + BigInt(cmd.deadlineMs) * 1_000_000n;
  const order = new SendOrder(need);
  /** @type {Record<string, number>} */
  const seen = {};
  let tries = 0;
  return new Promise((resolve) => {
    let over = false;
    /** @param {Record<string, unknown>} out */
    const end = (out) => {
      if (over) return;
      over = true;
      clearInterval(ticker);
      resolve(out);
    };
    const tick = () => {
      if (over) return;
      if (process.hrtime.bigint() >= deadline) {
        if (order.inFlight === 0) end({ ok: false, error: `no ${need} connection(s) in a row that ${cmd.until} within ${cmd.deadlineMs} ms; seen ${JSON.stringify(seen)}`, tries });
        return;
      }
      if (order.inFlight >= maxInFlight) return;
      const sent = process.hrtime.bigint();
      const i = order.push(sent);
      tries++;
      void attempt(cmd.host, cmd.port, cmd.attemptTimeoutMs).then((r) => {
        const what = r.ok ? r.endpoint : r.code;
        seen[what] = (seen[what] ?? 0) + 1;
        const at = order.settle(i, qualifies(cmd, r));
        if (at !== undefined) end({ ok: true, at: String(at), tries });
        else if (process.hrtime.bigint() >= deadline) tick();
      });
    };
    const ticker = setInterval(tick, interval);
    tick();
  });
}

/** @param {UntilCmd} cmd */
async function until(cmd) {
  if ((cmd.intervalMs ?? 0) > 0) return paced(cmd);
  const deadline = process.hrtime.bigint() + BigInt(cmd.deadlineMs) * 1_000_000n;
  const need = Math.max(1, cmd.consecutive);
  /** @type {Record<string, number>} */
  const seen = {};
  let tries = 0;
  let run = 0;
  let runStart = 0n;
  while (process.hrtime.bigint() < deadline) {
    const r = await attempt(cmd.host, cmd.port, cmd.attemptTimeoutMs);
    tries++;
    const what = r.ok ? r.endpoint : r.code;
    seen[what] = (seen[what] ?? 0) + 1;
    if (!qualifies(cmd, r)) {
      run = 0;
      continue;
    }
    if (run === 0) runStart = r.sent;
    if (++run >= need) return { ok: true, at: String(runStart), tries };
  }
  return { ok: false, error: `no ${need} connection(s) in a row that ${cmd.until} within ${cmd.deadlineMs} ms; seen ${JSON.stringify(seen)}`, tries };
}

for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === '') continue;
  const cmd = JSON.parse(line);
  const out = cmd.op === 'ping' ? { ok: true } : cmd.op === 'until' ? await until(cmd) : { ok: false, error: `unknown op ${cmd.op}` };
  process.stdout.write(JSON.stringify({ id: cmd.id, ...out }) + '\n');
}
