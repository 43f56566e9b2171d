// @ts-check
/**
 * Client side of the testbed, run inside a namespace by probe.ts. Plain
 * JavaScript (types via JSDoc) so that it starts fast and needs only node.
 *
 *   probe-cli.mjs probe   stdin: ProbeRequest JSON; makes `count` sequential
 *                         requests, each on a new TCP connection (no keep-alive),
 *                         prints a ProbeSummary JSON on stdout.
 *   probe-cli.mjs hold HOST PORT TIMEOUT_MS
 *                         opens ONE TCP connection; for every line read on stdin
 *                         sends a request on it and prints a RequestResult JSON
 *                         line; exits when stdin closes (closing the connection).
 */
import { request } from 'node:http';
import { connect } from 'node:net';
import { createInterface } from 'node:readline';

/** @typedef {import('./protocol.ts').ProbeRequest} ProbeRequest */
/** @typedef {import('./protocol.ts').ProbeSummary} ProbeSummary */
/** @typedef {import('./protocol.ts').RequestResult} RequestResult */

/** @param {unknown} err @returns {string} */
function errorCode(err) {
  const code = /** @type {{ code?: unknown } | null} */ (err)?.code;
  return typeof code === 'string' ? code : 'EUNKNOWN';
}

/** @param {string} body @returns {RequestResult} */
function parseReply(body) {
  try {
    return { ok: true, reply: JSON.parse(body) };
  } catch {
    return { ok: false, code: 'EBADREPLY' };
  }
}

/**
 * One GET on a fresh connection; ETIMEDOUT if connect + response take longer than timeoutMs.
 * @param {string} host @param {number} port @param {number} timeoutMs
 * @returns {Promise<RequestResult>}
 */
function once(host, port, timeoutMs) {
  return new Promise((resolve) => {
    /** @param {RequestResult} r */
    const done = (r) => {
      clearTimeout(timer);
      resolve(r);
    };
    const req = request({ host, port, path: '/', agent: false, headers: { connection: 'close' } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d) => (body += d));
      res.on('end', () => done(res.statusCode === 200 ? parseReply(body) : { ok: false, code: `HTTP_${res.statusCode}` }));
      res.on('error', (err) => done({ ok: false, code: errorCode(err) }));
    });
    const timer = setTimeout(() => req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })), timeoutMs);
    req.on('error', (err) => done({ ok: false, code: errorCode(err) }));
    req.end();
  });
}

/** @param {ProbeRequest} input @returns {Promise<ProbeSummary>} */
async function probe(input) {
  /** @type {ProbeSummary} */
  const summary = { counts: {}, errors: {}, clientsSeen: {}, results: [] };
  for (let i = 0; i < input.count; i++) {
    const r = await once(input.host, input.port, input.timeoutMs);
    summary.results.push(r);
    if (r.ok) {
      const b = r.reply.backend;
      summary.counts[b] = (summary.counts[b] ?? 0) + 1;
      const seen = (summary.clientsSeen[b] ??= []);
      if (!seen.includes(r.reply.client)) seen.push(r.reply.client);
    } else {
      summary.errors[r.code] = (summary.errors[r.code] ?? 0) + 1;
    }
  }
  for (const seen of Object.values(summary.clientsSeen)) seen.sort();
  return summary;
}

/**
 * Minimal HTTP/1.1 over one raw socket, so a broken connection is never silently replaced.
 * @param {string} host @param {number} port @param {number} timeoutMs
 */
async function hold(host, port, timeoutMs) {
  /** @param {RequestResult} r */
  const out = (r) => process.stdout.write(JSON.stringify(r) + '\n');
  const sock = connect({ host, port });
  let buf = '';
  /** @type {((r: RequestResult) => void) | undefined} */
  let waiter;
  /** @type {string | undefined} */
  let dead;
  /** @param {RequestResult} r */
  const settle = (r) => {
    const w = waiter;
    waiter = undefined;
    w?.(r);
  };
  sock.setEncoding('utf8');
  sock.on('data', (d) => {
    buf += d;
    const end = buf.indexOf('\r\n\r\n');
    const len = end < 0 ? null : /content-length:\s*(\d+)/i.exec(buf.slice(0, end));
    if (!len) return;
    const total = end + 4 + Number(len[1]);
    if (buf.length < total) return;
    const body = buf.slice(end + 4, total);
    buf = buf.slice(total);
    settle(parseReply(body));
  });
  sock.on('error', (err) => {
    dead = errorCode(err);
    settle({ ok: false, code: dead });
  });
  sock.on('close', () => {
    dead ??= 'ECONNCLOSED';
    settle({ ok: false, code: dead });
  });
  for await (const _line of createInterface({ input: process.stdin })) {
    if (dead) {
      out({ ok: false, code: dead });
      continue;
    }
    /** @type {RequestResult} */
    const result = await new Promise((resolve) => {
      const timer = setTimeout(() => settle({ ok: false, code: 'ETIMEDOUT' }), timeoutMs);
      waiter = (r) => {
        clearTimeout(timer);
        resolve(r);
      };
      sock.write(`GET / HTTP/1.1\r\nHost: ${host}:${port}\r\n\r\n`);
    });
    out(result);
  }
  sock.destroy();
}

async function main() {
  const [mode, host, port, timeoutMs] = process.argv.slice(2);
  if (mode === 'probe') {
    let input = '';
    for await (const chunk of process.stdin) input += String(chunk);
    process.stdout.write(JSON.stringify(await probe(JSON.parse(input))) + '\n');
  } else if (mode === 'hold' && host && port && timeoutMs) {
    await hold(host, Number(port), Number(timeoutMs));
  } else {
    throw new Error('usage: probe-cli probe < request.json | probe-cli hold HOST PORT TIMEOUT_MS');
  }
}

main().catch((err) => {
  process.stderr.write(`probe-cli: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
