/**
 * The iptables rules as `drover trace` walks them (the engine and the order
 * of the hooks are in src/inspect/trace.ts): each stage is a table's
 * built-in chain (dnat and snat: nat, filter: filter), walked the way
 * iptables(8) does (jumps, RETURN, policies).
 *
 * A rule matches when all its matches do; `-m statistic --mode random`
 * splits the walk in two branches with their probabilities. A match the
 * walker cannot decide (an interface, an ipset whose contents are not given,
 * an unknown module) ends that branch as "cannot evaluate" instead of
 * guessing. Every mode with iptables rules walks them here (IPVS mode's
 * `-m set` matches need the ipsets' contents).
 */
import type { HookEnd, Packet, RulePlace, RuleVerdict, Step, TraceContext, TraceHook, TraceRuleset, TraceStage, TraceState } from '../../../inspect/trace.ts';
import type { ParsedChain, ParsedDump } from '../../../kernel/iptables/parse.ts';
import { BUILTIN_CHAINS } from '../../../kernel/iptables/parse.ts';
import { parsePrefix, parseRule, prefixContains, type Match, type Rule, type Target } from '../../../kernel/iptables/rule.ts';

/** The contents of one ipset as `-m set` matches look them up (`ipset save`, parsed). */
export interface SetContents {
  /** Set type, e.g. "hash:ip,port". */
  readonly type: string;
  /** Entries as `ipset save` prints them, e.g. "10.96.0.10,tcp:80". */
  readonly entries: ReadonlySet<string>;
}

/** What the iptables walker knows of the node besides the rules. */
interface Node {
  readonly localAddresses: ReadonlySet<string>;
  readonly sets?: ReadonlyMap<string, SetContents>;
}

type Decision = { match: boolean; note?: string } | { split: number } | { unknown: string };

function decide(m: Match, pkt: Packet, mark: number, node: Node): Decision {
  const neg = (b: boolean, negate: boolean): Decision => ({ match: b !== negate });
  switch (m.kind) {
    case 'src':
      return neg(prefixContains(m.prefix, pkt.src), m.negate);
    case 'dst':
      return neg(prefixContains(m.prefix, pkt.dst), m.negate);
    case 'proto':
      return neg(m.proto === 'all' || m.proto === pkt.proto, m.negate);
    case 'comment':
      return { match: true };
    case 'dport':
      return neg(pkt.dport >= m.from && pkt.dport <= m.to, m.negate);
    case 'statistic':
      return { split: m.probability };
    case 'mark':
      return neg(((mark & m.mask) >>> 0) === (m.value >>> 0), m.negate);
    case 'addrtype':
      if (m.type !== 'LOCAL') return { unknown: `-m addrtype --${m.dir}-type ${m.type}` };
      return neg(node.localAddresses.has(m.dir === 'dst' ? pkt.dst : pkt.src), m.negate);
    case 'conntrack':
      return neg(m.states.includes('NEW'), m.negate);
    case 'recent':
      if (m.mode === 'set') return { match: true, note: `records the client in affinity table ${m.name}` };
      return { match: false };
    case 'sport':
      return { unknown: `--sport (the source port is not known)` };
    case 'in-iface':
    case 'out-iface':
      return { unknown: `${m.kind === 'in-iface' ? '-i' : '-o'} ${m.name} (interfaces are not traced)` };
    case 'set': {
      const set = node.sets?.get(m.name);
      if (!set) return { unknown: `-m set --match-set ${m.name} (ipset contents are not traced)` };
      if (set.type === 'hash:ip,port,net' && m.dirs.join(',') === 'dst,dst,src') return neg(inNetSet(set.entries, pkt), m.negate);
      const entry = setEntry(set.type, m.dirs, pkt);
      if (entry === undefined) return { unknown: `-m set --match-set ${m.name} ${m.dirs.join(',')} (a set of type ${set.type})` };
      return neg(set.entries.has(entry), m.negate);
    }
    case 'unknown':
      return { unknown: m.text };
  }
}

/** The dimensions of the set types whose entries the walker can build ("ip", "proto:port", and a bare port for bitmap:port). */
const SET_DIMENSIONS: Readonly<Record<string, readonly ('ip' | 'port' | 'bare-port')[]>> = {
  'hash:ip': ['ip'],
  'hash:ip,port': ['ip', 'port'],
  'hash:ip,port,ip': ['ip', 'port', 'ip'],
  'bitmap:port': ['bare-port'],
};

/**
 * True when a hash:ip,port,net set (IPVS mode's KUBE-LOAD-BALANCER-SOURCE-CIDR,
 * entries "ip,proto:port,net" as `ipset save` prints them, a /32 without its
 * length) holds the packet's destination, port and source, matched
 * `dst,dst,src`.
 */
function inNetSet(entries: ReadonlySet<string>, pkt: Packet): boolean {
  const head = `${pkt.dst},${pkt.proto}:${pkt.dport},`;
  for (const e of entries) {
    if (!e.startsWith(head)) continue;
    const net = e.slice(head.length);
    const prefix = parsePrefix(net);
    if (prefix !== undefined && prefixContains(prefix, pkt.src)) return true;
  }
  return false;
}

/**
 * The entry a packet is looked up as in a set of `type`, with the match's
 * directions (ipset(8): `dst,dst` is the destination address and port), as
 * `ipset save` prints entries: "10.96.0.10,tcp:80". Undefined when it cannot
 * be built: another set type, a direction count that differs from the set's
 * dimensions, or a source port (not known to the trace).
 */
function setEntry(type: string, dirs: readonly ('src' | 'dst')[], pkt: Packet): string | undefined {
  const dims = SET_DIMENSIONS[type];
  if (!dims || dims.length !== dirs.length) return undefined;
  const parts: string[] = [];
  for (const [i, dim] of dims.entries()) {
    const dir = dirs[i];
    if (dim === 'ip') parts.push(dir === 'src' ? pkt.src : pkt.dst);
    else if (dir === 'dst') parts.push(dim === 'bare-port' ? String(pkt.dport) : `${pkt.proto}:${pkt.dport}`);
    else return undefined;
  }
  return parts.join(',');
}

/** How a walk of a chain ends: back to the calling chain, or one of the hook's ends. */
type End = { how: 'return'; state: TraceState } | HookEnd;

/** What a terminating target means to the engine. */
function ruleVerdict(t: Exclude<Target, { kind: 'jump' | 'MARK' | 'unknown' | 'none' }>): RuleVerdict {
  switch (t.kind) {
    case 'DNAT':
      return t.port === undefined ? { kind: 'dnat', ip: t.ip } : { kind: 'dnat', ip: t.ip, port: t.port };
    case 'MASQUERADE':
      return { kind: 'masquerade' };
    case 'SNAT':
      return { kind: 'snat' };
    case 'REJECT':
      return { kind: 'reject' };
    case 'DROP':
      return { kind: 'drop' };
    case 'ACCEPT':
    case 'RETURN':
      return { kind: 'accept' };
  }
}

/** The walker over one table. */
class Walker {
  private readonly parsed = new Map<string, Array<{ rule: Rule; line: number }>>();

  constructor(
    private readonly dump: ParsedDump,
    private readonly node: Node,
    private readonly table: string,
  ) {
    const chains: ReadonlyMap<string, ParsedChain> = dump.get(table) ?? new Map();
    const names = new Set(chains.keys());
    for (const [name, chain] of chains) {
      this.parsed.set(
        name,
        chain.rules.map((text, i) => ({ rule: parseRule(name, text, names), line: chain.lines[i] ?? 0 })),
      );
    }
  }

  /** The end of built-in chain `chain` by its policy. */
  private policy(chain: string, state: TraceState): HookEnd {
    const at: RulePlace = { table: this.table, chain, line: 0 };
    return { how: 'policy', state, policy: this.dump.get(this.table)?.get(chain)?.policy ?? 'ACCEPT', at };
  }

  /** Walk `chain` from rule `from`. */
  walk(chain: string, pkt: Packet, state: TraceState, from = 0, depth = 0): End[] {
    if (depth > 64) return [{ how: 'unknown', state, at: { table: this.table, chain, line: 0 }, reason: 'jump depth over 64 (a loop?)' }];
    const rules = this.parsed.get(chain) ?? [];
    for (let i = from; i < rules.length; i++) {
      const { rule, line } = rules[i]!;
      let probability = 1;
      const notes: string[] = [];
      let matched = true;
      for (const m of rule.matches) {
        const d = decide(m, pkt, state.mark, this.node);
        if ('unknown' in d) {
          return [{ how: 'unknown', state, at: { table: this.table, chain, line }, reason: `cannot evaluate ${d.unknown}` }];
        }
        if ('split' in d) probability *= d.split;
        else if (!d.match) {
          matched = false;
          if (m.kind === 'recent' && m.mode !== 'set') {
            state = { ...state, notes: [...state.notes, `assumed no affinity entry in ${m.name} (a returning client goes to the endpoint it used before)`] };
          }
          break;
        } else if (d.note) notes.push(d.note);
      }
      if (!matched) continue;
      const step: Step = {
        table: this.table,
        chain,
        line,
        rule: rule.text,
        ...(probability < 1 ? { note: `taken with probability ${probability.toFixed(4)}` } : notes.length ? { note: notes.join('; ') } : {}),
      };
      if (probability < 1) {
        const taken = { ...state, probability: state.probability * probability };
        const skipped = { ...state, probability: state.probability * (1 - probability) };
        return [...this.apply(rule, step, chain, i, pkt, taken, depth), ...this.walk(chain, pkt, skipped, i + 1, depth)];
      }
      return this.apply(rule, step, chain, i, pkt, state, depth);
    }
    return BUILTIN_CHAINS.has(chain) ? [this.policy(chain, state)] : [{ how: 'return', state }];
  }

  private apply(rule: Rule, step: Step, chain: string, i: number, pkt: Packet, state: TraceState, depth: number): End[] {
    const next: TraceState = { ...state, steps: [...state.steps, step] };
    const t = rule.target;
    const at: RulePlace = { table: this.table, chain, line: step.line };
    switch (t.kind) {
      case 'jump':
        return this.walk(t.chain, pkt, next, 0, depth + 1).flatMap((end) =>
          end.how === 'return' ? this.walk(chain, pkt, end.state, i + 1, depth) : [end],
        );
      case 'MARK':
        return this.walk(chain, pkt, { ...next, mark: ((next.mark & ~t.mask) ^ t.value) >>> 0 }, i + 1, depth);
      case 'none':
        return this.walk(chain, pkt, next, i + 1, depth);
      case 'RETURN':
        return BUILTIN_CHAINS.has(chain) ? [this.policy(chain, next)] : [{ how: 'return', state: next }];
      case 'unknown':
        return [{ how: 'unknown', state: next, at, reason: `cannot evaluate target ${t.text}` }];
      default:
        return [{ how: 'verdict', state: next, verdict: ruleVerdict(t), at }];
    }
  }
}

/** The table each stage of the walk is in. */
const STAGE_TABLE: Readonly<Record<TraceStage, string>> = { dnat: 'nat', filter: 'filter', snat: 'nat' };

/**
 * The iptables rules of `dump` as a trace ruleset.
 * @param node.localAddresses the node's addresses, for `-m addrtype --dst-type LOCAL`
 * @param node.sets ipsets by name; without them, a `-m set` match cannot be evaluated
 * @throws RuleSyntaxError (rule.ts), from `walk`, when a rule in the dump cannot be tokenised.
 */
export function iptablesRuleset(dump: ParsedDump, node: { readonly localAddresses: ReadonlySet<string>; readonly sets?: ReadonlyMap<string, SetContents> }): TraceRuleset {
  // Both tables are parsed on the first walk, so that a trace reports a rule it cannot read wherever it is.
  let walkers: ReadonlyMap<string, Walker> | undefined;
  return {
    walk(stage: TraceStage, hook: TraceHook, packet: Packet, state: TraceState): HookEnd[] {
      walkers ??= new Map(['nat', 'filter'].map((table) => [table, new Walker(dump, node, table)]));
      // A built-in chain never returns to a caller.
      return walkers.get(STAGE_TABLE[stage])!.walk(hook, packet, state).filter((e): e is HookEnd => e.how !== 'return');
    },
  };
}

/**
 * The trace context of a node whose rules are iptables rules: the live
 * filter and nat tables of one family (iptables-save or ip6tables-save,
 * parsed with line numbers), the node's own addresses of that family and,
 * when known, the ipsets' contents. A rule
 * that cannot be tokenised makes `trace` throw RuleSyntaxError (rule.ts).
 */
export function iptablesTraceContext(dump: ParsedDump, localAddresses: ReadonlySet<string>, sets?: ReadonlyMap<string, SetContents>): TraceContext {
  return { localAddresses, ruleset: iptablesRuleset(dump, sets ? { localAddresses, sets } : { localAddresses }) };
}
