/**
 * A watcher of nf_tables commits for some tables: a NETLINK_NETFILTER
 * socket, member of NFNLGRP_NFTABLES, whose datagrams go through a
 * {@link BatchAssembler} (batch-scan.ts). It reports each committed batch
 * that touched a watched table, with what it touched and who committed it;
 * `overrun` when the kernel dropped notifications because the socket's
 * receive buffer was full (recvmsg ENOBUFS: what was lost is unknown);
 * `unknown` when a datagram could not be read. It never throws after it is
 * open. Batches of other tables cost a header scan per message and nothing
 * else.
 *
 * The socket acts in the network namespace of the process that opens it
 * (transport.ts), as every netlink socket of drover's does.
 */
import { BatchAssembler, type BatchScanStats, type NftBatchEvent, type WatchedTable } from './batch-scan.ts';
import { NFNLGRP_NFTABLES } from './constants.ts';
import { openNfnlTransport, type NfnlTransport } from './transport.ts';

/** What a watcher reports: a batch or something unreadable ({@link NftBatchEvent}), or lost notifications. */
export type NftWatchEvent = NftBatchEvent | { readonly type: 'overrun'; readonly detail: string };

/** A watcher of nf_tables commits (see the module comment); {@link FakeNftWatcher} in tests. */
export interface NftWatcher {
  /** Register the handler of events (one; a later call replaces it). It must not throw. */
  onEvent(handler: (event: NftWatchEvent) => void): void;
  /** Counts of what was read, and the overruns. */
  stats(): BatchScanStats & { overruns: number };
  /** Leave the group and close the socket. */
  close(): void;
}

/** Receive buffer asked for by default, bytes: a full sync of 30,000 services announces tens of MiB; the kernel caps it at net.core.rmem_max (doubled). */
export const WATCH_RECV_BUFFER = 64 * 1024 * 1024;

/**
 * Watch `tables` on `transport`, a socket already in NFNLGRP_NFTABLES
 * (the seam of the unit tests; {@link openNftWatcher} opens the real one).
 */
export function watchOn(transport: NfnlTransport, tables: readonly WatchedTable[]): NftWatcher {
  const assembler = new BatchAssembler(tables);
  let overruns = 0;
  let handler: (event: NftWatchEvent) => void = () => undefined;
  transport.onDatagram((d) => {
    for (const e of assembler.feed(d)) handler(e);
  });
  transport.onError((err) => {
    // The start of the batch in progress may be among what was lost.
    assembler.reset();
    if ((err as { code?: string }).code === 'ENOBUFS') {
      overruns++;
      handler({ type: 'overrun', detail: 'notifications were dropped: the receive buffer overflowed (ENOBUFS)' });
    } else {
      handler({ type: 'unknown', reason: `the notification socket reported: ${err.message}` });
    }
  });
  return {
    onEvent: (h) => {
      handler = h;
    },
    stats: () => ({ ...assembler.stats, overruns }),
    close: () => transport.close(),
  };
}

/**
 * Open a watcher of `tables` in this process's network namespace, its
 * receive buffer raised to `recvBufferBytes` (default {@link WATCH_RECV_BUFFER}).
 * Joining the group needs CAP_NET_ADMIN.
 * @throws the netlink package's ErrnoException when the socket cannot be opened or join the group.
 */
export function openNftWatcher(tables: readonly WatchedTable[], recvBufferBytes = WATCH_RECV_BUFFER): NftWatcher {
  return watchOn(openNfnlTransport(recvBufferBytes, 4096, [NFNLGRP_NFTABLES]), tables);
}

/** An in-memory watcher: the test says what the kernel announced ({@link FakeNftWatcher.emit}). */
export class FakeNftWatcher implements NftWatcher {
  private handler: (event: NftWatchEvent) => void = () => undefined;
  /** Whether {@link close} was called. */
  closed = false;
  onEvent(handler: (event: NftWatchEvent) => void): void {
    this.handler = handler;
  }
  /** Deliver `event` as the kernel's socket would. */
  emit(event: NftWatchEvent): void {
    this.handler(event);
  }
  stats(): BatchScanStats & { overruns: number } {
    return { messages: 0, batches: 0, watchedBatches: 0, malformed: 0, overruns: 0 };
  }
  close(): void {
    this.closed = true;
  }
}
