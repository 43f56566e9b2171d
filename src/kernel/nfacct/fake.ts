/**
 * An in-memory {@link Nfacct} for tests: objects are created by `ensure`
 * (counters kept when there) and counted with {@link FakeNfacct.count};
 * `unavailable` makes every call fail as a kernel without nfacct does.
 * Names are checked as the real client checks them.
 */
import { NfacctError, NfacctNotFoundError } from '../../errors.ts';
import { checkCounterName, ensureEachOf } from './codec.ts';
import type { Nfacct, NfacctCounter } from './types.ts';

/** See the module comment. */
export class FakeNfacct implements Nfacct {
  private readonly counters = new Map<string, { packets: number; bytes: number }>();
  /** Every call, in order, e.g. "ensure ct_state_invalid_dropped_pkts", "list". */
  readonly calls: string[] = [];

  /** @param unavailable the errno name every call fails with (e.g. "EPROTONOSUPPORT"); undefined: nfacct works. */
  constructor(public unavailable?: string) {}

  async ensure(name: string): Promise<void> {
    this.calls.push(`ensure ${name}`);
    this.check();
    if (!this.counters.has(checkCounterName(name))) this.counters.set(name, { packets: 0, bytes: 0 });
  }

  ensureEach(names: readonly string[]): Promise<Map<string, Error | undefined>> {
    return ensureEachOf(this, names);
  }

  async get(name: string): Promise<NfacctCounter> {
    this.calls.push(`get ${name}`);
    this.check();
    const c = this.counters.get(checkCounterName(name));
    if (c === undefined) throw new NfacctNotFoundError(name);
    return { name, ...c };
  }

  async list(): Promise<NfacctCounter[]> {
    this.calls.push('list');
    this.check();
    // In creation order, as the kernel lists them (nfnl_acct_new adds at the tail).
    return [...this.counters].map(([name, c]) => ({ name, ...c }));
  }

  close(): void {}

  /**
   * Count `packets` packets of `bytes` bytes in all on object `name`, as a
   * rule with `-m nfacct --nfacct-name NAME` would.
   * @throws NfacctNotFoundError when it does not exist (iptables refuses such a rule).
   */
  count(name: string, packets: number, bytes: number): void {
    const c = this.counters.get(name);
    if (c === undefined) throw new NfacctNotFoundError(name);
    c.packets += packets;
    c.bytes += bytes;
  }

  private check(): void {
    if (this.unavailable !== undefined) throw new NfacctError(`nfacct request refused: Request rejected: ${this.unavailable}`, this.unavailable);
  }
}
