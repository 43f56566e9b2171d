/**
 * Forwarding of the questions outside the cluster zone to the node's
 * upstream resolvers, as NodeLocal DNSCache's `forward . __PILLAR__UPSTREAM__SERVERS__`
 * does: over UDP from a fresh socket per question (a random source port
 * and ID, RFC 5452 §9.2), again over TCP when the answer comes back
 * truncated (RFC 1035 §4.2.1, RFC 7766 §5), the next upstream on a timeout.
 * Answers are cached (cache.ts); questions asked again while one is in
 * flight share it; at most `maxInFlight` questions are in flight at once.
 * Every wait is bounded, and nothing here is awaited by the zone's answers.
 */
import { randomInt } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { connect } from 'node:net';
import { readFileSync } from 'node:fs';
import * as dns from 'dns-packet';
import type { Packet, Question } from 'dns-packet';
import { parseIP, joinHostPort } from '../model/addr.ts';
import { AnswerCache } from './cache.ts';
import { parseUpstream, type Upstream } from '../config/dns.ts';

export { parseUpstream };

export type { Upstream };


/** The forwarder's settings; times in ms. */
export interface ForwarderOptions {
  /** Tried in order; a timeout or a failure moves to the next. */
  readonly upstreams: readonly Upstream[];
  /** How long one upstream is given for one question (default 2,000 ms, CoreDNS forward's dial and read timeout). */
  readonly timeoutMs?: number;
  /** Most distinct questions in flight (default 1,024). */
  readonly maxInFlight?: number;
  readonly cache?: AnswerCache;
}

/** What a forwarded question came back with. */
export type Forwarded =
  | { readonly ok: true; readonly packet: Packet; readonly cached: boolean }
  | { readonly ok: false; readonly why: string };

/** The cache and in-flight key of a question: its name lower-case, its type and class. */
function questionKey(q: Question): string {
  return `${q.name.toLowerCase()} ${q.type} ${q.class ?? 'IN'}`;
}

/**
 * The `nameserver` lines of a resolv.conf (resolv.conf(5)), port 53, in
 * order, leaving out `exclude` (the DNS address itself: forwarding to it
 * would loop). An unreadable file gives none.
 */
export function resolvConfUpstreams(path = '/etc/resolv.conf', exclude: readonly string[] = []): Upstream[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return [];
  }
  const out: Upstream[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*nameserver\s+(\S+)/.exec(line);
    const ip = m ? parseIP(m[1]!.replace(/%.*$/, '')) : undefined;
    if (ip !== undefined && !exclude.includes(ip.text)) out.push({ ip: ip.text, port: 53 });
  }
  return out;
}

/** See the module comment. */
export class Forwarder {
  private readonly inFlight = new Map<string, Promise<Forwarded>>();
  readonly cache: AnswerCache;
  private readonly timeoutMs: number;
  private readonly maxInFlight: number;

  constructor(private readonly opts: ForwarderOptions) {
    this.cache = opts.cache ?? new AnswerCache();
    this.timeoutMs = opts.timeoutMs ?? 2000;
    this.maxInFlight = opts.maxInFlight ?? 1024;
  }

  /** The upstreams, for the log. */
  get upstreams(): readonly Upstream[] {
    return this.opts.upstreams;
  }

  /** Questions in flight now. */
  get pending(): number {
    return this.inFlight.size;
  }

  /** The answer to `q`: from the cache, a question in flight, or the upstreams. Never throws. */
  resolve(q: Question): Promise<Forwarded> {
    const key = questionKey(q);
    const cached = this.cache.get(key);
    if (cached !== undefined) return Promise.resolve({ ok: true, packet: cached, cached: true });
    const running = this.inFlight.get(key);
    if (running !== undefined) return running;
    if (this.opts.upstreams.length === 0) return Promise.resolve({ ok: false, why: 'no upstream DNS server' });
    if (this.inFlight.size >= this.maxInFlight) return Promise.resolve({ ok: false, why: `${this.maxInFlight} questions already in flight` });
    const question: Question = { name: q.name.toLowerCase(), type: q.type, class: q.class ?? 'IN' };
    const asked = this.ask(question).then((result) => {
      this.inFlight.delete(key);
      if (result.ok) this.cache.put(key, result.packet);
      return result;
    });
    this.inFlight.set(key, asked);
    return asked;
  }

  /** Each upstream in turn until one answers. */
  private async ask(q: Question): Promise<Forwarded> {
    const why: string[] = [];
    for (const upstream of this.opts.upstreams) {
      try {
        let packet = await this.overUdp(upstream, q);
        if (packet.flag_tc) packet = await this.overTcp(upstream, q);
        return { ok: true, packet, cached: false };
      } catch (err) {
        why.push(`${joinHostPort(upstream.ip, upstream.port)}: ${(err as Error).message}`);
      }
    }
    return { ok: false, why: why.join('; ') };
  }

  /** The query packet for `q` with a random ID, recursion desired, EDNS with a 1,232-byte UDP size (DNS flag day 2020). */
  private query(q: Question): { id: number; buf: Buffer } {
    const id = randomInt(0, 65536);
    const buf = dns.encode({
      type: 'query',
      id,
      flags: dns.RECURSION_DESIRED,
      questions: [q],
      additionals: [{ type: 'OPT', name: '.', udpPayloadSize: 1232, flags: 0, options: [] } as unknown as dns.Answer],
    });
    return { id, buf };
  }

  /** Whether `packet` answers the query `id` for `q` (RFC 5452 §4: ID and question must match). */
  private matches(packet: dns.DecodedPacket, id: number, q: Question): boolean {
    const got = packet.questions?.[0];
    return packet.type === 'response' && packet.id === id && got !== undefined && got.name.toLowerCase() === q.name && got.type === q.type;
  }

  private overUdp(upstream: Upstream, q: Question): Promise<dns.DecodedPacket> {
    const { id, buf } = this.query(q);
    const socket = createSocket(upstream.ip.includes(':') ? 'udp6' : 'udp4');
    return settle(this.timeoutMs, 'UDP', () => socket.close(), (done) => {
      socket.on('error', (err) => done(err));
      socket.on('message', (msg, from) => {
        if (from.address !== upstream.ip || from.port !== upstream.port) return;
        let packet: dns.DecodedPacket;
        try {
          packet = dns.decode(msg);
        } catch {
          return; // Not an answer; keep waiting for one.
        }
        if (this.matches(packet, id, q)) done(undefined, packet);
      });
      socket.send(buf, upstream.port, upstream.ip, (err) => {
        if (err) done(err);
      });
    });
  }

  private overTcp(upstream: Upstream, q: Question): Promise<dns.DecodedPacket> {
    const { id, buf } = this.query(q);
    let got = Buffer.alloc(0);
    const socket = connect({ host: upstream.ip, port: upstream.port });
    return settle(this.timeoutMs, 'TCP', () => socket.destroy(), (done) => {
      socket.on('error', (err) => done(err));
      socket.on('connect', () => socket.write(Buffer.concat([lengthPrefix(buf.length), buf])));
      socket.on('data', (chunk) => {
        got = Buffer.concat([got, chunk]);
        if (got.length < 2 || got.length < 2 + got.readUInt16BE(0)) return;
        try {
          const packet = dns.decode(got.subarray(2, 2 + got.readUInt16BE(0)));
          if (this.matches(packet, id, q)) done(undefined, packet);
          else done(new Error('an answer over TCP to another question'));
        } catch (err) {
          done(new Error(`a malformed answer over TCP: ${(err as Error).message}`));
        }
      });
      socket.on('end', () => done(new Error('the connection closed before an answer')));
    });
  }
}

/**
 * A promise that `start` settles through `done` once (later calls are
 * ignored), or that fails with "no answer over TRANSPORT in N ms" after
 * `timeoutMs`; `close` runs when it settles either way.
 */
function settle<T>(timeoutMs: number, transport: string, close: () => void, start: (done: (err: Error | undefined, value?: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const done = (err: Error | undefined, value?: T) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      close();
      if (err) reject(err);
      else resolve(value!);
    };
    const timer = setTimeout(() => done(new Error(`no answer over ${transport} in ${timeoutMs} ms`)), timeoutMs);
    start(done);
  });
}

/** The 2-byte length that frames a DNS message over TCP (RFC 1035 §4.2.2). */
export function lengthPrefix(length: number): Buffer {
  const out = Buffer.alloc(2);
  out.writeUInt16BE(length);
  return out;
}
