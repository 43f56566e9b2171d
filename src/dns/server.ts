/**
 * The node's DNS server: UDP and TCP on one address and port, answering
 * the cluster zone (zone.ts) authoritatively and forwarding every other
 * question (forward.ts). Messages are decoded and encoded by dns-packet
 * only.
 *
 * Hostile input never crashes it and never holds memory: a message that
 * does not decode, is a response, or is shorter than a header is dropped
 * (counted as malformed); one with another opcode is NOTIMP, with other than
 * one question FORMERR (RFC 1035 §4.1.1), of a class other than IN, or a
 * zone transfer, REFUSED. `ANY` outside the zone gets RFC 8482's
 * synthesised `HINFO`. A UDP answer fits the client's EDNS size (at least
 * 512 bytes, RFC 1035 §4.2.1; at most 1,232, DNS flag day 2020) or is sent
 * truncated, TC set, so the client asks again over TCP (RFC 7766). Zone
 * answers are synchronous; a forwarded question never delays them. A
 * client may have at most `perClientForwards` forwarded questions in
 * flight (more are dropped), so a flood of names outside the zone from one
 * client cannot take the upstream capacity of the others; TCP connections
 * are bounded in all and per client, and closed after `tcpIdleMs` idle.
 *
 * The common query (one question, at most an EDNS record: simple-query.ts)
 * whose name is the zone's is answered from a bounded cache of encoded
 * answers (zone-answer-cache.ts), emptied whenever the zone changes: a copy
 * with the query's ID, byte for byte what decoding the message and encoding
 * the answer anew would send.
 */
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { createServer, type Server, type Socket } from 'node:net';
import * as dns from 'dns-packet';
import type { Answer, DecodedPacket, Packet, Question } from 'dns-packet';
import type { Forwarder } from './forward.ts';
import { lengthPrefix } from './forward.ts';
import { rcodeOf } from './cache.ts';
import type { Zone, QuestionType } from './zone.ts';
import { readSimpleQuery } from './simple-query.ts';
import { DEFAULT_ZONE_ANSWER_CACHE_LIMITS, ZoneAnswerCache, zoneAnswerKey, type CachedAnswer, type ZoneAnswerCacheLimits } from './zone-answer-cache.ts';
import type { Logger } from '../util/log.ts';

/** Bytes of answers waiting for a TCP client to read them before drover stops reading that client's questions (backpressure). */
export const TCP_PENDING_PAUSE = 64 * 1024;
/** Bytes of answers waiting for a TCP client past which its connection is closed. */
export const TCP_PENDING_LIMIT = 1024 * 1024;

/** The counters `drover status` and the metrics show. */
export interface DnsStats {
  /** Messages received that decoded as queries. */
  queries: number;
  /** Answers sent, by rcode ("NOERROR", "NXDOMAIN", "SERVFAIL", …). */
  readonly answers: Record<string, number>;
  /** Questions answered from the cluster zone. */
  zone: number;
  /** Forwarded questions answered from the cache. */
  cacheHits: number;
  /** Forwarded questions no upstream answered (each got SERVFAIL). */
  forwardFailures: number;
  /** Messages dropped: malformed, or over a client's forwarding limit. */
  dropped: number;
}

/** The server's settings. */
export interface DnsServerOptions {
  /** Where to listen: an IPv4 or IPv6 address of this namespace. */
  readonly address: string;
  /** UDP and TCP port (default 53); 0 picks a free one (tests). */
  readonly port?: number;
  readonly zone: Zone;
  /** Where questions outside the zone go; none: they are REFUSED. */
  readonly forwarder?: Forwarder;
  readonly logger?: Logger;
  /** Most forwarded questions in flight per client address (default 100). */
  readonly perClientForwards?: number;
  /** Most TCP connections (default 256) and per client address (default 16). */
  readonly maxTcpConnections?: number;
  readonly perClientTcpConnections?: number;
  /** A TCP connection idle this long is closed, ms (default 10,000; RFC 7766 §6.2.3). */
  readonly tcpIdleMs?: number;
  /** Counters to add to, shared with another server of the same node DNS (default: its own). */
  readonly stats?: DnsStats;
  /**
   * Bounds of the cache of encoded zone answers (zone-answer-cache.ts;
   * default 10,000 entries, 8 MiB); false: no cache, every message decoded
   * whole and answered anew (what the cache's answers are compared with).
   */
  readonly zoneAnswerCache?: ZoneAnswerCacheLimits | false;
}

/** The most a UDP answer is allowed to be, whatever EDNS size a client offers (DNS flag day 2020). */
export const MAX_UDP_ANSWER = 1232;

/** The OPT record drover answers with when the client used EDNS (RFC 6891 §6.1.2). */
const OPT: Answer = { type: 'OPT', name: '.', udpPayloadSize: MAX_UDP_ANSWER, flags: 0, options: [] } as unknown as Answer;

/** dns-packet's rcode values, by name, for a response's flags. */
const RCODES: Record<string, number> = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 };

/** The smallest size limit of an answer over UDP (RFC 1035 §4.2.1). */
const MIN_UDP_ANSWER = 512;

/** The size limit of an answer: over TCP 65,535 bytes; over UDP the client's EDNS size clamped to 512-1,232 bytes, 512 without EDNS. */
function sizeLimit(transport: 'udp' | 'tcp', opt: { udpPayloadSize?: number } | undefined): number {
  return transport === 'tcp' ? 65535 : Math.min(MAX_UDP_ANSWER, Math.max(MIN_UDP_ANSWER, opt?.udpPayloadSize ?? MIN_UDP_ANSWER));
}

/**
 * The response to a query of ID `id` and header flags `queryFlags`: its
 * questions echoed, RD copied (RFC 1035 §4.1.1), RA set, AA when
 * `authoritative`, drover's OPT when the query had one (`edns`); and the
 * rcode it carries, by name: `asked`, or SERVFAIL for an rcode drover has
 * no number for (an upstream's YXDOMAIN, say), which is also how it is
 * counted.
 */
function response(id: number, queryFlags: number, questions: Question[], asked: string, body: Partial<Packet>, authoritative: boolean, edns: boolean): [Packet, string] {
  const rcode = RCODES[asked] !== undefined ? asked : 'SERVFAIL';
  const packet: Packet = {
    type: 'response',
    id,
    flags: (queryFlags & dns.RECURSION_DESIRED) | dns.RECURSION_AVAILABLE | (authoritative ? dns.AUTHORITATIVE_ANSWER : 0) | RCODES[rcode]!,
    questions,
    answers: body.answers ?? [],
    authorities: body.authorities ?? [],
    additionals: edns ? [OPT] : [],
  };
  return [packet, rcode];
}

/** `packet` encoded with TC set and no answer or authority records, for a client whose size limit the whole answer exceeds. @throws dns-packet's encoding error. */
function encodeTruncated(packet: Packet): Buffer {
  return dns.encode({ ...packet, flags: (packet.flags ?? 0) | dns.TRUNCATED_RESPONSE, answers: [], authorities: [] });
}

/** See the module comment. */
export class DnsServer {
  readonly stats: DnsStats;
  private udp: UdpSocket | undefined;
  private tcp: Server | undefined;
  private readonly forwarding = new Map<string, number>();
  private readonly tcpByClient = new Map<string, number>();
  private readonly sockets = new Set<Socket>();
  private readonly answers: ZoneAnswerCache | undefined;

  constructor(private readonly opts: DnsServerOptions) {
    this.stats = opts.stats ?? { queries: 0, answers: {}, zone: 0, cacheHits: 0, forwardFailures: 0, dropped: 0 };
    if (opts.zoneAnswerCache !== false) this.answers = new ZoneAnswerCache(opts.zoneAnswerCache ?? DEFAULT_ZONE_ANSWER_CACHE_LIMITS);
  }

  /** The UDP port listened on (the TCP port is the same). */
  get port(): number {
    return this.udp?.address().port ?? 0;
  }

  /**
   * Listen on UDP and TCP.
   * @throws the bind error (EADDRINUSE, EADDRNOTAVAIL, EACCES) with the address in its message.
   */
  async listen(): Promise<void> {
    // Port 0 (tests) takes the UDP port the kernel gives; that number can be taken over TCP by another
    // process already: then both are given up and another number is tried.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.listenOnce();
      } catch (err) {
        if (this.opts.port !== 0 || attempt >= 10 || (err as { code?: string }).code !== 'EADDRINUSE') throw err;
      }
    }
  }

  /** One try of {@link listen}. @throws as listen, the TCP side's error carrying its `code`. */
  private async listenOnce(): Promise<void> {
    const { address } = this.opts;
    const udp = createSocket({ type: address.includes(':') ? 'udp6' : 'udp4', recvBufferSize: 4 << 20 });
    await new Promise<void>((resolve, reject) => {
      udp.once('error', reject);
      udp.bind({ address, port: this.opts.port ?? 53, exclusive: true }, () => {
        udp.off('error', reject);
        resolve();
      });
    }).catch((err: Error) => {
      udp.close();
      throw new Error(`DNS server: cannot listen on UDP ${address} port ${this.opts.port ?? 53}: ${err.message}`);
    });
    udp.on('error', (err) => this.opts.logger?.warn({ err: err.message }, 'DNS server: UDP socket error'));
    udp.on('message', (msg, rinfo) => {
      this.handle(msg, rinfo.address, 'udp', (out) => udp.send(out, rinfo.port, rinfo.address));
    });
    this.udp = udp;
    const port = this.port;
    const tcp = createServer({ noDelay: true }, (socket) => this.accept(socket));
    tcp.maxConnections = this.opts.maxTcpConnections ?? 256;
    await new Promise<void>((resolve, reject) => {
      tcp.once('error', reject);
      tcp.listen({ host: address, port, exclusive: true }, () => {
        tcp.off('error', reject);
        resolve();
      });
    }).catch((err: Error & { code?: string }) => {
      udp.close();
      this.udp = undefined;
      throw Object.assign(new Error(`DNS server: cannot listen on TCP ${address} port ${port}: ${err.message}`), { code: err.code });
    });
    this.tcp = tcp;
  }

  /** Bytes of answers written to TCP clients that they have not read yet, over every connection. */
  pendingTcpBytes(): number {
    let n = 0;
    for (const s of this.sockets) n += s.writableLength;
    return n;
  }

  /** Stop listening and close every TCP connection. */
  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await Promise.all([
      new Promise<void>((resolve) => (this.udp ? this.udp.close(() => resolve()) : resolve())),
      new Promise<void>((resolve) => (this.tcp ? this.tcp.close(() => resolve()) : resolve())),
    ]);
  }

  /** One TCP connection: length-prefixed messages, pipelined (RFC 7766 §6.2.1), bounded per client and by idle time. */
  private accept(socket: Socket): void {
    const client = socket.remoteAddress ?? '';
    const held = this.tcpByClient.get(client) ?? 0;
    if (held >= (this.opts.perClientTcpConnections ?? 16)) {
      socket.destroy();
      return;
    }
    this.tcpByClient.set(client, held + 1);
    this.sockets.add(socket);
    socket.setTimeout(this.opts.tcpIdleMs ?? 10_000, () => socket.destroy());
    let buffered = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      // At most one message (2 + 65,535 bytes) and one chunk are ever held.
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        const length = buffered.readUInt16BE(0);
        const msg = buffered.subarray(2, 2 + length);
        buffered = buffered.subarray(2 + length);
        this.handle(msg, client, 'tcp', (out) => {
          if (socket.destroyed) return;
          socket.write(Buffer.concat([lengthPrefix(out.length), out]));
          // A client that sends without reading its answers: past the hard
          // cap (answers to forwarded questions keep arriving) it is cut off.
          if (socket.writableLength > TCP_PENDING_LIMIT) socket.destroy();
        });
      }
      // Stop reading while the answers already written wait for the
      // client to read them; go on once they have drained.
      if (socket.writableLength > TCP_PENDING_PAUSE) socket.pause();
    });
    socket.on('drain', () => socket.resume());
    socket.on('error', () => socket.destroy());
    socket.on('close', () => {
      this.sockets.delete(socket);
      const n = (this.tcpByClient.get(client) ?? 1) - 1;
      if (n <= 0) this.tcpByClient.delete(client);
      else this.tcpByClient.set(client, n);
    });
  }

  /**
   * Answer one message from `client` through `send`, or drop it. Never
   * throws: an answer that cannot be encoded is dropped and counted.
   */
  handle(msg: Buffer, client: string, transport: 'udp' | 'tcp', send: (out: Buffer) => void): void {
    if (this.answers !== undefined && this.answerFromZone(this.answers, msg, transport, send)) return;
    let query: DecodedPacket;
    try {
      query = dns.decode(msg);
    } catch {
      this.stats.dropped++;
      return;
    }
    if (query.type !== 'query') {
      this.stats.dropped++;
      return;
    }
    this.stats.queries++;
    const opt = query.additionals?.find((a) => a.type === 'OPT') as { udpPayloadSize?: number } | undefined;
    const limit = sizeLimit(transport, opt);
    const reply = (asked: string, body: Partial<Packet> = {}, authoritative = false) => {
      const [packet, rcode] = response(query.id ?? 0, query.flags ?? 0, query.questions ?? [], asked, body, authoritative, opt !== undefined);
      this.send(packet, rcode, limit, send);
    };
    const opcode = (query as { opcode?: string }).opcode;
    if (opcode !== 'QUERY') return reply('NOTIMP');
    if (query.questions?.length !== 1) return reply('FORMERR');
    const q = query.questions[0]!;
    if ((q.class ?? 'IN') !== 'IN' || q.type === 'AXFR' || q.type === 'IXFR') return reply('REFUSED');
    const answer = this.opts.zone.answer(q.name, q.type as QuestionType);
    if (answer !== undefined) {
      this.stats.zone++;
      return reply(answer.rcode, { answers: [...answer.answers], authorities: [...answer.authorities] }, true);
    }
    if ((q.type as string) === 'ANY') {
      // RFC 8482 §4.2: a synthesised HINFO instead of every record.
      return reply('NOERROR', { answers: [{ name: q.name, type: 'HINFO', class: 'IN', ttl: 3600, data: { cpu: 'RFC8482', os: '' } }] });
    }
    if (this.opts.forwarder === undefined) return reply('REFUSED');
    const held = this.forwarding.get(client) ?? 0;
    if (held >= (this.opts.perClientForwards ?? 100)) {
      this.stats.dropped++;
      return;
    }
    this.forwarding.set(client, held + 1);
    void this.opts.forwarder.resolve(q).then((result) => {
      const n = (this.forwarding.get(client) ?? 1) - 1;
      if (n <= 0) this.forwarding.delete(client);
      else this.forwarding.set(client, n);
      if (!result.ok) {
        this.stats.forwardFailures++;
        this.opts.logger?.debug({ name: q.name, type: q.type, why: result.why }, 'DNS: forwarding failed');
        return reply('SERVFAIL');
      }
      if (result.cached) this.stats.cacheHits++;
      const up = result.packet;
      const keep = (list: Answer[] | undefined) => (list ?? []).filter((a) => a.type !== 'OPT');
      reply(rcodeOf(up), { answers: keep(up.answers), authorities: keep(up.authorities) });
    });
  }

  /**
   * The common case, cheaply: a simple query (simple-query.ts) of class IN
   * whose name is the zone's is answered from `cache`, or answered, encoded
   * and kept there, and sent as a copy with the query's ID; the bytes are
   * those the full path of {@link handle} sends for the same message, and
   * the counters move the same. Anything else, and an answer that cannot be
   * encoded, is left to the full path.
   * @returns whether the message was answered.
   */
  private answerFromZone(cache: ZoneAnswerCache, msg: Buffer, transport: 'udp' | 'tcp', send: (out: Buffer) => void): boolean {
    const query = readSimpleQuery(msg);
    if (query === undefined) return false;
    const q = query.question;
    if ((q.class ?? 'IN') !== 'IN' || q.type === 'AXFR' || q.type === 'IXFR') return false;
    const opt = query.additional?.type === 'OPT' ? (query.additional as { udpPayloadSize?: number }) : undefined;
    const generation = this.opts.zone.generation;
    const key = zoneAnswerKey(q, (query.flags & dns.RECURSION_DESIRED) !== 0, opt !== undefined);
    let entry: CachedAnswer | undefined = cache.get(key, generation);
    if (entry === undefined) {
      const answer = this.opts.zone.answer(q.name, q.type as QuestionType);
      if (answer === undefined) return false;
      try {
        const [packet, rcode] = response(0, query.flags, [q], answer.rcode, { answers: [...answer.answers], authorities: [...answer.authorities] }, true, opt !== undefined);
        const whole = dns.encode(packet);
        entry = { rcode, whole, truncated: whole.length > MIN_UDP_ANSWER ? encodeTruncated(packet) : undefined };
      } catch {
        return false;
      }
      cache.set(key, generation, entry);
    }
    this.stats.queries++;
    this.stats.zone++;
    const chosen = entry.whole.length > sizeLimit(transport, opt) ? entry.truncated! : entry.whole;
    const out = Buffer.allocUnsafe(chosen.length);
    chosen.copy(out);
    out.writeUInt16BE(query.id, 0);
    this.stats.answers[entry.rcode] = (this.stats.answers[entry.rcode] ?? 0) + 1;
    send(out);
    return true;
  }

  /** Encode and send `packet`; over UDP, truncated (TC, no records) when it does not fit `limit` bytes. */
  private send(packet: Packet, rcode: string, limit: number, send: (out: Buffer) => void): void {
    let out: Buffer;
    try {
      out = dns.encode(packet);
      if (out.length > limit) out = encodeTruncated(packet);
    } catch (err) {
      this.stats.dropped++;
      this.opts.logger?.debug({ err: (err as Error).message }, 'DNS: an answer could not be encoded');
      return;
    }
    this.stats.answers[rcode] = (this.stats.answers[rcode] ?? 0) + 1;
    send(out);
  }
}
