/**
 * The cheap drift check of drover's iptables rules (canary.ts explains what
 * it looks at), kept between syncs for both modes that write iptables
 * rules: iptables mode, and IPVS mode's static rules.
 */
import type { Logger } from '../../../util/log.ts';
import { CANARY_CHAIN, CANARY_TABLES } from '../../../kernel/iptables/canary.ts';
import { canonicalRule } from '../../../kernel/iptables/canonical.ts';
import type { IptablesExec } from '../../../kernel/iptables/exec.ts';
import type { TableName } from '../../../kernel/iptables/parse.ts';
import type { StaticRuleset } from './static.ts';

/**
 * What is known of drover's iptables rules since the last full sync: the
 * nf_tables generation after drover's last write, and a reason to suspect
 * drift noticed on the way (a foreign commit seen before a write, canaries
 * that could not be created). The owner calls {@link afterFullSync} after
 * each successful full sync, {@link beforeWrite} and {@link afterWrite}
 * around the restores of a partial sync, and {@link forget} after a failed
 * sync.
 */
export class IptablesDriftWatch {
  /** The nf_tables generation after drover's last write; undefined when unknown or unreadable. */
  private generation: number | undefined;
  /** Why the kernel may have changed since the last full sync. */
  private suspect: string | undefined;

  constructor(
    private readonly exec: IptablesExec,
    private readonly statics: StaticRuleset,
    private readonly logger: Logger,
  ) {}

  /**
   * After a successful full sync: create the canary chains that are
   * missing, and remember the generation. A canary that cannot be created
   * (the xtables lock busy past its wait) is logged, not thrown: the rules
   * are already written; the next check then reports drift.
   */
  async afterFullSync(): Promise<void> {
    this.suspect = await this.ensureCanaries();
    this.generation = await this.readGeneration();
  }

  /** Before a partial sync's write: remember a commit by someone else since drover's last write. */
  async beforeWrite(): Promise<void> {
    await this.noticeForeignCommit();
  }

  /** After a partial sync's write: the generation drover's own commit left. */
  async afterWrite(): Promise<void> {
    this.generation = await this.readGeneration();
  }

  /** After a failed sync, or a cleanup: nothing is known any more. */
  forget(): void {
    this.generation = undefined;
    this.suspect = undefined;
  }

  /**
   * The check: a reason (for the log) when a canary chain is gone from
   * mangle, nat or filter, a hook jump is gone from a built-in chain, or
   * someone else committed nf_tables rules since drover's last write;
   * undefined when nothing suggests drift. One `iptables -S` per canary and
   * per hooked built-in chain, and one NFT_MSG_GETGEN.
   * @throws CommandError when a chain cannot be listed (the caller then syncs in full).
   */
  async check(): Promise<string | undefined> {
    if (this.suspect !== undefined) return this.suspect;
    const missing: string[] = [];
    for (const table of CANARY_TABLES) if ((await this.exec.listChain(table, CANARY_CHAIN)) === undefined) missing.push(table);
    if (missing.length > 0) return `the ${CANARY_CHAIN} chain is gone from ${missing.join(', ')}`;
    const hooks = await missingHooks(this.exec, this.statics);
    if (hooks.length > 0) return `hook rules are gone from ${hooks.join(', ')}`;
    await this.noticeForeignCommit();
    return this.suspect;
  }

  /**
   * Delete the canary chains (cleanup).
   * @returns how many existed.
   * @throws CommandError
   */
  async removeCanaries(): Promise<number> {
    this.forget();
    let removed = 0;
    for (const table of CANARY_TABLES) if (await this.exec.deleteChain(table, CANARY_CHAIN)) removed++;
    return removed;
  }

  private async ensureCanaries(): Promise<string | undefined> {
    try {
      for (const table of CANARY_TABLES) await this.exec.ensureChain(table, CANARY_CHAIN);
      return undefined;
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, `could not create the ${CANARY_CHAIN} chains; the next periodic check reads the kernel back`);
      return `the ${CANARY_CHAIN} chains could not be created: ${(err as Error).message}`;
    }
  }

  /** The nf_tables generation, or undefined when it cannot be read (logged; the canaries still serve). */
  private async readGeneration(): Promise<number | undefined> {
    if (!this.exec.generation) return undefined;
    try {
      return await this.exec.generation();
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'cannot read the nf_tables generation; drift is checked by the canary chains alone');
      return undefined;
    }
  }

  private async noticeForeignCommit(): Promise<void> {
    if (this.generation === undefined) return;
    const now = await this.readGeneration();
    if (now === undefined) return;
    if (now !== this.generation) this.suspect ??= `nf_tables generation ${now}, not ${this.generation} as drover left it: another program committed rules`;
  }
}

/**
 * The built-in chains that lack one of drover's hook jumps (the static
 * rules' hooks), as "table CHAIN": `iptables -F` of a table empties the
 * built-in chains but keeps the (empty) canary chain, so the hooks are
 * checked too. One `iptables -S CHAIN` per built-in chain.
 * @throws CommandError when a chain cannot be listed.
 */
async function missingHooks(exec: IptablesExec, statics: StaticRuleset): Promise<string[]> {
  const byChain = new Map<string, { table: TableName; chain: string; rules: string[] }>();
  for (const h of statics.hooks) {
    const key = `${h.table} ${h.chain}`;
    const entry = byChain.get(key) ?? { table: h.table, chain: h.chain, rules: [] };
    entry.rules.push(canonicalRule(h.rule));
    byChain.set(key, entry);
  }
  const missing: string[] = [];
  for (const [key, { table, chain, rules }] of byChain) {
    const live = new Set((await exec.listChain(table, chain) ?? []).map((r) => canonicalRule(r)));
    if (rules.some((r) => !live.has(r))) missing.push(key);
  }
  return missing;
}
