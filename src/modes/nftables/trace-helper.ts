/**
 * The helper process of `drover trace --kernel` (kernel-trace.ts starts it,
 * with `ip netns exec` when the trace is of another namespace, since a
 * netlink socket and a probe act in the namespace of the process that
 * opens them). One job per process, given as arguments:
 *
 *   trace-helper listen
 *     joins NFNLGRP_NFTRACE on a NETLINK_NETFILTER socket, prints `ready`,
 *     then one line `d HEX` per datagram received (the trace events,
 *     decoded by the caller with netlink/trace-codec.ts); exits when its
 *     stdin closes, or after 60 s.
 *   trace-helper send JSON
 *     sends one probe ({@link ProbeSpec}): a TCP SYN (a connect() from
 *     src:sport, given up after `waitMs`) or one UDP datagram; prints one
 *     line of JSON, {@link ProbeOutcome}.
 *
 * Everything it is given was validated by the caller; it checks the probe
 * again (addresses, ports) before a socket is opened.
 */
import { createSocket } from 'node:dgram';
import { connect } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseIP } from '../../model/addr.ts';
import { NFNLGRP_NFTRACE } from '../../kernel/nftables/constants.ts';
import { openNfnlTransport } from '../../kernel/nftables/transport.ts';

/** One probe packet: the first packet of a new connection from `src:sport` (IPv4 or IPv6, both of one family). */
export interface ProbeSpec {
  readonly proto: 'tcp' | 'udp';
  readonly src: string;
  readonly sport: number;
  readonly dst: string;
  readonly dport: number;
  /** How long a TCP probe waits for an answer, ms. */
  readonly waitMs: number;
}

/** What became of a probe, as the sender saw it. */
export interface ProbeOutcome {
  /** "connected", "sent" (UDP), "timeout", or the socket error's code (ECONNREFUSED, EADDRNOTAVAIL, …). */
  readonly result: string;
}

/** Receive buffer of the listening socket, bytes (the kernel caps it at net.core.rmem_max). */
const LISTEN_RCVBUF = 4 * 1024 * 1024;
/** Longest life of a listener whose caller forgot it, ms. */
const LISTEN_MAX_MS = 60_000;

function isPort(p: unknown): p is number {
  return typeof p === 'number' && Number.isInteger(p) && p >= 1 && p <= 65535;
}

/**
 * Read a probe from its JSON argument.
 * @throws Error naming the field that is missing or not valid.
 */
export function parseProbeSpec(text: string): ProbeSpec {
  const p = JSON.parse(text) as Record<string, unknown>;
  if (p.proto !== 'tcp' && p.proto !== 'udp') throw new Error(`probe: proto ${JSON.stringify(p.proto)} is not tcp or udp`);
  const family = (f: 'src' | 'dst') => (typeof p[f] === 'string' && parseIP(p[f])?.text === p[f] ? parseIP(p[f])!.family : undefined);
  for (const f of ['src', 'dst'] as const) if (family(f) === undefined) throw new Error(`probe: ${f} ${JSON.stringify(p[f])} is not a canonical IPv4 or IPv6 address`);
  if (family('src') !== family('dst')) throw new Error(`probe: src ${String(p.src)} and dst ${String(p.dst)} are of different IP families`);
  for (const f of ['sport', 'dport'] as const) if (!isPort(p[f])) throw new Error(`probe: ${f} ${JSON.stringify(p[f])} is not a port`);
  if (typeof p.waitMs !== 'number' || !(p.waitMs > 0 && p.waitMs <= 10_000)) throw new Error(`probe: waitMs ${JSON.stringify(p.waitMs)} is not 1-10000`);
  return p as unknown as ProbeSpec;
}

/** Send probe `p` from this process's namespace. */
export function sendProbe(p: ProbeSpec): Promise<ProbeOutcome> {
  return new Promise((resolve) => {
    if (p.proto === 'udp') {
      const sock = createSocket(p.dst.includes(':') ? 'udp6' : 'udp4');
      const done = (result: string) => {
        sock.close();
        resolve({ result });
      };
      sock.once('error', (err: NodeJS.ErrnoException) => done(err.code ?? 'EUNKNOWN'));
      sock.bind({ address: p.src, port: p.sport, exclusive: true }, () => {
        sock.send('drover trace --kernel probe\n', p.dport, p.dst, (err) => done(err ? ((err as NodeJS.ErrnoException).code ?? 'EUNKNOWN') : 'sent'));
      });
      return;
    }
    const sock = connect({ host: p.dst, port: p.dport, localAddress: p.src, localPort: p.sport });
    const timer = setTimeout(() => done('timeout'), p.waitMs);
    function done(result: string) {
      clearTimeout(timer);
      sock.destroy();
      resolve({ result });
    }
    sock.once('connect', () => done('connected'));
    sock.once('error', (err: NodeJS.ErrnoException) => done(err.code ?? 'EUNKNOWN'));
  });
}

/** Listen for trace events until stdin closes (module comment). */
function listen(): void {
  const transport = openNfnlTransport(LISTEN_RCVBUF, 64 * 1024, [NFNLGRP_NFTRACE]);
  transport.onDatagram((d) => process.stdout.write(`d ${d.toString('hex')}\n`));
  transport.onError((err) => process.stdout.write(`e ${JSON.stringify(err.message)}\n`));
  const stop = () => {
    transport.close();
    process.exit(0);
  };
  setTimeout(stop, LISTEN_MAX_MS).unref();
  createInterface({ input: process.stdin }).on('close', stop).on('line', () => undefined);
  process.stdout.write('ready\n');
}

async function main(argv: readonly string[]): Promise<void> {
  const [job, arg] = argv;
  if (job === 'listen') return listen();
  if (job === 'send' && arg !== undefined) {
    process.stdout.write(`${JSON.stringify(await sendProbe(parseProbeSpec(arg)))}\n`);
    return;
  }
  throw new Error('usage: trace-helper listen | trace-helper send JSON');
}

// Run as a program (not when a test imports it).
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.argv.slice(2)).catch((err: Error) => {
    process.stderr.write(`trace-helper: ${err.message}\n`);
    process.exit(1);
  });
}
