/**
 * The bench's list of harnesses: one {@link ModeBench} per proxy mode of
 * src/modes/registry.ts, by the mode's name (`--mode`). The bench finds a
 * mode's harness only here; the modes themselves know nothing of the bench.
 * Adding a mode to the bench is one folder under src/bench/modes/ and one
 * line here.
 */
import type { ModeBench } from '../harness.ts';
import { iptablesBench } from './iptables/bench.ts';
import { ipvsBench } from './ipvs/bench.ts';
import { nftablesBench } from './nftables/bench.ts';

const BENCHES: Readonly<Record<string, ModeBench>> = {
  iptables: iptablesBench,
  ipvs: ipvsBench,
  nftables: nftablesBench,
};

/** The names of the modes the bench can measure, in no particular order (the mode registry orders them). */
export function benchModeNames(): string[] {
  return Object.keys(BENCHES);
}

/**
 * The bench of mode `name`.
 * @throws Error naming the modes that have one, for a mode without a harness.
 */
export function modeBench(name: string): ModeBench {
  const found = Object.hasOwn(BENCHES, name) ? BENCHES[name] : undefined;
  if (!found) throw new Error(`no bench harness for mode ${JSON.stringify(name)} (there is one for: ${benchModeNames().join(', ')})`);
  return found;
}
