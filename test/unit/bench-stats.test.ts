import test from 'ava';
import { median, percentile } from '../../src/bench/stats.ts';

test('nearest-rank percentiles', (t) => {
  const s = [15, 20, 35, 40, 50];
  t.is(percentile(s, 5), 15);
  t.is(percentile(s, 30), 20);
  t.is(percentile(s, 40), 20);
  t.is(percentile(s, 50), 35);
  t.is(percentile(s, 100), 50);
  t.is(percentile([3, 1, 2], 50), 2);
  t.throws(() => percentile([], 50));
  t.throws(() => percentile([1], 101));
});

test('median of odd and even counts', (t) => {
  t.is(median([5, 1, 3]), 3);
  t.is(median([4, 1, 3, 2]), 2.5);
  t.throws(() => median([]));
});
