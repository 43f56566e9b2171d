/**
 * The kernel clock's listener process of `drover bench`, started by
 * kernel-events.ts inside the node namespace (`ip netns exec NODE node
 * kernel-listener.ts`). It joins NETLINK_NETFILTER's NFNLGRP_NFTABLES group
 * and stamps every generation commit (NFT_MSG_NEWGEN) with
 * process.hrtime.bigint() the moment its datagram is read; a process of its
 * own, so that the agent's event loop never delays a stamp.
 *
 * Protocol, one JSON object per line:
 * - out `{"t":"ready"}` once it is a member of the group;
 * - in `{"id","t0","deadlineMs"}` (t0: hrtime ns, decimal string), sent once
 *   the change's writer returned: it reads the generation id G now
 *   (NFT_MSG_GETGEN, the last commit, which the writer's own ended) and
 *   answers `{"t":"commit","id","gen":G,"at","by"}` when G's NEWGEN was read
 *   (`at`: its stamp, ns; `by`: the committing process's name), or
 *   `{"t":"commit","id","gen":G,"lost"}` saying why there is no stamp: G's
 *   NEWGEN came before t0 (the change committed nothing), the socket
 *   overflowed since t0 (ENOBUFS: notifications were dropped) and G's
 *   NEWGEN did not come within a second, or the deadline passed.
 * Ends when stdin closes.
 */
import { createInterface } from 'node:readline';
import { NFNLGRP_NFTABLES } from '../kernel/nftables/constants.ts';
import { NftNetlinkClient } from '../kernel/nftables/client.ts';
import { scanNotifications } from '../kernel/nftables/notify.ts';
import { openNfnlTransport } from '../kernel/nftables/transport.ts';

/** SO_RCVBUF asked for: a full sync announces tens of MiB; the kernel caps it at net.core.rmem_max (doubled). */
const RECV_BUFFER = 256 * 1024 * 1024;
/** How long G's NEWGEN may still come after an overflow, ms. */
const AFTER_OVERFLOW_MS = 1000;
/** Commits remembered (a change makes a few). */
const KEEP = 4096;

interface Ask {
  readonly id: number;
  readonly t0: string;
  readonly deadlineMs: number;
}

const say = (msg: Record<string, unknown>): void => {
  process.stdout.write(`${JSON.stringify(msg)}\n`);
};

async function main(): Promise<void> {
  const listener = openNfnlTransport(RECV_BUFFER, 64 * 1024, [NFNLGRP_NFTABLES]);
  const client = await NftNetlinkClient.open({ recvBufferBytes: 1024 * 1024, sendBufferBytes: 64 * 1024 });
  const commits = new Map<number, { at: bigint; by: string }>();
  let overflowAt: bigint | undefined;
  let fatal: Error | undefined;
  const waiters = new Set<() => void>();
  const wake = (): void => {
    for (const w of [...waiters]) w();
  };
  listener.onDatagram((d) => {
    const at = process.hrtime.bigint();
    try {
      for (const c of scanNotifications(d).commits) {
        commits.set(c.gen, { at, by: c.name ?? `pid ${c.pid ?? '?'}` });
        if (commits.size > KEEP) commits.delete(commits.keys().next().value!);
      }
    } catch (err) {
      fatal = err as Error;
    }
    wake();
  });
  listener.onError((err) => {
    if ((err as { code?: string }).code === 'ENOBUFS') overflowAt = process.hrtime.bigint();
    else fatal = err;
    wake();
  });

  const answer = async (ask: Ask): Promise<void> => {
    const t0 = BigInt(ask.t0);
    const gen = await client.generation();
    const asked = Date.now();
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => check(), 50);
      const done = (msg: Record<string, unknown>): void => {
        clearInterval(timer);
        waiters.delete(check);
        say({ t: 'commit', id: ask.id, gen, ...msg });
        resolve();
      };
      function check(): void {
        const c = commits.get(gen);
        if (c) {
          if (c.at < t0) done({ lost: `generation ${gen} was committed before the change started: the change committed nothing` });
          else done({ at: String(c.at), by: c.by });
        } else if (fatal) done({ lost: `the listener failed: ${fatal.message}` });
        else if (overflowAt !== undefined && overflowAt >= t0 && Date.now() - asked > AFTER_OVERFLOW_MS)
          done({ lost: 'notifications were dropped (ENOBUFS: the receive buffer overflowed) and the commit notification with them' });
        else if (Date.now() - asked > ask.deadlineMs) done({ lost: `no commit notification of generation ${gen} within ${ask.deadlineMs} ms` });
      }
      waiters.add(check);
      check();
    });
  };

  say({ t: 'ready', recvBufferBytes: listener.recvBufferBytes() });
  // One question at a time, in order.
  let queue = Promise.resolve();
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim() === '') continue;
    const ask = JSON.parse(line) as Ask;
    queue = queue.then(() => answer(ask)).catch((err: unknown) => say({ t: 'commit', id: ask.id, lost: `reading the generation failed: ${(err as Error).message}` }));
  }
  await queue;
  listener.close();
  client.close();
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`kernel listener: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
