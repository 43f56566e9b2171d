/**
 * The one list of drover's proxy modes. Every command asks it for the
 * driver of `--mode` (driver.ts); adding a mode is one folder under
 * src/modes/ and one line here.
 */
import type { ModeDriver } from './driver.ts';
import { iptablesMode } from './iptables/driver.ts';
import { ipvsMode } from './ipvs/driver.ts';
import { nftablesMode } from './nftables/driver.ts';

let list: readonly ModeDriver[] | undefined;

/**
 * Every mode, in the order `--help` lists them; the first is the default
 * and the reference the bench compares the others with. (A function, so
 * that a driver's module can be loaded before this one.)
 */
export function allModes(): readonly ModeDriver[] {
  return (list ??= [iptablesMode, ipvsMode, nftablesMode]);
}

/** The values of `--mode`. */
export function modeNames(): string[] {
  return allModes().map((m) => m.name);
}

/** The mode of `--mode` when it is not given. */
export function defaultMode(): string {
  return allModes()[0]!.name;
}

/**
 * The driver of mode `name`.
 * @throws Error naming the known modes for any other name (the option parser refuses such values first).
 */
export function modeDriver(name: string): ModeDriver {
  const found = allModes().find((m) => m.name === name);
  if (!found) throw new Error(`unknown mode ${JSON.stringify(name)} (known: ${modeNames().join(', ')})`);
  return found;
}
