// @ts-check
/**
 * HTTP echo server run inside a backend namespace by the testbed:
 *
 *   node src/testbed/echo-server.mjs --name b1 --ip 10.244.1.2 --ports 9090,9091 [--udp-ports 5353]
 *
 * Plain JavaScript (types via JSDoc) so that it starts fast and needs nothing
 * but node. Listens on 0.0.0.0 on every port (on :: for both families when
 * given `--ip6 ADDRESS`) and answers each request with an EchoReply
 * (protocol.ts) as JSON, whose `ip` is the address the request came to; on
 * every `--udp-ports` port it answers each datagram with an EchoReply
 * datagram the same way. Prints `READY` on stdout once all ports
 * listen, and exits when its stdin closes, so it never outlives the testbed.
 */
import { createSocket } from 'node:dgram';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

/** @typedef {import('./protocol.ts').EchoReply} EchoReply */

/**
 * The reply to a request that came from `remote`:`remotePort` to `local`.
 * @param {string} name @param {string} ip @param {string | undefined} ip6 @param {number} port
 * @param {string} local @param {string} remote @param {number} remotePort
 * @returns {EchoReply}
 */
function echoReply(name, ip, ip6, port, local, remote, remotePort) {
  return {
    backend: name,
    ip: ip6 !== undefined && local.includes(':') && !local.startsWith('::ffff:') ? ip6 : ip,
    port,
    client: remote.replace(/^::ffff:/, ''),
    clientPort: remotePort,
  };
}

/**
 * @param {string} name
 * @param {string} ip
 * @param {string | undefined} ip6
 * @param {number} port
 * @returns {Promise<import('node:http').Server>}
 */
function listen(name, ip, ip6, port) {
  const server = createServer((req, res) => {
    const reply = echoReply(name, ip, ip6, port, req.socket.localAddress ?? '', req.socket.remoteAddress ?? '', req.socket.remotePort ?? 0);
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

/**
 * A UDP echo on `port`: every datagram is answered with one EchoReply datagram
 * (its `ip` the IPv6 address when the datagram came over IPv6).
 * @param {string} name @param {string} ip @param {string | undefined} ip6 @param {number} port
 * @returns {Promise<import('node:dgram').Socket>}
 */
function listenUdp(name, ip, ip6, port) {
  const sock = createSocket({ type: ip6 === undefined ? 'udp4' : 'udp6' });
  sock.on('message', (_msg, rinfo) => {
    const local = rinfo.family === 'IPv6' && !rinfo.address.startsWith('::ffff:') ? '::' : '0.0.0.0';
    sock.send(JSON.stringify(echoReply(name, ip, ip6, port, local, rinfo.address, rinfo.port)), rinfo.port, rinfo.address);
  });
  return new Promise((resolve, reject) => {
    sock.once('error', reject);
    sock.bind(port, ip6 === undefined ? '0.0.0.0' : '::', () => resolve(sock));
  });
}

async function main() {
  const { values } = parseArgs({
    options: { name: { type: 'string' }, ip: { type: 'string' }, ip6: { type: 'string' }, ports: { type: 'string' }, 'udp-ports': { type: 'string' } },
  });
  const { name, ip, ip6, ports } = values;
  if (!name || !ip || !ports) throw new Error('usage: echo-server --name NAME --ip IP [--ip6 IP6] --ports P1,P2 [--udp-ports P3,P4]');
  const udpPorts = values['udp-ports'] ? values['udp-ports'].split(',') : [];
  await Promise.all([...ports.split(',').map((p) => listen(name, ip, ip6, Number(p))), ...udpPorts.map((p) => listenUdp(name, ip, ip6, Number(p)))]);
  process.stdin.on('end', () => process.exit(0)).on('close', () => process.exit(0)).resume();
  process.stdout.write('READY\n');
}

main().catch((err) => {
  process.stderr.write(`echo-server: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
