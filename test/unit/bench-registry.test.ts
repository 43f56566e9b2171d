/** The bench's registry (src/bench/modes/registry.ts) has a harness for every mode of the mode registry, and only for those. */
import test from 'ava';
import { benchModeNames, modeBench } from '../../src/bench/modes/registry.ts';
import { modeNames } from '../../src/modes/registry.ts';

test('every registered mode has a bench harness, and the bench knows no other mode', (t) => {
  t.deepEqual([...benchModeNames()].sort(), [...modeNames()].sort());
  for (const name of modeNames()) t.true(['process', 'namespace'].includes(modeBench(name).placement), name);
});

test('a mode without a harness is an error naming the modes that have one', (t) => {
  t.throws(() => modeBench('userspace'), { message: 'no bench harness for mode "userspace" (there is one for: iptables, ipvs, nftables)' });
  t.throws(() => modeBench('toString'), { message: /no bench harness for mode "toString"/ });
});
