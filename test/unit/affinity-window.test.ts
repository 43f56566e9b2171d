/** withinWindow (test/support/affinity.ts): a try of an affinity run counts only when every SYN, as bounded by the helper's clock, came less than the window after the one before. */
import test from 'ava';
import type { ProbeSummary } from '../../src/testbed/probe.ts';
import { withinWindow } from '../support/affinity.ts';

/** A run of requests: started at `firstSent`, the first connected at `firstConnected`, the last started at `lastSent`, the longest gap inside it `gap`. */
const run = (firstSent: number, firstConnected: number, lastSent: number, gap: number): ProbeSummary => ({
  counts: {},
  errors: {},
  clientsSeen: {},
  results: [],
  firstSentMs: firstSent,
  firstConnectedMs: firstConnected,
  lastSentMs: lastSent,
  longestGapMs: gap,
});

test('runs whose connections came close together are within the window', (t) => {
  t.true(withinWindow([run(1000, 1010, 2000, 100), run(2100, 2110, 3000, 100)], 1500));
});

test('a gap inside a run as long as the window is not', (t) => {
  t.false(withinWindow([run(1000, 1010, 2000, 1500), run(2100, 2110, 3000, 100)], 1500));
  t.false(withinWindow([run(1000, 1010, 2000, 100), run(2100, 2110, 3000, 1500)], 1500));
});

test('a next run that took its time at once but connected after the window is not: its SYN may have been that late', (t) => {
  // firstSentMs - lastSentMs is 100 ms; the SYN left at most 1,600 ms after the previous one.
  t.false(withinWindow([run(1000, 1010, 2000, 100), run(2100, 3600, 4000, 100)], 1500));
  t.true(withinWindow([run(1000, 1010, 2000, 100), run(2100, 3400, 4000, 100)], 1500));
});
