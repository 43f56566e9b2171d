/**
 * {@link Nfacct} over a NETLINK_NETFILTER socket of this process (the npm
 * package `netlink@0.3.0`'s RawNetlinkSocket, its message framing
 * formatMessage/parseMessages/parseError, loaded with the first request):
 * it acts on the network
 * namespace of this process. For another namespace, see netns.ts.
 *
 * The messages are read here rather than by the package's NetlinkSocket,
 * whose multipart grouping fails the answer to a single GET: the kernel
 * sends that object with NLM_F_MULTI and no NLMSG_DONE
 * (net/netfilter/nfnetlink_acct.c nfnl_acct_fill_info), then the ACK. A
 * request ends at its ACK (an NLMSG_ERROR, 0 or an errno) or, for a dump,
 * at NLMSG_DONE; requests run one at a time on the socket. A request that
 * fails other than by the kernel's answer (a timeout, a socket error)
 * closes the socket, since a late reply could be taken for the next one's;
 * the next call opens a new one.
 *
 * `ensure` sends NFNL_MSG_ACCT_NEW with NLM_F_CREATE | NLM_F_EXCL and
 * takes EEXIST as success, so an existing object keeps its counters
 * (kube-proxy's Ensure does a GET then an ADD, which races with another
 * process; one exclusive create does not).
 */
import { constants as osConstants } from 'node:os';
import type { NetlinkMessage, RawNetlinkSocket } from 'netlink';
import { loadNetlink, type NetlinkModule } from '../netlink/load.ts';
import { NfacctError, NfacctNotFoundError } from '../../errors.ts';
import {
  accountingType,
  ensureEachOf,
  decodeCounter,
  encodeDumpRequest,
  encodeNameRequest,
  NETLINK_NETFILTER,
  NFNL_MSG_ACCT_GET,
  NFNL_MSG_ACCT_NEW,
  NLM_F_CREATE,
  NLM_F_DUMP,
  NLM_F_EXCL,
} from './codec.ts';
import type { Nfacct, NfacctCounter } from './types.ts';

/** How long one request may take, ms. */
const TIMEOUT_MS = 5000;

/** <linux/netlink.h> message types and flags. */
const NLMSG_ERROR = 2;
const NLMSG_DONE = 3;
const NLM_F_REQUEST = 0x1;
const NLM_F_ACK = 0x4;

/** The errno name of number `errno` (e.g. 17 gives "EEXIST"), "E?N" for one Node does not know. */
function errnoName(errno: number): string {
  const found = Object.entries(osConstants.errno).find(([, n]) => n === errno);
  return found?.[0] ?? `E?${errno}`;
}

/** A request waiting for its answer. */
interface Pending {
  readonly seq: number;
  readonly messages: Uint8Array[];
  resolve(messages: Uint8Array[]): void;
  reject(err: Error): void;
}

/** See the module comment. */
export class NetlinkNfacct implements Nfacct {
  private socket: RawNetlinkSocket | undefined;
  private pending: Pending | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private seq = 1;

  async ensure(name: string): Promise<void> {
    const payload = encodeNameRequest(name);
    try {
      await this.request(NFNL_MSG_ACCT_NEW, payload, NLM_F_CREATE | NLM_F_EXCL);
    } catch (err) {
      if (err instanceof NfacctError && err.code === 'EEXIST') return;
      throw err;
    }
  }

  ensureEach(names: readonly string[]): Promise<Map<string, Error | undefined>> {
    return ensureEachOf(this, names);
  }

  async get(name: string): Promise<NfacctCounter> {
    const payload = encodeNameRequest(name);
    let msgs;
    try {
      msgs = await this.request(NFNL_MSG_ACCT_GET, payload, 0);
    } catch (err) {
      if (err instanceof NfacctError && err.code === 'ENOENT') throw new NfacctNotFoundError(name);
      throw err;
    }
    const found = msgs.map(decodeCounter).find((c) => c.name === name);
    if (found === undefined) throw new NfacctError(`nfacct: the kernel answered no object for ${JSON.stringify(name)}`);
    return found;
  }

  async list(): Promise<NfacctCounter[]> {
    return (await this.request(NFNL_MSG_ACCT_GET, encodeDumpRequest(), NLM_F_DUMP)).map(decodeCounter);
  }

  close(): void {
    this.socket?.close();
    this.socket = undefined;
    this.pending?.reject(new NfacctError('nfacct: the socket was closed'));
    this.pending = undefined;
  }

  /**
   * Send one request after the ones before it; resolves with the payloads of
   * the NFNL_MSG_ACCT_NEW messages of the answer.
   * @throws NfacctError with the errno name the kernel answered, or without one for a socket failure or timeout.
   */
  private request(cmd: number, payload: Buffer, flags: number): Promise<Uint8Array[]> {
    const run = async (): Promise<Uint8Array[]> => {
      const nl = await loadNetlink().catch((err: Error) => {
        throw new NfacctError(`nfacct: cannot open a netfilter netlink socket: ${err.message}`);
      });
      return new Promise<Uint8Array[]>((resolve, reject) => {
        const socket = this.open(nl);
        const seq = (this.seq = (this.seq % 0x7fffffff) + 1);
        const timer = setTimeout(() => {
          this.pending = undefined;
          this.close();
          reject(new NfacctError(`nfacct: no answer within ${TIMEOUT_MS} ms`));
        }, TIMEOUT_MS);
        const done = (f: () => void) => {
          clearTimeout(timer);
          this.pending = undefined;
          f();
        };
        this.pending = { seq, messages: [], resolve: (m) => done(() => resolve(m)), reject: (e) => done(() => reject(e)) };
        const datagram = nl.formatMessage({ type: accountingType(cmd), flags: flags | NLM_F_REQUEST | NLM_F_ACK, seq, port: 0, data: payload });
        socket.send(datagram, { port: 0 }, (err) => {
          if (err) {
            this.pending?.reject(new NfacctError(`nfacct: send failed: ${err.message}`, err.code));
          }
        });
      });
    };
    const next = this.queue.then(run, run);
    this.queue = next.catch(() => undefined);
    return next;
  }

  /**
   * The socket, opened on first use (unreferenced: an idle socket never keeps the process alive; a request in flight is kept
   * alive by its timer).
   * @throws NfacctError when the socket cannot be opened.
   */
  private open(nl: NetlinkModule): RawNetlinkSocket {
    if (this.socket !== undefined) return this.socket;
    let socket: RawNetlinkSocket;
    try {
      socket = new nl.RawNetlinkSocket(NETLINK_NETFILTER);
    } catch (err) {
      throw new NfacctError(`nfacct: cannot open a netfilter netlink socket: ${(err as Error).message}`, (err as { code?: string }).code);
    }
    socket.unref();
    socket.on('message', (datagram: Buffer) => this.receive(nl, datagram));
    socket.on('error', (err: Error) => {
      this.pending?.reject(new NfacctError(`nfacct: socket error: ${err.message}`));
      this.close();
    });
    this.socket = socket;
    return socket;
  }

  /** Hand the messages of one datagram to the request waiting for them; others (a late answer) are dropped. */
  private receive(nl: NetlinkModule, datagram: Buffer): void {
    let msgs: NetlinkMessage[];
    try {
      msgs = nl.parseMessages(datagram);
    } catch (err) {
      this.pending?.reject(new NfacctError(`nfacct: malformed answer: ${(err as Error).message}`));
      return;
    }
    for (const m of msgs) {
      const p = this.pending;
      if (p === undefined || m.seq !== p.seq) continue;
      if (m.type === NLMSG_ERROR) {
        const { errno } = nl.parseError(m.data, m.flags);
        if (errno === 0) p.resolve(p.messages);
        else p.reject(new NfacctError(`nfacct request refused: ${errnoName(Math.abs(errno))}`, errnoName(Math.abs(errno))));
      } else if (m.type === NLMSG_DONE) {
        p.resolve(p.messages);
      } else if (m.type === accountingType(NFNL_MSG_ACCT_NEW)) {
        p.messages.push(m.data);
      }
    }
  }
}
