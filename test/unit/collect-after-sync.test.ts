import test from 'ava';
import FakeTimers from '@sinonjs/fake-timers';
import { execFileSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { collectAfterSyncs, leavesGarbage } from '../../src/proxier/collect-after-sync.ts';
import type { LastSync, SyncListener } from '../../src/proxier/proxier.ts';
import type { SyncResult } from '../../src/proxier/backend.ts';
import { collectGarbage, collectWhenGrown, heapGrownBy } from '../../src/util/gc.ts';
import { moduleArgv } from '../../src/util/node-module.ts';

/** A proxier stand-in whose sync listeners the test calls. */
function fakeProxier() {
  const listeners = new Set<SyncListener>();
  return {
    on: (_event: 'sync', l: SyncListener) => {
      listeners.add(l);
      return () => {
        listeners.delete(l);
      };
    },
    sync: (last: LastSync) => {
      for (const l of listeners) l(last);
    },
    get listening() {
      return listeners.size;
    },
  };
}

const sync = (full: boolean, transactions: number, error?: string): LastSync => ({
  at: 0,
  full,
  durationMs: 1,
  incomplete: [],
  ...(error !== undefined ? { error } : { result: { transactions } as SyncResult }),
});

test('a full sync (also a failed one) or one that wrote leaves garbage; a partial one that wrote nothing, or failed, does not', (t) => {
  t.true(leavesGarbage(sync(true, 0)));
  t.true(leavesGarbage(sync(false, 1)));
  t.false(leavesGarbage(sync(false, 0)));
  t.true(leavesGarbage(sync(true, 0, 'iptables-restore failed')));
  t.false(leavesGarbage(sync(false, 0, 'iptables-restore failed')));
});

test('a burst of syncs is collected once, after the quiet time that follows its last one', (t) => {
  const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout'] });
  t.teardown(() => clock.uninstall());
  const proxier = fakeProxier();
  let collected = 0;
  collectAfterSyncs(proxier, 1000, () => collected++);
  proxier.sync(sync(true, 3));
  clock.tick(600);
  proxier.sync(sync(false, 1));
  clock.tick(600);
  t.is(collected, 0);
  clock.tick(400);
  t.is(collected, 1);
  proxier.sync(sync(false, 0)); // the periodic check of a quiet node
  clock.tick(5000);
  t.is(collected, 1);
});

test('stopping cancels a pending collection and stops listening', (t) => {
  const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout'] });
  t.teardown(() => clock.uninstall());
  const proxier = fakeProxier();
  let collected = 0;
  const stop = collectAfterSyncs(proxier, 1000, () => collected++);
  proxier.sync(sync(true, 1));
  stop();
  clock.tick(5000);
  t.is(collected, 0);
  t.is(proxier.listening, 0);
});

test.serial('collectGarbage frees unreachable objects at once, without --expose-gc', (t) => {
  t.is(typeof (globalThis as { gc?: unknown }).gc, 'undefined');
  let garbage: Array<{ i: number; s: string }> | undefined = [];
  for (let i = 0; i < 1_000_000; i++) garbage.push({ i, s: `x${i}` });
  const before = process.memoryUsage().heapUsed;
  garbage = undefined;
  t.true(collectGarbage());
  t.true(process.memoryUsage().heapUsed < before - 30 * 1024 * 1024);
  t.is(typeof (globalThis as { gc?: unknown }).gc, 'undefined');
});

test.serial('collectWhenGrown collects only once the heap has grown past the bound since the last collection', (t) => {
  collectGarbage(); // the baseline: the heap after a collection
  const bound = 40 * 1024 * 1024;
  t.false(collectWhenGrown(bound), 'nothing allocated since');
  let garbage: Array<{ i: number; s: string }> | undefined = [];
  for (let i = 0; i < 1_000_000; i++) garbage.push({ i, s: `x${i}` });
  t.false(collectWhenGrown(1024 * 1024 * 1024), 'within a larger bound');
  const before = process.memoryUsage().heapUsed;
  garbage = undefined;
  t.true(collectWhenGrown(bound));
  t.true(process.memoryUsage().heapUsed < before - 30 * 1024 * 1024, 'the garbage is gone');
  t.false(collectWhenGrown(bound), 'the new baseline is the heap after that collection');
});

test('under a stream of syncs closer than the quiet time, a collection comes right after the first sync past the longest wait', (t) => {
  const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'] });
  t.teardown(() => clock.uninstall());
  const proxier = fakeProxier();
  const collected: number[] = [];
  collectAfterSyncs(proxier, 1000, () => collected.push(Date.now()), 2000, undefined, () => true);
  for (let i = 0; i < 10; i++) {
    proxier.sync(sync(false, 1)); // at 0, 900, 1800, 2700 (2 s past the first: collected), 3600 (the next first), ..., 6300 (collected), 7200, 8100
    clock.tick(900);
  }
  t.deepEqual(collected, [2700, 6300]);
  clock.tick(1000);
  t.deepEqual(collected, [2700, 6300, 9100], 'the last burst, once quiet');
});

test('partial syncs that leave little garbage (the heap has not grown by the bound) never force a collection, in a stream or once quiet; one past the bound is collected once quiet', (t) => {
  const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'] });
  t.teardown(() => clock.uninstall());
  const proxier = fakeProxier();
  const collected: number[] = [];
  let grown = false;
  collectAfterSyncs(proxier, 1000, () => collected.push(Date.now()), 2000, undefined, () => grown);
  for (let i = 0; i < 5; i++) {
    proxier.sync(sync(false, 1)); // at 0, 900, 1800, 2700, 3600
    clock.tick(900);
  }
  clock.tick(5000);
  t.deepEqual(collected, [], 'no collection while the heap has not grown');
  grown = true;
  proxier.sync(sync(false, 1)); // at 9500, grown
  clock.tick(999);
  t.deepEqual(collected, []);
  clock.tick(1);
  t.deepEqual(collected, [10500]);
});

test('a partial sync that leaves little garbage postpones a pending collection of a full sync, so that it does not fall in a burst', (t) => {
  const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'] });
  t.teardown(() => clock.uninstall());
  const proxier = fakeProxier();
  const collected: number[] = [];
  collectAfterSyncs(proxier, 1000, () => collected.push(Date.now()), 2000, undefined, () => false);
  proxier.sync(sync(true, 3)); // at 0
  clock.tick(800);
  proxier.sync(sync(false, 1)); // at 800
  clock.tick(999);
  t.deepEqual(collected, []);
  clock.tick(1);
  t.deepEqual(collected, [1800]);
});

test('heapGrownBy: true by more than the bound since the last collection, false after one', (t) => {
  const bound = 16 * 1024 * 1024;
  t.true(collectGarbage(), 'the runtime offers a collection');
  t.false(heapGrownBy(bound));
  const garbage: unknown[] = [];
  for (let i = 0; i < 400_000; i++) garbage.push({ i, s: `x${i}` });
  t.true(heapGrownBy(bound), `grown by ${bound} bytes`);
  garbage.length = 0;
  collectGarbage();
  t.false(heapGrownBy(bound));
});

test('collectWhenGrown\'s first call in a process sets the baseline and does not collect (a small first sync blocks on no collection)', (t) => {
  // A fresh process: the module keeps its baseline for the life of the process.
  const [node, ...loader] = moduleArgv(import.meta.url, '../../src/util/gc');
  const gc = loader.pop()!;
  const script = `import { collectWhenGrown } from ${JSON.stringify(pathToFileURL(gc).href)};
    const first = collectWhenGrown(1024 * 1024 * 1024);
    const second = collectWhenGrown(1024 * 1024 * 1024);
    console.log(JSON.stringify([first, second]));`;
  const out = execFileSync(node!, [...loader, '--input-type=module', '-e', script], { encoding: 'utf8' });
  t.deepEqual(JSON.parse(out), [false, false]);
});
