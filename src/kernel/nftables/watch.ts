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
 * (transport.ts), as every netlink socket of drover's does. The netlink
 * package aborts the process that reads ENOBUFS (transport.ts), so drover
 * runs the watcher in a process of its own ({@link spawnNftWatcher},
 * watch-process.ts), which can also be started in another namespace; its
 * end is reported as an overrun once it is running again.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { moduleArgv } from '../../util/node-module.ts';
import { argvFor } from '../exec.ts';
import { BatchAssembler, type BatchScanStats, type NftBatchEvent, type NftObjectChange, type WatchedTable } from './batch-scan.ts';
import { NFNLGRP_NFTABLES } from './constants.ts';
import { openNfnlTransport, type NfnlTransport } from './transport.ts';

/** What a watcher reports: a batch or something unreadable ({@link NftBatchEvent}), or lost notifications. */
export type NftWatchEvent = NftBatchEvent | { readonly type: 'overrun'; readonly detail: string };

/** A watcher of nf_tables commits (see the module comment); {@link FakeNftWatcher} in tests. */
export interface NftWatcher {
  /** Register the handler of events (one; a later call replaces it). It must not throw. */
  onEvent(handler: (event: NftWatchEvent) => void): void;
  /** Leave the group and close the socket. */
  close(): void;
}

/** A watcher in this process: {@link NftWatcher} with its counts and its socket's buffer. */
export interface InProcessWatcher extends NftWatcher {
  /** Counts of what was read, and the overruns. */
  stats(): BatchScanStats & { overruns: number };
  /** SO_RCVBUF in force, bytes. */
  recvBufferBytes(): number;
}

/** Receive buffer asked for by default, bytes: a full sync of 30,000 services announces tens of MiB; the kernel caps it at net.core.rmem_max (doubled). */
export const WATCH_RECV_BUFFER = 64 * 1024 * 1024;

/**
 * Watch `tables` on `transport`, a socket already in NFNLGRP_NFTABLES
 * (the seam of the unit tests; {@link openNftWatcher} opens the real one).
 */
export function watchOn(transport: NfnlTransport, tables: readonly WatchedTable[]): InProcessWatcher {
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
    recvBufferBytes: () => transport.recvBufferBytes(),
    close: () => transport.close(),
  };
}

/**
 * Open a watcher of `tables` in this process's network namespace, its
 * receive buffer raised to `recvBufferBytes` (default {@link WATCH_RECV_BUFFER}).
 * Joining the group needs CAP_NET_ADMIN.
 * @throws the netlink package's ErrnoException when the socket cannot be opened or join the group.
 */
export function openNftWatcher(tables: readonly WatchedTable[], recvBufferBytes = WATCH_RECV_BUFFER): InProcessWatcher {
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
  close(): void {
    this.closed = true;
  }
}

/** Options of {@link spawnNftWatcher}. */
export interface SpawnedWatcherOptions {
  /** Run the watcher in this named network namespace (`ip netns exec`); default: this process's. */
  readonly netns?: string;
  /** SO_RCVBUF asked for, bytes (default {@link WATCH_RECV_BUFFER}). */
  readonly recvBufferBytes?: number;
  /** How long the process may take to join the group, ms (default 30 s). */
  readonly readyTimeoutMs?: number;
  /** Wait before a process that ended is started again, ms (default 500; doubled after each failed start, up to 30 s). */
  readonly restartDelayMs?: number;
  /** Told when the process ends unasked, and why (for the log). */
  readonly onExit?: (why: string) => void;
}

interface ChildLine {
  t: 'ready' | 'batch' | 'overrun' | 'unknown';
  recvBufferBytes?: number;
  gen?: number;
  pid?: number;
  name?: string;
  tables?: Array<[string, NftObjectChange[]]>;
  detail?: string;
  reason?: string;
}

/**
 * Start the watcher of `tables` in a process of its own (watch-process.ts;
 * see the module comment) and wait until it is a member of the group. When
 * the process ends unasked (an overflow of its receive buffer, say), it is
 * started again and, once it runs, an `overrun` is reported: the
 * notifications in between are lost. A line of its output that cannot be
 * read is reported as `unknown`.
 * @throws Error when the first process does not join the group within `readyTimeoutMs`, naming its stderr.
 */
export async function spawnNftWatcher(tables: readonly WatchedTable[], opts: SpawnedWatcherOptions = {}): Promise<NftWatcher> {
  const argv = [...moduleArgv(import.meta.url, 'watch-process'), JSON.stringify({ tables, recvBufferBytes: opts.recvBufferBytes ?? WATCH_RECV_BUFFER })];
  const command = argvFor(argv[0]!, argv.slice(1), opts.netns);
  let handler: (event: NftWatchEvent) => void = () => undefined;
  let closed = false;
  let child: ChildProcessWithoutNullStreams | undefined;
  let restartDelay = opts.restartDelayMs ?? 500;
  let timer: NodeJS.Timeout | undefined;

  /** One process; resolves once it is ready, rejects when it ends or times out first. */
  const start = (restarted: boolean): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const c = spawn(command[0]!, command.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
      child = c;
      let stderr = '';
      let ready = false;
      c.stderr.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-2000)));
      const deadline = setTimeout(() => {
        c.kill('SIGKILL');
        reject(new Error(`the nf_tables watcher process did not start within ${opts.readyTimeoutMs ?? 30_000} ms: ${stderr.trim()}`));
      }, opts.readyTimeoutMs ?? 30_000);
      c.once('error', (err) => {
        clearTimeout(deadline);
        reject(err);
      });
      createInterface({ input: c.stdout }).on('line', (line) => {
        let msg: ChildLine;
        try {
          msg = JSON.parse(line) as ChildLine;
        } catch {
          handler({ type: 'unknown', reason: `the watcher process wrote ${JSON.stringify(line.slice(0, 80))}` });
          return;
        }
        if (msg.t === 'ready') {
          ready = true;
          clearTimeout(deadline);
          restartDelay = opts.restartDelayMs ?? 500;
          if (restarted) handler({ type: 'overrun', detail: 'the watcher process ended and was started again: notifications in between were lost' });
          resolve();
        } else if (msg.t === 'batch' && typeof msg.gen === 'number' && Array.isArray(msg.tables)) {
          const batch = { gen: msg.gen, ...(msg.pid !== undefined ? { pid: msg.pid } : {}), ...(msg.name !== undefined ? { name: msg.name } : {}), tables: new Map(msg.tables) };
          handler({ type: 'batch', batch });
        } else if (msg.t === 'overrun') handler({ type: 'overrun', detail: msg.detail ?? 'notifications were dropped' });
        else handler({ type: 'unknown', reason: msg.reason ?? `the watcher process wrote ${JSON.stringify(line.slice(0, 80))}` });
      });
      c.once('close', (code, signal) => {
        clearTimeout(deadline);
        if (closed || child !== c) return;
        const why = `the nf_tables watcher process ended (${signal ?? `exit code ${code}`})${stderr.trim() ? `: ${stderr.trim().split('\n')[0]}` : ''}`;
        if (!ready) reject(new Error(why));
        else {
          opts.onExit?.(why);
          restart();
        }
      });
    });

  const restart = (): void => {
    if (closed) return;
    timer = setTimeout(() => {
      timer = undefined;
      start(true).catch((err: Error) => {
        opts.onExit?.(err.message);
        restartDelay = Math.min(30_000, restartDelay * 2);
        restart();
      });
    }, restartDelay);
    timer.unref();
  };

  await start(false);
  return {
    onEvent: (h) => {
      handler = h;
    },
    close: () => {
      closed = true;
      if (timer) clearTimeout(timer);
      child?.stdin.end();
      child?.kill('SIGTERM');
    },
  };
}
