// @ts-check
/**
 * Client side of the testbed, run inside a namespace by probe.ts. Plain
 * JavaScript (types via JSDoc) so that it starts fast and needs only node.
 *
 *   probe-cli.mjs probe   stdin: ProbeRequest JSON; makes `count` sequential
 *                         requests, each on a new TCP connection (no keep-alive),
 *                         prints a ProbeSummary JSON on stdout.
 *   probe-cli.mjs serve   `probe` for every line read on stdin, each line a
 *                         ProbeRequest JSON with an `id`; the lines are served
 *                         at once, each as `probe` serves its request, and each
 *                         answered, when done, by one line {id, summary}
 *                         (or {id, error}); exits once stdin closes and every
 *                         answer is out.
 *   probe-cli.mjs hold HOST PORT TIMEOUT_MS
 *                         opens ONE TCP connection; for every line read on stdin
 *                         sends a request on it and prints a RequestResult JSON
 *                         line; exits when stdin closes (closing the connection).
 *   probe-cli.mjs traffic REQUEST_JSON
 *                         steady traffic while stdin is open: long-lived connections
 *                         exchanging requests, and a new connection per interval;
 *                         READY once the long-lived ones are up, a TrafficSummary
 *                         JSON line when stdin closes. With `"protocol": "udp"`,
 *                         UDP flows: a socket kept per long-lived flow, a fresh
 *                         source port per new one.
 *   probe-cli.mjs udp HOST PORT SOURCE_PORTS TIMEOUT_MS
 *                         one datagram from each of SOURCE_PORTS (comma-separated),
 *                         one after the other, to HOST:PORT; prints one line per
 *                         port, in order: the RequestResult of the first datagram
 *                         answered (an EchoReply), or ETIMEDOUT after TIMEOUT_MS.
 */
import { createSocket } from 'node:dgram';
import { request } from 'node:http';
import { connect } from 'node:net';
import { createInterface } from 'node:readline';

/** @typedef {import('./protocol.ts').ProbeRequest} ProbeRequest */
/** @typedef {import('./protocol.ts').ProbeSummary} ProbeSummary */
/** @typedef {import('./protocol.ts').RequestResult} RequestResult */
/** @typedef {import('./protocol.ts').TrafficRequest} TrafficRequest */
/** @typedef {import('./protocol.ts').TrafficSummary} TrafficSummary */

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
 * @param {(ms: number) => void} [onConnect] called with Date.now() when the connection is established (its SYN has passed the kernel's hooks by then)
 * @returns {Promise<RequestResult>}
 */
function once(host, port, timeoutMs, onConnect) {
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
    if (onConnect) req.once('socket', (socket) => socket.once('connect', () => onConnect(Date.now())));
    req.end();
  });
}

/** @param {ProbeRequest} input @returns {Promise<ProbeSummary>} */
async function probe(input) {
  /** @type {ProbeSummary} */
  const summary = { counts: {}, errors: {}, clientsSeen: {}, results: [], firstSentMs: 0, firstConnectedMs: 0, lastSentMs: 0, longestGapMs: 0 };
  for (let i = 0; i < input.count; i++) {
    const sent = Date.now();
    let connected = 0;
    if (i === 0) summary.firstSentMs = sent;
    const r = await once(input.host, input.port, input.timeoutMs, (ms) => (connected = ms));
    // A connection that never connected: its end bounds when its SYN left.
    connected ||= Date.now();
    if (i === 0) summary.firstConnectedMs = connected;
    else summary.longestGapMs = Math.max(summary.longestGapMs, connected - summary.lastSentMs);
    summary.lastSentMs = sent;
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
 * The bookkeeping of one long-lived flow, one request at a time: `request`
 * calls `send` and resolves with the next `reply` or `fail`, or ETIMEDOUT
 * after `timeoutMs`. A failure or a timeout breaks the flow: every later
 * request gives that code at once.
 * @param {number} timeoutMs @param {() => void} send
 */
function exchange(timeoutMs, send) {
  /** @type {((r: RequestResult) => void) | undefined} */
  let waiter;
  /** @type {string | undefined} */
  let dead;
  /** @param {RequestResult} r */
  const reply = (r) => {
    const w = waiter;
    waiter = undefined;
    w?.(r);
  };
  /** @param {string} code */
  const fail = (code) => {
    dead ??= code;
    reply({ ok: false, code: dead });
  };
  /** @returns {Promise<RequestResult>} */
  const request = () => {
    if (dead) return Promise.resolve({ ok: false, code: dead });
    return new Promise((resolve) => {
      const timer = setTimeout(() => fail('ETIMEDOUT'), timeoutMs);
      waiter = (r) => {
        clearTimeout(timer);
        resolve(r);
      };
      send();
    });
  };
  return { reply, fail, request };
}

/**
 * One TCP connection with minimal HTTP/1.1 over a raw socket, so a broken
 * connection is never silently replaced: each `request` sends a GET on it
 * and resolves with the reply, or the error code once it broke (ETIMEDOUT
 * after `timeoutMs`; every later request then gives that code at once).
 * @param {string} host @param {number} port @param {number} timeoutMs
 */
function openHeld(host, port, timeoutMs) {
  const sock = connect({ host, port });
  const flow = exchange(timeoutMs, () => sock.write(`GET / HTTP/1.1\r\nHost: ${host}:${port}\r\n\r\n`));
  let buf = '';
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
    flow.reply(parseReply(body));
  });
  sock.on('error', (err) => flow.fail(errorCode(err)));
  sock.on('close', () => flow.fail('ECONNCLOSED'));
  return { request: flow.request, destroy: () => sock.destroy() };
}

/**
 * One UDP flow kept on one source port (the kernel's choice), so that every
 * datagram of it follows one conntrack entry: each `request` sends a
 * datagram and resolves with the reply, or ETIMEDOUT after `timeoutMs`
 * (the flow then counts as broken: every later request gives that code).
 * The socket is connected to `host:port`, as a UDP client's usually is:
 * the kernel drops a reply from any other source (one that lost its
 * reverse NAT comes from the endpoint's own address), so it times out
 * instead of passing, and an ICMP error for the flow (a REJECT's port
 * unreachable) breaks it with ECONNREFUSED, as a reset breaks a TCP one.
 * @param {string} host @param {number} port @param {number} timeoutMs
 */
function openHeldUdp(host, port, timeoutMs) {
  const sock = createSocket({ type: host.includes(':') ? 'udp6' : 'udp4' });
  const flow = exchange(timeoutMs, () => sock.send('q'));
  sock.on('message', (msg) => flow.reply(parseReply(msg.toString('utf8'))));
  sock.on('error', (err) => flow.fail(errorCode(err)));
  // dgram cannot send on a socket still connecting: requests wait for it.
  const connected = new Promise((resolve) =>
    sock.connect(port, host, (err) => {
      if (err) flow.fail(errorCode(err));
      resolve(undefined);
    }),
  );
  return { request: () => connected.then(flow.request), destroy: () => sock.close() };
}

/**
 * `hold`: one connection; a request on it per stdin line.
 * @param {string} host @param {number} port @param {number} timeoutMs
 */
async function hold(host, port, timeoutMs) {
  const conn = openHeld(host, port, timeoutMs);
  for await (const _line of createInterface({ input: process.stdin })) {
    process.stdout.write(JSON.stringify(await conn.request()) + '\n');
  }
  conn.destroy();
}

/**
 * `traffic`: open `input.held` connections and make a first request on each,
 * print `READY` (or `FAILED CODE` and exit when one fails); then, every
 * `input.intervalMs` until stdin closes, make one request on a new
 * connection (deadline `input.timeoutMs`) and one on each held connection,
 * still alive (deadline `input.heldTimeoutMs`); finally print a
 * TrafficSummary JSON line.
 * @param {TrafficRequest} input
 */
async function traffic(input) {
  const udp = input.protocol === 'udp';
  const heldTimeoutMs = input.heldTimeoutMs ?? input.timeoutMs;
  const held = Array.from({ length: input.held }, () => (udp ? openHeldUdp : openHeld)(input.host, input.port, heldTimeoutMs));
  const fresh = () => (udp ? udpOnce(input.host, input.port, 0, input.timeoutMs, true) : once(input.host, input.port, input.timeoutMs));
  /** The backend that answered each held connection's first request. */
  const heldOn = new Map();
  const first = await Promise.all(held.map((c) => c.request()));
  for (const [i, r] of first.entries()) {
    if (!r.ok) {
      process.stdout.write(`FAILED ${r.code}\n`);
      process.exit(1);
    }
    heldOn.set(held[i], r.reply.backend);
  }
  process.stdout.write('READY\n');
  let stopped = false;
  process.stdin.on('end', () => (stopped = true)).on('close', () => (stopped = true)).resume();
  /** @type {TrafficSummary} */
  const summary = { attempted: 0, failed: 0, errors: {}, backends: {}, held: input.held, heldBackends: {}, heldRequests: 0, lost: 0, lostErrors: {}, lostBackends: {} };
  for (const b of heldOn.values()) summary.heldBackends[b] = (summary.heldBackends[b] ?? 0) + 1;
  const alive = new Set(held);
  while (!stopped) {
    const [one, ...onHeld] = await Promise.all([fresh(), ...[...alive].map((c) => c.request().then((r) => ({ c, r })))]);
    summary.attempted++;
    if (one.ok) summary.backends[one.reply.backend] = (summary.backends[one.reply.backend] ?? 0) + 1;
    else {
      summary.failed++;
      summary.errors[one.code] = (summary.errors[one.code] ?? 0) + 1;
    }
    for (const { c, r } of onHeld) {
      summary.heldRequests++;
      // A TCP connection cannot change backends; a UDP flow whose conntrack entry was replaced can.
      if (r.ok && r.reply.backend === heldOn.get(c)) continue;
      const code = r.ok ? 'EMOVED' : r.code;
      alive.delete(c);
      summary.lost++;
      summary.lostErrors[code] = (summary.lostErrors[code] ?? 0) + 1;
      const b = heldOn.get(c);
      summary.lostBackends[b] = (summary.lostBackends[b] ?? 0) + 1;
    }
    await new Promise((resolve) => setTimeout(resolve, input.intervalMs));
  }
  for (const c of held) c.destroy();
  process.stdout.write(JSON.stringify(summary) + '\n');
}

/**
 * `udp`: one datagram from `sourcePort` to `host:port`, and the reply;
 * with `strict`, a reply from another address or port than `host:port`
 * (as the socket reports it) fails it with EWRONGSOURCE.
 * @param {string} host @param {number} port @param {number} sourcePort @param {number} timeoutMs @param {boolean} [strict]
 * @returns {Promise<RequestResult>}
 */
function udpOnce(host, port, sourcePort, timeoutMs, strict = false) {
  const sock = createSocket({ type: host.includes(':') ? 'udp6' : 'udp4' });
  return new Promise((resolve) => {
    /** @param {RequestResult} r */
    const done = (r) => {
      clearTimeout(timer);
      sock.close();
      resolve(r);
    };
    const timer = setTimeout(() => done({ ok: false, code: 'ETIMEDOUT' }), timeoutMs);
    // strict: a reply from another address or port than host:port (a lost reverse NAT) fails the datagram.
    sock.on('message', (msg, from) => done(strict && (from.address !== host || from.port !== port) ? { ok: false, code: 'EWRONGSOURCE' } : parseReply(msg.toString('utf8'))));
    sock.on('error', (err) => done({ ok: false, code: errorCode(err) }));
    sock.bind(sourcePort, () => sock.send('q', port, host));
  });
}

async function main() {
  const [mode, host, port, timeoutMs] = process.argv.slice(2);
  const [, , , sourcePort, udpTimeoutMs] = process.argv.slice(2);
  if (mode === 'probe') {
    let input = '';
    for await (const chunk of process.stdin) input += String(chunk);
    process.stdout.write(JSON.stringify(await probe(JSON.parse(input))) + '\n');
  } else if (mode === 'serve') {
    for await (const line of createInterface({ input: process.stdin })) {
      if (line.trim() === '') continue;
      /** @type {ProbeRequest & { id: number }} */
      const { id, ...request } = JSON.parse(line);
      probe(request).then(
        (summary) => process.stdout.write(JSON.stringify({ id, summary }) + '\n'),
        (err) => process.stdout.write(JSON.stringify({ id, error: err instanceof Error ? err.message : String(err) }) + '\n'),
      );
    }
  } else if (mode === 'hold' && host && port && timeoutMs) {
    await hold(host, Number(port), Number(timeoutMs));
  } else if (mode === 'traffic' && host) {
    await traffic(JSON.parse(host));
  } else if (mode === 'udp' && host && port && sourcePort && udpTimeoutMs) {
    for (const p of sourcePort.split(',')) process.stdout.write(JSON.stringify(await udpOnce(host, Number(port), Number(p), Number(udpTimeoutMs))) + '\n');
  } else {
    throw new Error('usage: probe-cli probe < request.json | probe-cli serve | probe-cli hold HOST PORT TIMEOUT_MS | probe-cli traffic REQUEST_JSON | probe-cli udp HOST PORT SOURCE_PORTS TIMEOUT_MS');
  }
}

main().catch((err) => {
  process.stderr.write(`probe-cli: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
