/**
 * An in-memory nft for unit tests (as knftables' Fake): it runs the scripts
 * nftables mode writes (script.ts) against a table held in memory, all of
 * a script or nothing, and lists that table as `nft -j` would (live.ts
 * LiveTable). It knows only the statements script.ts writes; anything
 * else is refused, as a kernel would refuse a bad transaction. An element
 * writer over the same table stands for nf_tables netlink.
 */
import { CommandError } from '../../kernel/exec.ts';
import type { ElementWriter } from './backend.ts';
import type { NftExec, RulesAdded } from './exec.ts';
import type { NetlinkRuleOf } from './netlink-rules.ts';
import type { IPFamily } from '../../model/types.ts';
import { tableRef } from './layout.ts';
import type { LiveChain, LiveSet, LiveTable } from './live.ts';
import type { ElementOp } from './model.ts';

interface FakeSet {
  keyType: string;
  mapType?: string;
  elements: Map<string, string | undefined>;
}

interface FakeTable {
  sets: Map<string, FakeSet>;
  chains: Map<string, { base?: LiveChain['base']; comments: (string | null)[] }>;
}

/** The key and value types nft -j reports for a declaration body (script.ts setBlock). */
function typesOf(body: string): { keyType: string; mapType?: string } {
  const typeof_ = /typeof (ip6?) daddr \. meta l4proto \. tcp dport \. numgen random mod 1 : ip6? daddr \. tcp dport/.exec(body);
  const addr = typeof_?.[1] === 'ip6' ? 'ipv6_addr' : 'ipv4_addr';
  if (typeof_) return { keyType: `${addr} . inet_proto . inet_service . integer`, mapType: `${addr} . inet_service` };
  const m = /type ([a-z0-9_ .]+?)(?: : ([a-z0-9_ .]+?))?(?:;|\n|$)/.exec(body);
  if (!m) throw new Error(`fake nft: no type in ${JSON.stringify(body)}`);
  return { keyType: m[1]!.trim(), ...(m[2] ? { mapType: m[2].trim() } : {}) };
}

/**
 * nft 1.0.6 aborts on a map update whose key or value has a field 16 bytes or more into it (affinity-rule.ts): the
 * IPv6 affinity record rule, which drover writes over netlink instead. The fake refuses it as nft would.
 */
function refuseAsNft(rule: string): void {
  if (/update @\S+ \{ ip6 saddr \. ct original ip6 daddr/.test(rule)) throw new CommandError('nft -f', 134, "nft: netlink_linearize.c:799: netlink_gen_expr: Assertion `dreg < ctx->reg_low' failed.");
}

function commentOf(rule: string): string | null {
  const m = / comment "([^"]*)"$/.exec(rule);
  return m ? m[1]! : null;
}

function clone(t: FakeTable | undefined): FakeTable | undefined {
  if (!t) return undefined;
  return {
    sets: new Map([...t.sets].map(([k, v]) => [k, { ...v, elements: new Map(v.elements) }])),
    chains: new Map([...t.chains].map(([k, v]) => [k, { ...v, comments: [...v.comments] }])),
  };
}

/** The in-memory nft, of the table of `family` (default IPv4: `ip drover`; IPv6: `ip6 drover`). */
export class FakeNft implements NftExec {
  private table: FakeTable | undefined;
  /** The table's name in statements: `ip drover`, `ip6 drover`. */
  private readonly T: string;

  constructor(readonly family: IPFamily = 'IPv4') {
    this.T = tableRef(family);
  }

  /** Every script run, in order. */
  readonly scripts: string[] = [];
  private elementCommits = 0;
  /** Make the next `run` (or element commit) fail with this message, once. */
  failNext: string | undefined;

  async run(script: string): Promise<void> {
    this.scripts.push(script);
    if (this.failNext !== undefined) {
      const message = this.failNext;
      this.failNext = undefined;
      throw new CommandError('nft -f', 1, message);
    }
    const work = clone(this.table);
    this.table = this.exec(script, work);
  }

  /** Apply element operations as one transaction (the netlink writer's part). @throws CommandError as the kernel would (ENOENT, EEXIST). */
  commitElements(ops: readonly ElementOp[]): void {
    if (this.failNext !== undefined) {
      const message = this.failNext;
      this.failNext = undefined;
      throw new CommandError('netlink', 1, message);
    }
    const work = clone(this.table);
    if (!work) throw new CommandError('netlink', 1, 'No such file or directory: table');
    for (const op of ops) this.element(work, op.op, op.set, op.value === undefined ? op.key : `${op.key} : ${op.value}`);
    this.table = work;
    this.elementCommits++;
  }

  /** Rules written over netlink, in order, each as `chain: comment`. */
  readonly netlinkRules: string[] = [];

  /**
   * Write rules as the netlink transaction of SystemNft.addRules would, all or none: a pick rule in place of the one
   * rule with its `replaces` comment, any other appended.
   * @throws CommandError for a missing chain, or a rule to replace that is missing or not unique.
   */
  async addRules(rules: readonly NetlinkRuleOf[]): Promise<RulesAdded> {
    if (rules.length === 0) return { bytes: 0, transactions: 0 };
    if (this.failNext !== undefined) {
      const message = this.failNext;
      this.failNext = undefined;
      throw new CommandError('netlink', 1, message);
    }
    const work = clone(this.table);
    for (const r of rules) {
      if (!r.rule.netlink) throw new CommandError('netlink', 1, `not a netlink rule: ${r.rule.comment}`);
      const c = work?.chains.get(r.chain);
      if (!c) throw new CommandError('netlink', 1, `No such file or directory: chain ${r.chain}`);
      const spec = r.rule.netlink;
      if (spec.kind !== 'pick') {
        c.comments.push(r.rule.comment);
        continue;
      }
      const at = c.comments.indexOf(spec.replaces);
      if (at < 0 || c.comments.lastIndexOf(spec.replaces) !== at) throw new CommandError('netlink', 1, `no single rule "${spec.replaces}" to replace in chain ${r.chain}`);
      c.comments[at] = r.rule.comment;
    }
    this.table = work;
    this.elementCommits++;
    this.netlinkRules.push(...rules.map((r) => `${r.chain}: ${r.rule.comment}`));
    return { bytes: rules.length * 256, transactions: 1 };
  }

  /** An element writer over this table. */
  writer(): ElementWriter {
    return {
      commit: async (ops) => (this.commitElements(ops), ops.length * 64),
      read: async (set) => this.readElements(set),
      generation: async () => this.generationId,
    };
  }

  /** The generation id: one more for every transaction that went through. */
  get generationId(): number {
    return this.scripts.length + this.elementCommits;
  }

  async list(opts: { readonly terse?: boolean } = {}): Promise<LiveTable> {
    const t = this.table;
    if (!t) return { exists: false, sets: new Map(), chains: new Map() };
    const sets = new Map<string, LiveSet>();
    for (const [name, s] of t.sets) sets.set(name, { keyType: s.keyType, ...(s.mapType ? { mapType: s.mapType } : {}), elements: opts.terse ? new Map() : new Map(s.elements) });
    const chains = new Map<string, LiveChain>();
    for (const [name, c] of t.chains) chains.set(name, { ...(c.base ? { base: c.base } : {}), comments: [...c.comments] });
    return { exists: true, sets, chains };
  }

  async listSet(name: string): Promise<LiveSet | undefined> {
    return (await this.list()).sets.get(name);
  }

  /** Read one set's elements, as a netlink dump would (the element writer's part). */
  readElements(name: string): Map<string, string | undefined> | undefined {
    const s = this.table?.sets.get(name);
    return s ? new Map(s.elements) : undefined;
  }

  /** Direct access for tests: delete one element, as someone else's `nft delete element` would. */
  tamper(fn: (t: { sets: Map<string, FakeSet>; chains: FakeTable['chains'] }) => void): void {
    if (this.table) fn(this.table);
  }

  private exec(script: string, t: FakeTable | undefined): FakeTable | undefined {
    const T = this.T;
    const lines = script.split('\n');
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!.trim();
      if (line === '' || line.startsWith('#')) continue;
      if (line === `table ${T} {`) {
        if (t) throw new CommandError('nft -f', 1, 'File exists: table');
        t = { sets: new Map(), chains: new Map() };
        i = this.block(lines, i + 1, t);
        continue;
      }
      if (line === `delete table ${T}`) {
        if (!t) throw new CommandError('nft -f', 1, 'No such file or directory: table');
        t = undefined;
        continue;
      }
      if (!t) throw new CommandError('nft -f', 1, `No such file or directory: ${line}`);
      let m: RegExpExecArray | null;
      if ((m = new RegExp(`^(add|delete) element ${T} (\\S+) \\{ (.*) \\}$`).exec(line))) {
        for (const e of m[3]!.split(', ')) this.element(t, m[1] as 'add' | 'delete', m[2]!, e);
      } else if ((m = new RegExp(`^add (set|map) ${T} (\\S+) \\{ (.*) \\}$`).exec(line))) {
        if (t.sets.has(m[2]!)) throw new CommandError('nft -f', 1, `File exists: set ${m[2]}`);
        t.sets.set(m[2]!, { ...typesOf(m[3]!), elements: new Map() });
      } else if ((m = new RegExp(`^delete (set|map) ${T} (\\S+)$`).exec(line))) {
        if (!t.sets.delete(m[2]!)) throw new CommandError('nft -f', 1, `No such file or directory: set ${m[2]}`);
      } else if ((m = new RegExp(`^flush chain ${T} (\\S+)$`).exec(line))) {
        const c = t.chains.get(m[1]!);
        if (!c) throw new CommandError('nft -f', 1, `No such file or directory: chain ${m[1]}`);
        c.comments = [];
      } else if ((m = new RegExp(`^add chain ${T} (\\S+)(?: \\{ type (\\S+) hook (\\S+) priority (-?\\d+); policy accept; \\})?$`).exec(line))) {
        if (!t.chains.has(m[1]!)) t.chains.set(m[1]!, { ...(m[2] ? { base: { type: m[2], hook: m[3]!, priority: Number(m[4]), policy: 'accept' } } : {}), comments: [] });
      } else if ((m = new RegExp(`^delete chain ${T} (\\S+)$`).exec(line))) {
        if (!t.chains.delete(m[1]!)) throw new CommandError('nft -f', 1, `No such file or directory: chain ${m[1]}`);
      } else if ((m = new RegExp(`^add rule ${T} (\\S+) (.*)$`).exec(line))) {
        const c = t.chains.get(m[1]!);
        if (!c) throw new CommandError('nft -f', 1, `No such file or directory: chain ${m[1]}`);
        refuseAsNft(m[2]!);
        c.comments.push(commentOf(m[2]!));
      } else {
        throw new CommandError('nft -f', 1, `fake nft does not know: ${line}`);
      }
    }
    return t;
  }

  /** Read a `table … { … }` block from line `i`; returns the index of its closing brace. */
  private block(lines: readonly string[], i: number, t: FakeTable): number {
    for (; i < lines.length; i++) {
      const line = lines[i]!.trim();
      if (line === '}') return i;
      const m = /^(set|map|chain) (\S+) \{$/.exec(line);
      if (!m) throw new CommandError('nft -f', 1, `fake nft does not know: ${line}`);
      const body: string[] = [];
      for (i++; lines[i]!.trim() !== '}'; i++) if (!lines[i]!.trim().startsWith('#')) body.push(lines[i]!.trim());
      body.forEach(refuseAsNft);
      if (m[1] === 'chain') {
        const h = /^type (\S+) hook (\S+) priority (-?\d+); policy accept;$/.exec(body[0] ?? '');
        const rules = h ? body.slice(1) : body;
        t.chains.set(m[2]!, { ...(h ? { base: { type: h[1]!, hook: h[2]!, priority: Number(h[3]), policy: 'accept' } } : {}), comments: rules.map(commentOf) });
      } else {
        t.sets.set(m[2]!, { ...typesOf(body.join('\n')), elements: new Map() });
      }
    }
    throw new CommandError('nft -f', 1, 'unterminated table block');
  }

  private element(t: FakeTable, op: 'add' | 'delete', set: string, text: string): void {
    const s = t.sets.get(set);
    if (!s) throw new CommandError('nft -f', 1, `No such file or directory: set ${set}`);
    const [key, value] = text.split(' : ');
    if (op === 'add') {
      if (s.elements.has(key!) && s.elements.get(key!) !== value) throw new CommandError('nft -f', 1, `File exists: element ${key} of ${set}`);
      s.elements.set(key!, value);
    } else if (!s.elements.delete(key!)) {
      throw new CommandError('nft -f', 1, `No such file or directory: element ${key} of ${set}`);
    }
  }
}
