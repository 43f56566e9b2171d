/** A DNS client for tests: one message over UDP or TCP to a server on loopback, the answer decoded by dns-packet. */
import { createSocket } from 'node:dgram';
import { connect } from 'node:net';
import * as dns from 'dns-packet';

/** Where and how to send: the server's address and port, the transport, the source address (UDP), and how long to wait, ms. */
export interface AskOptions {
  readonly address?: string;
  readonly port: number;
  readonly tcp?: boolean;
  readonly from?: string;
  readonly timeoutMs?: number;
}

/** Send the raw bytes `msg`; the raw answer, or undefined when none came within the timeout. */
export function askRaw(msg: Buffer, opts: AskOptions): Promise<Buffer | undefined> {
  const address = opts.address ?? '127.0.0.1';
  const timeoutMs = opts.timeoutMs ?? 5000;
  return new Promise((resolve) => {
    if (opts.tcp) {
      let got = Buffer.alloc(0);
      const socket = connect({ host: address, port: opts.port });
      const timer = setTimeout(() => finish(undefined), timeoutMs);
      const finish = (out: Buffer | undefined) => {
        clearTimeout(timer);
        socket.destroy();
        resolve(out);
      };
      socket.on('connect', () => {
        const prefix = Buffer.alloc(2);
        prefix.writeUInt16BE(msg.length);
        socket.write(Buffer.concat([prefix, msg]));
      });
      socket.on('data', (chunk) => {
        got = Buffer.concat([got, chunk]);
        if (got.length >= 2 && got.length >= 2 + got.readUInt16BE(0)) finish(got.subarray(2, 2 + got.readUInt16BE(0)));
      });
      socket.on('error', () => finish(undefined));
      socket.on('close', () => finish(undefined));
      return;
    }
    const socket = createSocket('udp4');
    const timer = setTimeout(() => finish(undefined), timeoutMs);
    const finish = (out: Buffer | undefined) => {
      clearTimeout(timer);
      socket.close();
      resolve(out);
    };
    socket.on('message', (m) => finish(m));
    socket.bind({ address: opts.from ?? '127.0.0.1', port: 0 }, () => socket.send(msg, opts.port, address));
  });
}

/** Ask `name`/`type` (with EDNS when `edns` gives a UDP size); the decoded answer, or undefined on a timeout. */
export async function ask(name: string, type: dns.RecordType | 'ANY', opts: AskOptions & { edns?: number; id?: number }): Promise<dns.DecodedPacket | undefined> {
  const msg = dns.encode({
    type: 'query',
    id: opts.id ?? 4242,
    flags: dns.RECURSION_DESIRED,
    questions: [{ name, type: type as dns.RecordType, class: 'IN' }],
    ...(opts.edns !== undefined ? { additionals: [{ type: 'OPT', name: '.', udpPayloadSize: opts.edns, flags: 0, options: [] } as unknown as dns.Answer] } : {}),
  });
  const out = await askRaw(msg, opts);
  return out === undefined ? undefined : dns.decode(out);
}

/** The rcode of a decoded answer. */
export function rcode(p: dns.DecodedPacket | undefined): string | undefined {
  return (p as { rcode?: string } | undefined)?.rcode;
}

/** The data of an answer's records, in order. */
export function datas(p: dns.DecodedPacket | undefined): unknown[] {
  return (p?.answers ?? []).map((a) => (a as { data: unknown }).data);
}
