/**
 * The NETLINK_NETFILTER socket the nf_tables client talks through: a thin
 * wrapper of the npm package `netlink@0.3.0`'s RawNetlinkSocket, so that the
 * client can be tested with a fake.
 *
 * What the package does and does not do (read from its dist/raw.js, and
 * measured for IPVS mode, see modes/ipvs/netlink.ts):
 * - it binds a port id of its own choosing (generateLocalPort) and reads
 *   whole datagrams (message peeking), emitting one 'message' per recvmsg: a
 *   datagram may hold several netlink messages (a dump packs them);
 * - a receive-buffer overflow (recvmsg ENOBUFS) aborts the PROCESS from the
 *   native addon, so SO_RCVBUF is raised (capped by net.core.rmem_max; the
 *   package has no SO_RCVBUFFORCE) and the client keeps what the kernel can
 *   answer to one batch within it;
 * - it has no setsockopt beyond SO_RCVBUF/SO_SNDBUF: no NETLINK_CAP_ACK (so
 *   an error reply copies the whole failing request) and no NETLINK_EXT_ACK;
 * - a datagram larger than SO_SNDBUF - 32 bytes is refused by the kernel
 *   (netlink_sendmsg: EMSGSIZE), so SO_SNDBUF is raised as well.
 *
 * The socket acts on the network namespace of the process that opens it.
 */
import { RawNetlinkSocket } from 'netlink';
import { NETLINK_NETFILTER } from './constants.ts';

/** The datagram socket the client needs. */
export interface NfnlTransport {
  /** Send one datagram to the kernel (port 0); rejects with the package's ErrnoException on failure. */
  send(datagram: Buffer): Promise<void>;
  /** Register the handler of received datagrams (each one recvmsg). */
  onDatagram(handler: (datagram: Buffer) => void): void;
  /** Register the handler of socket errors and truncated datagrams (never thrown, only reported). */
  onError(handler: (err: Error) => void): void;
  /** SO_RCVBUF in force, bytes (getsockopt: twice what was asked, within net.core.rmem_max). */
  recvBufferBytes(): number;
  /** SO_SNDBUF in force, bytes. */
  sendBufferBytes(): number;
  close(): void;
}

/**
 * A NETLINK_NETFILTER socket of `netlink@0.3.0`, with SO_RCVBUF and SO_SNDBUF
 * raised to the given sizes (bytes; the kernel caps them at
 * net.core.rmem_max / wmem_max and doubles them), member of the multicast
 * `groups` (NETLINK_ADD_MEMBERSHIP; e.g. NFNLGRP_NFTABLES, which needs
 * CAP_NET_ADMIN). A member that reads too slowly loses notifications: the
 * next read reports ENOBUFS through `onError` (an ErrnoException with
 * `code` "ENOBUFS"), and reading goes on.
 * @throws the package's ErrnoException when the socket cannot be created or join a group.
 */
export function openNfnlTransport(recvBufferBytes: number, sendBufferBytes: number, groups: readonly number[] = []): NfnlTransport {
  const sock = new RawNetlinkSocket(NETLINK_NETFILTER, { recvBufferSize: recvBufferBytes, sendBufferSize: sendBufferBytes });
  try {
    for (const g of groups) sock.addMembership(g);
  } catch (err) {
    sock.close();
    throw err;
  }
  // An idle socket must not keep the process alive (`drover sync --once` exits after its sync); a call in
  // flight is kept alive by its timeout timer (client.ts), and the answer still arrives on the socket.
  sock.unref();
  let errorHandler: (err: Error) => void = () => undefined;
  // Without an 'error' listener EventEmitter would throw the error.
  sock.on('error', (err) => errorHandler(err));
  sock.on('truncatedMessage', (_msg, info) => errorHandler(new Error(`truncated netlink datagram (${info.truncated ?? '?'} bytes)`)));
  return {
    send: (datagram) =>
      new Promise<void>((resolve, reject) => {
        sock.send(datagram, { port: 0 }, (err) => (err ? reject(err) : resolve()));
      }),
    onDatagram: (handler) => {
      sock.on('message', (msg) => handler(msg));
    },
    onError: (handler) => {
      errorHandler = handler;
    },
    recvBufferBytes: () => sock.getRecvBufferSize(),
    sendBufferBytes: () => sock.getSendBufferSize(),
    close: () => sock.close(),
  };
}
