import FakeTimers from '@sinonjs/fake-timers';
import test from 'ava';
import { BoundedFrequencyRunner } from '../../src/proxier/runner.ts';

/** A runner over a fake clock that records the (fake) time of every run. */
function setup(
  t: { teardown: (fn: () => void) => void },
  opts = { minIntervalMs: 1000, maxIntervalMs: 30_000 },
  fn?: () => Promise<void>,
) {
  const clock = FakeTimers.install({ now: 0, toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  t.teardown(() => clock.uninstall());
  const runs: number[] = [];
  const runner = new BoundedFrequencyRunner(async () => {
    runs.push(Date.now());
    await fn?.();
  }, opts);
  return { clock, runs, runner };
}

test.serial('runs at start, then every max interval when nothing asks', async (t) => {
  const { clock, runs, runner } = setup(t);
  runner.start();
  await clock.tickAsync(65_000);
  t.deepEqual(runs, [0, 30_000, 60_000]);
  await runner.stop();
});

test.serial('a burst of requests becomes one run, no sooner than the min interval', async (t) => {
  const { clock, runs, runner } = setup(t);
  runner.start();
  await clock.tickAsync(100);
  for (let i = 0; i < 10; i++) {
    runner.run();
    await clock.tickAsync(50);
  }
  await clock.tickAsync(2000);
  t.deepEqual(runs, [0, 1000]);
  // A request long after the last run runs at once.
  await clock.tickAsync(5000);
  runner.run();
  await clock.tickAsync(0);
  t.deepEqual(runs, [0, 1000, 7600]);
  await runner.stop();
});

test.serial('a request during a run causes exactly one more run after it', async (t) => {
  let release: () => void = () => undefined;
  const { clock, runs, runner } = setup(t, undefined, () => new Promise<void>((r) => (release = r)));
  runner.start();
  await clock.tickAsync(0);
  runner.run();
  runner.run();
  await clock.tickAsync(3000);
  t.deepEqual(runs, [0], 'no second run while the first is running');
  release();
  await clock.tickAsync(0);
  await clock.tickAsync(1000);
  t.deepEqual(runs, [0, 3000]);
  release();
  await runner.stop();
});

test.serial('retryAfter holds off requests until the backoff has passed', async (t) => {
  const { clock, runs, runner } = setup(t);
  runner.start();
  await clock.tickAsync(10);
  runner.retryAfter(8000);
  for (let i = 0; i < 5; i++) {
    runner.run();
    await clock.tickAsync(1000);
  }
  await clock.tickAsync(5000);
  t.deepEqual(runs, [0, 8010]);
  await runner.stop();
});

test.serial('stop cancels pending runs', async (t) => {
  const { clock, runs, runner } = setup(t);
  runner.start();
  await clock.tickAsync(0);
  runner.run();
  await runner.stop();
  await clock.tickAsync(60_000);
  t.deepEqual(runs, [0]);
});
