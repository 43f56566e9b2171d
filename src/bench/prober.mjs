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
 */
import { connect } from 'node:net';
import { createInterface } from 'node:readline';

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
 * @param {{ until: string, host: string, port: number, endpoint?: string, consecutive: number,
 *           attemptTimeoutMs: number, deadlineMs: number }} cmd
 */
async function until(cmd) {
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
    const good =
      cmd.until === 'lands' ? r.ok && r.endpoint === cmd.endpoint
      : cmd.until === 'avoids' ? r.ok && r.endpoint !== cmd.endpoint
      : cmd.until === 'answers' ? r.ok
      : !r.ok;
    if (!good) {
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
