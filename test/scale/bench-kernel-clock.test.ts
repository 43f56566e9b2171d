/**
 * The bench's kernel clock by commit notification (src/bench/kernel-events.ts)
 * at scale, against the real kernel in a fresh network namespace (npm run
 * test:scale): a commit of 200,000 elements gets an answer, a stamp or a
 * reason, never a hang, and the listener goes on.
 */
import test from 'ava';
import { existsSync } from 'node:fs';
import { KernelEvents } from '../../src/bench/kernel-events.ts';
import { run } from '../../src/kernel/exec.ts';
import { withNetns } from '../../src/testbed/netns.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';

const NFT = '/usr/sbin/nft';
const unavailable = (await testbedUnavailableReason()) ?? (existsSync(NFT) ? undefined : `${NFT} is not installed`);
const ms = (from: bigint, to: bigint): number => Number(to - from) / 1e6;

if (unavailable) {
  test('kernel clock at scale (skipped)', (t) => t.pass(`skipped: ${unavailable}`));
} else {
  test.serial('a commit of 200,000 elements gets an answer: its stamp, or the notifications it lost', async (t) => {
    await withNetns(async (netns) => {
      await run(NFT, ['-f', '-'], { netns, input: 'add table ip t\nadd set ip t s { type ipv4_addr; }\n' });
      const events = await KernelEvents.start(netns);
      try {
        const keys = Array.from({ length: 200_000 }, (_, i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
        const t0 = process.hrtime.bigint();
        await run(NFT, ['-f', '-'], { netns, input: `add element ip t s { ${keys.join(', ')} }\n`, timeoutMs: 120_000 });
        const returned = process.hrtime.bigint();
        const stamp = await events.commitAfter(t0, 30_000);
        t.log('atNs' in stamp ? `stamp ${ms(t0, stamp.atNs).toFixed(0)} ms, nft returned at ${ms(t0, returned).toFixed(0)} ms` : stamp.lost);
        if ('atNs' in stamp) t.true(stamp.atNs > t0 && ms(returned, stamp.atNs) < 1000, 'stamped within a second of the writer');
        else t.regex(stamp.lost, /ENOBUFS/);
        // The listener goes on: the next small commit is stamped.
        const t1 = process.hrtime.bigint();
        await run(NFT, ['-f', '-'], { netns, input: 'add element ip t s { 11.0.0.1 }\n' });
        t.true('atNs' in (await events.commitAfter(t1, 5000)));
      } finally {
        await events.close();
      }
    });
  });
}
