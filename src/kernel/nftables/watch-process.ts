/**
 * The notification watcher's own process (started by watch.ts
 * spawnNftWatcher, inside the target namespace with `ip netns exec` when
 * asked): it opens the watcher of the tables given as its argument, JSON
 * `{"tables": [{family, name}], "recvBufferBytes"}`, and writes one JSON
 * object per line to stdout:
 * - `{"t":"ready","recvBufferBytes"}` once it is a member of NFNLGRP_NFTABLES;
 * - `{"t":"batch","gen","pid","name","tables":[[table, [change]]]}` for each
 *   committed batch that touched a watched table (batch-scan.ts);
 * - `{"t":"unknown","reason"}` and `{"t":"overrun","detail"}` as watch.ts
 *   reports them.
 * It ends when its stdin closes (the parent is gone). It is a process of its
 * own because the netlink package aborts the whole process when a receive
 * reports ENOBUFS (transport.ts): a receive buffer overflowed by a large
 * batch ends this process, and the parent takes that as lost notifications.
 */
import { openNftWatcher, type NftWatchEvent } from './watch.ts';
import type { WatchedTable } from './batch-scan.ts';

const args = JSON.parse(process.argv[2] ?? '{}') as { tables?: WatchedTable[]; recvBufferBytes?: number };
const say = (msg: Record<string, unknown>): void => void process.stdout.write(`${JSON.stringify(msg)}\n`);
const watcher = openNftWatcher(args.tables ?? [], args.recvBufferBytes);
watcher.onEvent((e: NftWatchEvent) => {
  if (e.type === 'batch') say({ t: 'batch', gen: e.batch.gen, pid: e.batch.pid, name: e.batch.name, tables: [...e.batch.tables] });
  else if (e.type === 'overrun') say({ t: 'overrun', detail: e.detail });
  else say({ t: 'unknown', reason: e.reason });
});
// The socket is unref'd (transport.ts): stdin keeps this process alive, and its end ends it.
process.stdin.resume();
process.stdin.on('end', () => {
  watcher.close();
  process.exit(0);
});
process.stdout.on('error', () => process.exit(0));
say({ t: 'ready', recvBufferBytes: watcher.recvBufferBytes() });
