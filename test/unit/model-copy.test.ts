/** Frozen copies for the Snapshot (src/model/copy.ts). */
import test from 'ava';
import { frozenCopy, frozenCopyWith } from '../../src/model/copy.ts';

test('frozenCopy and frozenCopyWith: the same properties in the same order, frozen, the original untouched', (t) => {
  const a = { ip: '10.0.0.1', ready: true, port: 1 };
  const viaObject = frozenCopy(a, { port: 8080, zone: 'z1' });
  const viaKey = frozenCopyWith(a, 'port', 8080);
  t.deepEqual(viaObject, { ip: '10.0.0.1', ready: true, port: 8080, zone: 'z1' });
  t.deepEqual(viaKey, { ip: '10.0.0.1', ready: true, port: 8080 });
  t.deepEqual(Object.keys(frozenCopyWith({ ip: '10.0.0.1' }, 'port', 80)), ['ip', 'port']);
  t.true(Object.isFrozen(viaObject) && Object.isFrozen(viaKey));
  t.false(Object.isFrozen(a));
  t.is(a.port, 1);
});

test('frozen copies take own properties only, never inherited ones', (t) => {
  const o = Object.assign(Object.create({ inherited: 'x' }) as { ip?: string }, { ip: '10.0.0.1' });
  t.deepEqual(Object.keys(frozenCopy(o)), ['ip']);
  t.deepEqual(Object.keys(frozenCopyWith(o, 'port', 80)), ['ip', 'port']);
});
