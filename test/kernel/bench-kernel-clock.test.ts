/**
 * The bench's kernel clock by commit notification (src/bench/kernel-events.ts)
 * against the real kernel, in a fresh network namespace per test: the
 * listener stamps the NEWGEN of the transaction that ended a change, for
 * nft and for iptables-nft, and says when nothing was committed. The commit
 * of 200,000 elements is in test/scale/bench-kernel-clock (npm run test:scale).
 */
import test from 'ava';
import { existsSync } from 'node:fs';
import { KernelEvents } from '../../src/bench/kernel-events.ts';
import { run } from '../../src/kernel/exec.ts';
import { withNetns } from '../../src/testbed/netns.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';

const NFT = '/usr/sbin/nft';
const IPTABLES_NFT_RESTORE = '/usr/sbin/iptables-nft-restore';
const unavailable = (await testbedUnavailableReason()) ?? (existsSync(NFT) ? undefined : `${NFT} is not installed`);
const ms = (from: bigint, to: bigint): number => Number(to - from) / 1e6;

if (unavailable) {
  test('kernel clock by commit notification (skipped)', (t) => t.pass(`skipped: ${unavailable}`));
} else {
  test.serial('the stamp is the commit of the change: after its start, before its writer returned, named by the committing process', async (t) => {
    await withNetns(async (netns) => {
      const events = await KernelEvents.start(netns);
      try {
        t.true(events.recvBufferBytes >= 1024 * 1024, `SO_RCVBUF ${events.recvBufferBytes}`);
        const t0 = process.hrtime.bigint();
        await run(NFT, ['-f', '-'], { netns, input: 'add table ip t\nadd set ip t s { type ipv4_addr; }\n' });
        const returned = process.hrtime.bigint();
        const first = await events.commitAfter(t0, 5000);
        if (!('atNs' in first)) return t.fail(first.lost);
        t.true(first.atNs > t0 && first.atNs <= returned + 50_000_000n, `stamp ${ms(t0, first.atNs)} ms, writer returned at ${ms(t0, returned)} ms`);
        t.is(first.by, 'nft');

        // The next transaction has the next generation id.
        const t1 = process.hrtime.bigint();
        await run(NFT, ['-f', '-'], { netns, input: 'add element ip t s { 10.0.0.1 }\n' });
        const second = await events.commitAfter(t1, 5000);
        if (!('atNs' in second)) return t.fail(second.lost);
        t.is(second.gen, first.gen + 1);
        t.true(second.atNs > t1);

        // Nothing committed since t2: no stamp, and why.
        const t2 = process.hrtime.bigint();
        const none = await events.commitAfter(t2, 5000);
        t.like(none, { lost: `generation ${second.gen} was committed before the change started: the change committed nothing` });
      } finally {
        await events.close();
      }
    });
  });

  test.serial('iptables-nft commits through nf_tables: its restore is announced the same way', async (t) => {
    if (!existsSync(IPTABLES_NFT_RESTORE)) return t.pass(`${IPTABLES_NFT_RESTORE} is not installed`);
    await withNetns(async (netns) => {
      const events = await KernelEvents.start(netns);
      try {
        const t0 = process.hrtime.bigint();
        await run(IPTABLES_NFT_RESTORE, ['--noflush'], { netns, input: '*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp --dport 80 -j RETURN\nCOMMIT\n' });
        const stamp = await events.commitAfter(t0, 5000);
        if (!('atNs' in stamp)) return t.fail(stamp.lost);
        t.regex(stamp.by, /tables/, 'the iptables-nft process committed');
        t.true(stamp.atNs > t0);
      } finally {
        await events.close();
      }
    });
  });
}
