/**
 * The way from a node namespace to the API server on the host's loopback,
 * for proxies that run inside the namespace (kube-proxy, and drover beside
 * it the same way): a Unix socket served by this process and joined to the
 * API server's TCP port, and netns-forward.mjs inside the namespace
 * listening on 127.0.0.1:PORT and joining each connection to that socket.
 * The API server's certificate names 127.0.0.1, which stays true inside
 * the namespace. Nothing is added to any namespace's links or routes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, createServer, type Server } from 'node:net';
import { fileURLToPath } from 'node:url';
import { joinSockets } from './join.mjs';

const FORWARD = fileURLToPath(new URL('./netns-forward.mjs', import.meta.url));

/** A Unix socket at `path` whose connections are joined to 127.0.0.1:`apiPort`; close it with `server.close()`. */
export async function serveApiSocket(path: string, apiPort: number): Promise<Server> {
  const server = createServer((inbound) => joinSockets(inbound, connect(apiPort, '127.0.0.1')));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, resolve);
  });
  return server;
}

/**
 * Start netns-forward.mjs in `netns`: 127.0.0.1:`port` there → Unix socket `socket`.
 * Resolves once it listens; the child ends when its stdin closes (or with the namespace's teardown).
 * @throws Error with its stderr when it exits first or does not listen within 15 s.
 */
export async function startForwarder(netns: string, port: number, socket: string): Promise<ChildProcess> {
  const child = spawn('ip', ['netns', 'exec', netns, process.execPath, FORWARD, String(port), socket], { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`netns-forward in ${netns}: not listening after 15 s: ${err}`)), 15_000);
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      if (d.includes('READY')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`netns-forward in ${netns} exited (${String(code)}): ${err}`));
    });
  });
  return child;
}
