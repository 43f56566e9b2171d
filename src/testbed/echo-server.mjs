// @ts-check
/**
 * HTTP echo server run inside a backend namespace by the testbed:
 *
 *   node src/testbed/echo-server.mjs --name b1 --ip 10.244.1.2 --ports 9090,9091
 *
 * Plain JavaScript (types via JSDoc) so that it starts fast and needs nothing
 * but node. Listens on 0.0.0.0 on every port (on :: for both families when
 * given `--ip6 ADDRESS`) and answers each request with an EchoReply
 * (protocol.ts) as JSON, whose `ip` is the address the request came to. Prints `READY` on stdout once all ports
 * listen, and exits when its stdin closes, so it never outlives the testbed.
 */
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

/** @typedef {import('./protocol.ts').EchoReply} EchoReply */

/**
 * @param {string} name
 * @param {string} ip
 * @param {string | undefined} ip6
 * @param {number} port
 * @returns {Promise<import('node:http').Server>}
 */
function listen(name, ip, ip6, port) {
  const server = createServer((req, res) => {
    const local = req.socket.localAddress ?? '';
    /** @type {EchoReply} */
    const reply = {
      backend: name,
      ip: ip6 !== undefined && local.includes(':') && !local.startsWith('::ffff:') ? ip6 : ip,
      port,
      client: (req.socket.remoteAddress ?? '').replace(/^::ffff:/, ''),
      clientPort: req.socket.remotePort ?? 0,
    };
    const body = JSON.stringify(reply) + '\n';
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  server.keepAliveTimeout = 0; // held connections (graceful-termination tests) stay open
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, ip6 === undefined ? '0.0.0.0' : '::', () => resolve(server));
  });
}

async function main() {
  const { values } = parseArgs({
    options: { name: { type: 'string' }, ip: { type: 'string' }, ip6: { type: 'string' }, ports: { type: 'string' } },
  });
  const { name, ip, ip6, ports } = values;
  if (!name || !ip || !ports) throw new Error('usage: echo-server --name NAME --ip IP [--ip6 IP6] --ports P1,P2');
  await Promise.all(ports.split(',').map((p) => listen(name, ip, ip6, Number(p))));
  process.stdin.on('end', () => process.exit(0)).on('close', () => process.exit(0)).resume();
  process.stdout.write('READY\n');
}

main().catch((err) => {
  process.stderr.write(`echo-server: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
