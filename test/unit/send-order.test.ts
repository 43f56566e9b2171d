/**
 * The decision of the paced probes (src/bench/send-order.mjs): the send
 * time of the first run of consecutive qualifying attempts, by send order,
 * decided only once every attempt sent before it has finished.
 */
import test from 'ava';
import { SendOrder } from '../../src/bench/send-order.mjs';

test('the first qualifying attempt by send order wins, not the first to finish', (t) => {
  const o = new SendOrder(1);
  const a = o.push(100n); // a dropped SYN, still waiting
  const b = o.push(110n); // the rule landed: answered at once
  const c = o.push(120n);
  t.is(o.settle(b, true), undefined, 'an earlier attempt is still in flight: it could qualify too');
  t.is(o.settle(c, true), undefined);
  t.is(o.inFlight, 1);
  t.is(o.settle(a, false), 110n, 'the earlier one failed: the first qualifying is b');
  t.is(o.inFlight, 0);
});

test('an earlier attempt that qualifies after a later one still gives its own send time', (t) => {
  const o = new SendOrder(1);
  const a = o.push(5n);
  const b = o.push(15n);
  t.is(o.settle(b, true), undefined);
  t.is(o.settle(a, true), 5n);
  t.is(o.settle(b, true), 5n, 'decided once, it stays');
});

test('a run of N counts consecutive attempts by send order and restarts on a miss', (t) => {
  const o = new SendOrder(3);
  const sent = [10n, 20n, 30n, 40n, 50n, 60n];
  const ix = sent.map((s) => o.push(s));
  // Finished out of order: 20 fails, the rest qualify; the first run of 3 is 30, 40, 50.
  t.is(o.settle(ix[5]!, true), undefined);
  t.is(o.settle(ix[3]!, true), undefined);
  t.is(o.settle(ix[0]!, true), undefined);
  t.is(o.settle(ix[2]!, true), undefined);
  t.is(o.settle(ix[1]!, false), undefined, '30, 40 in a row, 50 not finished');
  t.is(o.settle(ix[4]!, true), 30n);
});

test('nothing qualifies: no answer, however many attempts', (t) => {
  const o = new SendOrder(1);
  for (let i = 0; i < 100; i++) t.is(o.settle(o.push(BigInt(i)), false), undefined);
  t.is(o.inFlight, 0);
});

test('a need below 1 is 1', (t) => {
  const o = new SendOrder(0);
  t.is(o.settle(o.push(7n), true), 7n);
});
