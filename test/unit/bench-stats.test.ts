import test from 'ava';
import { median, percentile, summarise } from '../../src/bench/stats.ts';

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

test('summarise: n, p50, p95, p99 and max by nearest rank', (t) => {
  const s = Array.from({ length: 100 }, (_, i) => 100 - i); // 100, 99, ..., 1
  t.deepEqual(summarise(s), { n: 100, p50: 50, p95: 95, p99: 99, max: 100 });
  t.deepEqual(summarise([7]), { n: 1, p50: 7, p95: 7, p99: 7, max: 7 });
  t.deepEqual(summarise([4, 1, 3, 2]), { n: 4, p50: 2, p95: 4, p99: 4, max: 4 });
  t.deepEqual(summarise([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 1000]), { n: 21, p50: 11, p95: 20, p99: 1000, max: 1000 });
  t.throws(() => summarise([]));
});
