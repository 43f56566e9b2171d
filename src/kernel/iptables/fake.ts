/**
 * An in-memory iptables for unit tests, in the spirit of knftables' `Fake`:
 * it keeps filter and nat tables, applies iptables-restore `--noflush` input
 * with the kernel's rules (a `:CHAIN` line creates or flushes a user chain,
 * `-D` needs a matching rule, `-X` needs an empty, unreferenced chain, a jump
 * needs an existing chain, each `*table ... COMMIT` block is atomic), and
 * prints tables back the way iptables-save does (user chains sorted,
 * `--probability` as the kernel stores it).
 */
import { ReadBackTimeoutError } from '../../errors.ts';
import { canonicalRule } from './canonical.ts';
import { RestoreError, type IptablesExec, type IptablesVariant } from './exec.ts';
import type { TableName } from './parse.ts';
import type { CanaryTable } from './canary.ts';

const BUILTINS: Record<TableName, readonly string[]> = {
  filter: ['INPUT', 'FORWARD', 'OUTPUT'],
  nat: ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'],
};

type Table = Map<string, string[]>;

function emptyTable(name: TableName): Table {
  return new Map(BUILTINS[name].map((c) => [c, []]));
}

function cloneTable(t: Table): Table {
  return new Map([...t].map(([c, rules]) => [c, [...rules]]));
}

function jumpTarget(rule: string): string | undefined {
  return / -j (\S+)/.exec(` ${rule}`)?.[1];
}

/**
 * How many rules of `t` jump to each chain, so that `-X` checks for
 * references in constant time (a full sync that deletes 150,000 chains
 * would otherwise scan every chain once per deletion).
 */
function countJumps(t: Table): Map<string, number> {
  const refs = new Map<string, number>();
  for (const rules of t.values()) for (const r of rules) addJump(refs, r, 1);
  return refs;
}

function addJump(refs: Map<string, number>, rule: string, by: 1 | -1): void {
  const target = jumpTarget(rule);
  if (target !== undefined) refs.set(target, (refs.get(target) ?? 0) + by);
}

/** In-memory IptablesExec. */
export class FakeIptables implements IptablesExec {
  readonly variant: IptablesVariant = 'nft';
  /** Every payload passed to restore(), in order (failed ones included). */
  readonly restores: string[] = [];
  /** Number of save() calls. */
  saves = 0;
  /**
   * While true, a save() never ends by itself, as iptables-nft-save's dump
   * while another program keeps committing (read-back.ts): given a
   * `timeoutMs` it throws ReadBackTimeoutError at once (no time passes in the
   * fake); without one it throws an Error, since it would hang.
   */
  endlessDumps = false;
  /** The `timeoutMs` of every save() call, in order (undefined: none given). */
  readonly saveTimeouts: Array<number | undefined> = [];
  private tables: Record<TableName, Table> = { filter: emptyTable('filter'), nat: emptyTable('nat') };
  private failures: Error[] = [];
  /** The mangle table's chains (only chain existence is kept). */
  private readonly mangle = new Set<string>();
  /** The nf_tables generation: bumped by every successful restore and chain creation, and by {@link commitElsewhere}. */
  private gen = 1;

  /** Make the next restore() fail with `error` before applying anything. */
  failNextRestore(error: Error): void {
    this.failures.push(error);
  }

  async restore(input: string): Promise<void> {
    this.restores.push(input);
    const injected = this.failures.shift();
    if (injected) throw injected;
    const lines = input.split('\n');
    let name: TableName | undefined;
    let work: Table | undefined;
    let refs = new Map<string, number>();
    const fail = (i: number, why: string): never => {
      throw new RestoreError(`iptables-restore: line ${i + 1} failed: ${why}`, i + 1, lines[i]);
    };
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!;
      if (line.trim() === '' || line.startsWith('#')) continue;
      if (line.startsWith('*')) {
        const t = line.slice(1);
        if (t !== 'filter' && t !== 'nat') fail(i, `unknown table ${t}`);
        name = t as TableName;
        work = cloneTable(this.tables[name]);
        refs = countJumps(work);
        continue;
      }
      if (!work || !name) fail(i, 'no table');
      const table = work!;
      if (line === 'COMMIT') {
        this.tables[name!] = table;
        work = undefined;
        continue;
      }
      if (line.startsWith(':')) {
        const chain = line.slice(1).split(' ')[0]!;
        if (!BUILTINS[name!].includes(chain)) {
          for (const r of table.get(chain) ?? []) addJump(refs, r, -1);
          table.set(chain, []);
        }
        continue;
      }
      const m = /^-([ADIX]) (\S+)(?: (.*))?$/.exec(line);
      if (!m) fail(i, 'bad line');
      const [, op, chain, rest = ''] = m!;
      const rules = table.get(chain!);
      if (!rules) fail(i, `no chain ${chain}`);
      if (op === 'X') {
        if (rules!.length > 0) fail(i, `chain ${chain} not empty`);
        if ((refs.get(chain!) ?? 0) > 0) {
          for (const [other, otherRules] of table) {
            if (otherRules.some((r) => jumpTarget(r) === chain)) fail(i, `chain ${chain} referenced from ${other}`);
          }
        }
        table.delete(chain!);
        continue;
      }
      let rule = rest;
      let position = 0;
      if (op === 'I') {
        const pos = /^(\d+) (.*)$/.exec(rest);
        if (pos) {
          position = Number(pos[1]) - 1;
          rule = pos[2]!;
        }
      }
      const target = jumpTarget(rule);
      if (target?.startsWith('KUBE-') && !table.has(target)) fail(i, `jump to missing chain ${target}`);
      const canonical = canonicalRule(rule);
      if (op === 'A') rules!.push(canonical);
      else if (op === 'I') rules!.splice(position, 0, canonical);
      else {
        const at = rules!.indexOf(canonical);
        if (at < 0) fail(i, 'Bad rule (does a matching rule exist in that chain?)');
        rules!.splice(at, 1);
      }
      addJump(refs, canonical, op === 'D' ? -1 : 1);
    }
    if (work) fail(lines.length - 1, 'missing COMMIT');
    this.gen++;
  }

  async chainExists(table: 'mangle' | TableName, chain: string): Promise<boolean> {
    return table === 'mangle' ? this.mangle.has(chain) : this.tables[table].has(chain);
  }

  async listChain(table: CanaryTable, chain: string): Promise<readonly string[] | undefined> {
    if (table === 'mangle') return this.mangle.has(chain) ? [] : undefined;
    const rules = this.tables[table].get(chain);
    return rules ? [...rules] : undefined;
  }

  async ensureChain(table: CanaryTable, chain: string): Promise<void> {
    if (await this.chainExists(table, chain)) return;
    if (table === 'mangle') this.mangle.add(chain);
    else this.tables[table].set(chain, []);
    this.gen++;
  }

  async deleteChain(table: CanaryTable, chain: string): Promise<boolean> {
    if (!(await this.chainExists(table, chain))) return false;
    if (table === 'mangle') this.mangle.delete(chain);
    else this.tables[table].delete(chain);
    this.gen++;
    return true;
  }

  async generation(): Promise<number> {
    return this.gen;
  }

  /** A ruleset commit by someone else (bumps the generation, changes no rule of drover's). */
  commitElsewhere(): void {
    this.gen++;
  }

  /** `iptables -t TABLE -F` behind drover's back: every chain keeps existing, empty (the canary too). */
  flushRules(table: TableName): void {
    for (const rules of this.tables[table].values()) rules.length = 0;
    this.gen++;
  }

  /** Flush a whole table behind drover's back, as a firewall reload does (its canary goes too). */
  flushTable(table: CanaryTable): void {
    if (table === 'mangle') this.mangle.clear();
    else this.tables[table] = emptyTable(table);
    this.gen++;
  }

  async save(table: TableName, opts: { readonly timeoutMs?: number } = {}): Promise<string> {
    this.saves++;
    this.saveTimeouts.push(opts.timeoutMs);
    if (this.endlessDumps) {
      if (opts.timeoutMs !== undefined) throw new ReadBackTimeoutError(`iptables-nft-save -t ${table}`, opts.timeoutMs);
      throw new Error(`iptables-nft-save -t ${table} would never end (FakeIptables.endlessDumps) and was given no timeout`);
    }
    return this.dump(table);
  }

  /** iptables-save text of one table, without the date comments. */
  dump(table: TableName): string {
    const t = this.tables[table];
    const builtins = BUILTINS[table];
    const user = [...t.keys()].filter((c) => !builtins.includes(c)).sort();
    const out = [`*${table}`];
    for (const c of builtins) out.push(`:${c} ACCEPT [0:0]`);
    for (const c of user) out.push(`:${c} - [0:0]`);
    for (const c of [...builtins, ...user]) for (const r of t.get(c) ?? []) out.push(`-A ${c} ${r}`);
    out.push('COMMIT');
    return `${out.join('\n')}\n`;
  }

  /** Direct access for tests that simulate drift (rules of a chain, mutable), or undefined. */
  chain(table: TableName, chain: string): string[] | undefined {
    return this.tables[table].get(chain);
  }

  /** Delete a chain behind drover's back (drift), even if referenced. */
  dropChain(table: TableName, chain: string): void {
    this.tables[table].delete(chain);
  }

  /** Add a user chain with rules behind drover's back. */
  setChain(table: TableName, chain: string, rules: string[]): void {
    this.tables[table].set(chain, rules.map(canonicalRule));
  }
}
