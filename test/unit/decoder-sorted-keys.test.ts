/**
 * The Decoder's sorted group keys (decoder.ts SortedKeys): over random
 * adds and deletes, one change at a time or many at once, the list is
 * always every key held, sorted as a sort of them all would sort them.
 */
import test from 'ava';
import fc from 'fast-check';
import { compareStrings } from '../../src/model/order.ts';
import { SortedKeys } from '../../src/sources/decoder.ts';

test('the kept key list is the held keys sorted by compareStrings, after any adds and deletes', (t) => {
  fc.assert(
    fc.property(fc.array(fc.array(fc.tuple(fc.boolean(), fc.constantFrom('a', 'b', 'B', 'a/b', 'ab', 'Service/x', 'Service/y', 'é', '', 'z', 'k1', 'k10', 'k2')), { maxLength: 20 }), { maxLength: 10 }), (batches) => {
      const keys = new SortedKeys();
      const held = new Set<string>();
      for (const batch of batches) {
        for (const [add, key] of batch) {
          if (add && !held.has(key)) {
            keys.add(key);
            held.add(key);
          } else if (!add && held.has(key)) {
            keys.delete(key);
            held.delete(key);
          }
        }
        t.deepEqual(keys.sorted(), [...held].sort(compareStrings));
      }
    }),
    { numRuns: 500, seed: 7 },
  );
});
