/**
 * nftables mode in `drover trace` (the engine is src/inspect/trace.ts): a
 * {@link TraceRuleset} over the live table `ip drover` (live.ts). Pure.
 *
 * The listing drover reads keeps each rule's comment, not its text, so a
 * rule is known by its comment: the text evaluated (rule-eval.ts) is the
 * one layout.ts writes under that comment, for the endpoint counts and
 * affinity timeouts the table has sets of and the `--cluster-cidr` /
 * `--masquerade-all` the live comments name (tried against layout.ts: no
 * second copy of the rules here). A rule with an unknown comment ends its
 * branch as "cannot evaluate"; a table that is not drover's layout
 * (plan.ts planStructure finds something to write) is said in the note,
 * as the answer may then be wrong.
 *
 * Base chains run in priority order at their hook, as the kernel runs
 * them. The engine walks nat OUTPUT before filter OUTPUT; here the `dnat`
 * stage at OUTPUT is every output chain below priority 0 (filter-output,
 * -110, before nat-output, -100, so it sees the frontend) and the `filter`
 * stage the rest. A DNAT sets the state's `original`, which later hooks
 * read as `ct status dnat` and `ct original`; the masquerade mark is the
 * state's mark. `fib saddr type local` is read as "the source is one of the
 * node's addresses (or in 127.0.0.0/8)"; a `local` route without an
 * address on the node is not seen.
 *
 * The walker itself takes any table whose rules' texts are known
 * ({@link walkTraceContext}): `drover takeover` walks kube-proxy's
 * nftables table with it.
 */
import type { HookEnd, Packet, RulePlace, Step, TraceContext, TraceHook, TraceRuleset, TraceStage, TraceState, Verdict } from '../../inspect/trace.ts';
import type { TraceFormat } from '../../inspect/trace-format.ts';
import { parseCIDR } from '../../model/addr.ts';
import type { IPFamily } from '../../model/types.ts';
import type { RenderOptions } from '../../config/render.ts';
import { TABLE, ruleText, tableRef, type Layout, type RuleDecl } from './layout.ts';
import type { LiveSet, LiveTable } from './live.ts';
import { TableModel } from './model.ts';
import { isEmptyStructure, layoutAfter, planStructure, type StructurePlan } from './plan.ts';
import { NftEvalError, evalRule, parseRule, partHolds, type Lookups, type PacketFacts, type ParsedRule } from './rule-eval.ts';

/** The `table` of the steps and verdicts of nftables mode's trace: "ip drover". */
export const NFT_TRACE_TABLE = `${TABLE.family} ${TABLE.name}`;

/** Deepest chain nesting followed (nft itself allows 16 jumps). */
const MAX_DEPTH = 16;

/** What the trace takes besides the table. */
export interface NftTraceOptions {
  /** `--cluster-cidr`, when the live comments do not name it; tried first. */
  readonly clusterCIDR?: string;
  /** The table's family: IPv4 (`ip drover`, the default) or IPv6 (`ip6 drover`, for IPv6 destinations). */
  readonly family?: IPFamily;
}

/** The table as drover's layout reads it. */
export interface LayoutReading {
  /** The render options whose layout fits the live chains best (all of them, when `differences` is empty). */
  readonly render: RenderOptions;
  /** The layout for them and the table's endpoint counts and affinity timeouts. */
  readonly layout: Layout;
  /** What a full sync would change of the structure: empty when the table is drover's layout. */
  readonly differences: readonly string[];
}

/** What {@link StructurePlan} says is not as the layout has it, one phrase each. */
function differences(p: StructurePlan): string[] {
  if (p.rebuild) return ['sets or base chains of another type or hook'];
  const out: string[] = [];
  if (p.addSets.length) out.push(`missing sets ${p.addSets.map((s) => s.name).join(', ')}`);
  if (p.writeChains.length) out.push(`chains missing or with other rules: ${p.writeChains.map((c) => c.name).join(', ')}`);
  if (p.deleteChains.length) out.push(`chains not in the layout: ${p.deleteChains.join(', ')}`);
  if (p.deleteSets.length) out.push(`sets not in the layout: ${p.deleteSets.join(', ')}`);
  return out;
}

/**
 * Read the live table as drover's layout: which `--cluster-cidr` and
 * `--masquerade-all` its chains were written for (every combination of
 * off, `opts.clusterCIDR` and the CIDRs its comments name is tried; the
 * first without differences, else the one with the fewest chains to
 * rewrite), with plan.ts' comparison of the structure.
 */
export function readLayout(live: LiveTable, opts: NftTraceOptions = {}): LayoutReading {
  const model = TableModel.fromLive(live);
  const family = opts.family ?? 'IPv4';
  const named = [...live.chains.values()].flatMap((c) => c.comments.flatMap((x) => x?.match(/(?:\b\d+\.\d+\.\d+\.\d+|[0-9a-f]*:[0-9a-f:]*)\/\d+\b/g) ?? []));
  const ofFamily = (c: string): boolean => {
    const p = parseCIDR(c)?.prefix;
    return p !== undefined && p.text === c && p.family === (family === 'IPv4' ? 4 : 6);
  };
  const cidrs = [...new Set([opts.clusterCIDR, ...named].filter((c): c is string => c !== undefined && ofFamily(c)))];
  let best: { reading: LayoutReading; rewrites: number } | undefined;
  for (const masqueradeAll of [false, true]) {
    for (const clusterCIDR of [...cidrs, undefined]) {
      const render: RenderOptions = { masqueradeAll, ...(clusterCIDR !== undefined ? { clusterCIDR } : {}), ...(family === 'IPv6' ? { family } : {}) };
      const layout = layoutAfter(model, [], render, true);
      const plan = planStructure(model, layout, true);
      if (isEmptyStructure(plan)) return { render, layout, differences: [] };
      const rewrites = plan.rebuild ? Infinity : plan.writeChains.length;
      if (!best || rewrites < best.rewrites) best = { reading: { render, layout, differences: differences(plan) }, rewrites };
    }
  }
  return best!.reading;
}

/** The table's sets and maps as rule-eval.ts looks them up; an interval set's elements match by prefix or range. */
function lookups(sets: ReadonlyMap<string, Pick<LiveSet, 'elements'>>): Lookups {
  const set = (name: string) => {
    const s = sets.get(name);
    if (!s) throw new NftEvalError(`the table has no set or map ${name}`);
    return s;
  };
  /** Per set, its elements with a prefix or a range in them, split into parts; found once. */
  const intervals = new Map<string, string[][]>();
  const intervalsOf = (name: string): string[][] => {
    let list = intervals.get(name);
    if (!list) intervals.set(name, (list = [...set(name).elements.keys()].filter((e) => /[/-]/.test(e)).map((e) => e.split(' . '))));
    return list;
  };
  return {
    has(name, key) {
      if (set(name).elements.has(key)) return true;
      const want = key.split(' . ');
      return intervalsOf(name).some((parts) => parts.length === want.length && parts.every((p, k) => partHolds(p, want[k]!)));
    },
    get: (name, key) => set(name).elements.get(key),
  };
}

/** One branch inside the walk: the engine's state and what the rules see. */
interface Br {
  readonly state: TraceState;
  readonly facts: PacketFacts;
  /** A masquerade statement ran. */
  readonly masquerade: boolean;
}

/** How a chain ends a branch: on to what follows (`next`: it fell off the end or returned), accepted, or ended. */
type Flow =
  | { readonly br: Br; readonly end: 'next' | 'accept' }
  | { readonly br: Br; readonly end: 'drop' | 'reject'; readonly at: RulePlace }
  | { readonly br: Br; readonly end: 'unknown'; readonly at: RulePlace; readonly reason: string };

function facts(packet: Packet, state: TraceState, local: ReadonlySet<string>): PacketFacts {
  const o = state.original ?? packet;
  return {
    saddr: packet.src,
    daddr: packet.dst,
    proto: packet.proto,
    dport: packet.dport,
    original: { daddr: o.dst, dport: o.dport },
    dnatted: state.original !== undefined,
    saddrLocal: local.has(packet.src) || packet.src.startsWith('127.') || packet.src === '::1',
    mark: state.mark,
  };
}

/** A rule as the walker takes it: the text rule-eval.ts evaluates and the text a step shows, or why it cannot be evaluated. */
export type WalkRule = { readonly text: string; readonly shown: string } | { readonly unknown: string };

/** A chain as the walker takes it: its hook when it is a base chain, and its rules in order. */
export interface WalkChain {
  readonly base?: { readonly hook: string; readonly priority: number; readonly policy: string };
  readonly rules: readonly WalkRule[];
}

/** A table as the walker takes it: its chains, and its sets and maps with their elements. */
export interface WalkTable {
  readonly chains: ReadonlyMap<string, WalkChain>;
  readonly sets: ReadonlyMap<string, Pick<LiveSet, 'elements'>>;
}

/**
 * A {@link TraceRuleset} over one nftables table: at each hook its base
 * chains in priority order, each rule evaluated by rule-eval.ts, jumps and
 * gotos followed (see the module comment).
 */
class NftRuleset implements TraceRuleset {
  private readonly parsed = new Map<string, ParsedRule>();
  private readonly sets: Lookups;

  constructor(
    private readonly tbl: WalkTable,
    private readonly local: ReadonlySet<string>,
    /** The table's name in steps and verdicts: "ip drover", "ip6 drover". */
    private readonly table: string = NFT_TRACE_TABLE,
  ) {
    this.sets = lookups(tbl.sets);
  }

  walk(stage: TraceStage, hook: TraceHook, packet: Packet, state: TraceState): readonly HookEnd[] {
    const h = hook.toLowerCase();
    const bases = [...this.tbl.chains]
      .filter(([, c]) => c.base?.hook === h && (hook !== 'OUTPUT' || (stage === 'dnat') === c.base.priority < 0))
      .sort(([, a], [, b]) => a.base!.priority - b.base!.priority);
    let open: Br[] = [{ state, facts: facts(packet, state, this.local), masquerade: false }];
    const ends: HookEnd[] = [];
    for (const [name, chain] of bases) {
      const next: Br[] = [];
      for (const br of open) {
        for (const f of this.run(name, br, 0)) {
          if (f.end === 'unknown') ends.push({ how: 'unknown', state: f.br.state, at: f.at, reason: f.reason });
          else if (f.end === 'drop' || f.end === 'reject') ends.push({ how: 'verdict', state: f.br.state, verdict: { kind: f.end }, at: f.at });
          else if (f.end === 'next' && chain.base!.policy === 'drop') ends.push({ how: 'policy', state: f.br.state, policy: 'DROP', at: { table: this.table, chain: name, line: 0 } });
          else next.push(f.br);
        }
      }
      open = next;
    }
    const last = bases.length > 0 ? bases[bases.length - 1]![0] : h;
    for (const br of open) {
      const s = br.state;
      const at = s.steps.length > 0 ? s.steps[s.steps.length - 1]! : { table: this.table, chain: last, line: 0 };
      const place: RulePlace = { table: at.table, chain: at.chain, line: at.line };
      if (stage === 'dnat' && br.facts.dnatted) ends.push({ how: 'verdict', state: s, verdict: { kind: 'dnat', ip: br.facts.daddr, port: br.facts.dport }, at: place });
      else if (br.masquerade) ends.push({ how: 'verdict', state: s, verdict: { kind: 'masquerade' }, at: place });
      else ends.push({ how: 'policy', state: s, policy: 'ACCEPT', at: { table: this.table, chain: last, line: 0 } });
    }
    return ends;
  }

  private rule(text: string): ParsedRule {
    let p = this.parsed.get(text);
    if (!p) this.parsed.set(text, (p = parseRule(text)));
    return p;
  }

  /** Walk chain `name` for `start`; `depth` jumps deep. */
  private run(name: string, start: Br, depth: number): Flow[] {
    const chain = this.tbl.chains.get(name);
    const here = (line: number): RulePlace => ({ table: this.table, chain: name, line });
    if (!chain) return [{ br: start, end: 'unknown', at: here(0), reason: `the table has no chain ${name}` }];
    if (depth > MAX_DEPTH) return [{ br: start, end: 'unknown', at: here(0), reason: `more than ${MAX_DEPTH} nested jumps` }];
    const out: Flow[] = [];
    let open: Br[] = [start];
    chain.rules.forEach((rule, k) => {
      const line = k + 1;
      const next: Br[] = [];
      for (const br of open) {
        if ('unknown' in rule) {
          out.push({ br, end: 'unknown', at: here(line), reason: rule.unknown });
          continue;
        }
        let branches;
        try {
          branches = evalRule(this.rule(rule.text), br.facts, this.sets);
        } catch (err) {
          if (!(err instanceof NftEvalError)) throw err;
          out.push({ br, end: 'unknown', at: here(line), reason: err.message });
          continue;
        }
        for (const b of branches) {
          const probability = br.state.probability * b.probability;
          if (!b.matched) {
            next.push({ ...br, state: { ...br.state, probability, notes: [...br.state.notes, ...b.notes] } });
            continue;
          }
          const step: Step = { ...here(line), rule: rule.shown, ...(b.notes.length > 0 ? { note: b.notes.join('; ') } : {}) };
          const dnat = b.facts.dnatted && !br.facts.dnatted;
          const original: Packet | undefined = br.state.original ?? (dnat ? { src: br.facts.saddr, dst: br.facts.daddr, dport: br.facts.dport, proto: br.facts.proto as Packet['proto'] } : undefined);
          const state: TraceState = { ...br.state, probability, mark: b.facts.mark, steps: [...br.state.steps, step], ...(original ? { original } : {}) };
          const nb: Br = { state, facts: b.facts, masquerade: br.masquerade || b.verdict?.kind === 'masquerade' };
          const v = b.verdict;
          if (!v) next.push(nb);
          else if (v.kind === 'return') out.push({ br: nb, end: 'next' });
          else if (v.kind === 'accept' || v.kind === 'dnat' || v.kind === 'masquerade') out.push({ br: nb, end: 'accept' });
          else if (v.kind === 'drop' || v.kind === 'reject') out.push({ br: nb, end: v.kind, at: here(line) });
          else if (v.kind === 'goto') out.push(...this.run(v.chain, nb, depth + 1));
          else if (v.kind === 'jump') for (const f of this.run(v.chain, nb, depth + 1)) (f.end === 'next' ? next.push(f.br) : out.push(f));
        }
      }
      open = next;
    });
    for (const br of open) out.push({ br, end: 'next' });
    return out;
  }
}

/** A trace context and its note, for {@link nftTraceContext}. */
export interface NftTraceSetup {
  readonly ctx: TraceContext;
  /** For stderr: a missing table, or a table that is not drover's layout; "" when it is. */
  readonly note: string;
}

/**
 * The trace context of the live table of `opts.family` (`nft -j list
 * table ip drover`, or `ip6 drover` for IPv6; live.ts) on a node with
 * addresses `localAddresses` (of that family).
 */
export function nftTraceContext(live: LiveTable, localAddresses: ReadonlySet<string>, opts: NftTraceOptions = {}): NftTraceSetup {
  const reading = readLayout(live, opts);
  const table = tableRef(opts.family);
  let note = '';
  if (!live.exists) note = `drover: no table ${table}: nothing of drover's takes the connection\n`;
  else if (reading.differences.length > 0) {
    note = `drover: table ${table} is not drover's layout for the endpoint counts and affinity timeouts its sets show (${reading.differences.join('; ')}): rules are evaluated by their comments and the answer may be wrong\n`;
  }
  return { ctx: { localAddresses, ruleset: new NftRuleset(layoutWalkTable(live, reading), localAddresses, table) }, note };
}

/**
 * drover's live table as the walker takes it: each rule known by its
 * comment as the rule of `reading`'s layout with that comment (a rule
 * without one, or with a comment the layout does not have, cannot be
 * evaluated).
 */
function layoutWalkTable(live: LiveTable, reading: LayoutReading): WalkTable {
  const decls = new Map<string, Map<string, RuleDecl>>();
  for (const c of reading.layout.chains) decls.set(c.name, new Map(c.rules.map((r) => [r.comment, r])));
  const chains = new Map<string, WalkChain>();
  for (const [name, c] of live.chains) {
    const rules = c.comments.map((comment): WalkRule => {
      const decl = comment === null ? undefined : decls.get(name)?.get(comment);
      if (decl) return { text: decl.text, shown: ruleText(decl) };
      return { unknown: comment === null ? 'a rule without a comment is not one of the layout' : `no rule of the layout has the comment ${JSON.stringify(comment)} in ${name}` };
    });
    chains.set(name, { ...(c.base ? { base: c.base } : {}), rules });
  }
  return { chains, sets: live.sets };
}

/**
 * The trace context of any nftables table given as the walker takes it
 * (`table`, named `name` in steps, e.g. "ip kube-proxy"), on a node with
 * addresses `localAddresses`: for a table drover did not write, whose
 * rules' texts are known (`drover takeover` checks kube-proxy's).
 */
export function walkTraceContext(table: WalkTable, localAddresses: ReadonlySet<string>, name: string): TraceContext {
  return { localAddresses, ruleset: new NftRuleset(table, localAddresses, name) };
}

/**
 * How nftables mode's steps print in a trace: under the header `ip drover
 * CHAIN`, `rule N  TEXT comment "…"`, N the rule's position in the chain
 * as `nft list table ip drover` lists it (from 1).
 */
export const nftTraceFormat: TraceFormat = {
  table: NFT_TRACE_TABLE,
  step: (s) => `rule ${String(s.line).padEnd(3)}${s.rule}`,
  describe(v: Verdict) {
    if (v.kind === 'reject') return `REJECTed (${v.table} ${v.chain} rule ${v.line})`;
    if (v.kind === 'drop') return `DROPped (${v.table} ${v.chain} ${v.line ? `rule ${v.line}` : 'policy'})`;
    if (v.kind === 'unknown') return `cannot evaluate: ${v.table} ${v.chain}${v.line ? ` rule ${v.line}` : ''}: ${v.reason}`;
    return undefined;
  },
  target: { verb: 'DNAT to', one: 'endpoint', many: 'endpoints' },
};

/** {@link nftTraceFormat} for the table of `family` (default IPv4): its steps under `ip6 drover CHAIN` for IPv6. */
export function nftTraceFormatOf(family: IPFamily = 'IPv4'): TraceFormat {
  return family === 'IPv4' ? nftTraceFormat : { ...nftTraceFormat, table: tableRef(family) };
}
