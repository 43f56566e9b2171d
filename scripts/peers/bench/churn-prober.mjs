// @ts-check
/**
 * The peer bench's clock for a stream of changes, run inside the client
 * namespace. Unlike src/bench/prober.mjs, which follows one check at a time,
 * it follows every pending change at once: each round opens one new
 * connection to each pending change's service, all in parallel, and a
 * change is done when a connection lands on the backend it expects.
 *
 * Started as `churn-prober.mjs [ROUND_MS]`: a round starts at least
 * ROUND_MS (default 0) after the one before, so that a long wait (a full
 * sync) does not keep a core busy with refused connections.
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
 * `at` is process.hrtime.bigint() (CLOCK_MONOTONIC, shared by every process
 * of the machine) just before the landing connection was opened. A later
 * `expect` with the same `key` supersedes a pending one (a rolling update
 * moved on before the proxy showed the earlier state). The endpoint `*`
 * expects any answer at all.
 */
import { connect } from 'node:net';
import { createInterface } from 'node:readline';

/** @typedef {{ id: number, key: string, host: string, port: number, endpoint: string, deadline: bigint }} Pending */

/** @type {Map<string, Pending>} */
const pending = new Map();
let looping = false;
const roundMs = Number(process.argv[2] ?? 0);

/** @param {Record<string, unknown>} msg */
const answer = (msg) => process.stdout.write(`${JSON.stringify(msg)}\n`);

/**
 * One connection and request; the backend that answered ("name:port") or undefined.
 * @param {string} host @param {number} port
 * @returns {Promise<{ sent: bigint, endpoint: string | undefined }>}
 */
function attempt(host, port) {
  return new Promise((resolve) => {
    const sent = process.hrtime.bigint();
    const sock = connect({ host, port });
    let buf = '';
    let done = false;
    /** @param {string | undefined} endpoint */
    const finish = (endpoint) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ sent, endpoint });
    };
    const timer = setTimeout(() => finish(undefined), 1000);
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

async function loop() {
  looping = true;
  while (pending.size > 0) {
    const round = [...pending.values()];
    const next = Date.now() + roundMs;
    await Promise.all(
      round.map(async (p) => {
        const r = await attempt(p.host, p.port);
        if (pending.get(p.key) !== p) return;
        if (r.endpoint !== undefined && (p.endpoint === '*' || r.endpoint === p.endpoint)) {
          pending.delete(p.key);
          answer({ id: p.id, ok: true, at: String(r.sent) });
        } else if (process.hrtime.bigint() > p.deadline) {
          pending.delete(p.key);
          answer({ id: p.id, ok: false, error: `${p.host}:${p.port} did not land on ${p.endpoint}; last answer ${r.endpoint ?? 'none'}` });
        }
      }),
    );
    const wait = next - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
  looping = false;
}

for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === '') continue;
  const cmd = JSON.parse(line);
  if (cmd.op === 'ping') answer({ id: cmd.id, ok: true });
  else if (cmd.op === 'expect') {
    const before = pending.get(cmd.key);
    if (before) answer({ id: before.id, ok: false, superseded: true });
    const deadline = process.hrtime.bigint() + BigInt(cmd.deadlineMs) * 1_000_000n;
    pending.set(cmd.key, { id: cmd.id, key: cmd.key, host: cmd.host, port: cmd.port, endpoint: cmd.endpoint, deadline });
    if (!looping) void loop();
  } else answer({ id: cmd.id, ok: false, error: `unknown op ${cmd.op}` });
}
process.exit(0);
