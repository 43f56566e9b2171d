/**
 * iptables mode on the fake iptables (driver.ts ModeDriver.fake): the
 * backend `run` uses, writing restore payloads to FakeIptables, traced from
 * what `iptables-save` of the fake gives.
 */
import { silentLogger } from '../../util/log.ts';
import type { FakeMode, FakeModeOptions } from '../driver.ts';
import { IptablesBackend } from './backend.ts';
import { FakeIptables } from '../../kernel/iptables/fake.ts';
import { readTables } from '../../kernel/iptables/live.ts';
import { iptablesTraceContext } from '../shared/kube-chains/trace.ts';

/** iptables mode on a fresh FakeIptables; every address in `opts.nodeAddresses` is local (`-m addrtype --dst-type LOCAL`). */
export function iptablesFakeMode(opts: FakeModeOptions): FakeMode {
  const fake = new FakeIptables();
  return {
    backend: new IptablesBackend({ exec: fake, render: opts.render, logger: silentLogger() }),
    written: () => [...fake.restores],
    trace: async () => iptablesTraceContext(await readTables(fake), new Set(opts.nodeAddresses)),
  };
}
