// @ts-check
/**
 * The inner half of the peer bench's way from a node namespace to the API
 * server: run inside the namespace (`ip netns exec NS node netns-forward.mjs
 * PORT SOCKET`), it listens on 127.0.0.1:PORT there and joins each
 * connection to the Unix socket SOCKET, whose other end (api-bridge.ts, in
 * the bench's own process) connects to the API server on the host's
 * loopback. A Unix socket in the file system belongs to no network
 * namespace, so no link, address or route is made for it. Prints READY once
 * listening.
 */
import { connect, createServer } from 'node:net';
import { joinSockets } from './join.mjs';

const [port, socket] = process.argv.slice(2);
if (!port || !/^\d+$/.test(port) || !socket) {
  process.stderr.write('usage: netns-forward.mjs PORT UNIX_SOCKET\n');
  process.exit(2);
}
const server = createServer((inbound) => joinSockets(inbound, connect(socket)));
server.listen(Number(port), '127.0.0.1', () => process.stdout.write('READY\n'));
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
