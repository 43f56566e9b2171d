/**
 * `drover trace`: walk a live ruleset the way the kernel walks a new
 * connection's first packet (netfilter hooks, iptables(8) traversal rules):
 *
 *   from outside the node: nat PREROUTING → filter FORWARD (or INPUT) → nat POSTROUTING
 *   from the node itself:  nat OUTPUT → filter OUTPUT → nat POSTROUTING
 *
 * A rule matches when all its matches do; `-m statistic --mode random`
 * splits the walk in two branches with their probabilities, so the result is
 * the set of outcomes (endpoint, masquerade or not, REJECT...) with the
 * probability of each. A match the walker cannot decide (an interface, an
 * ipset whose contents are not given, an unknown module) ends that branch as
 * "cannot evaluate" instead of guessing.
 *
 * IPVS mode (a context with `ipvs`): IPVS hooks LOCAL_IN after filter INPUT
 * (priority NF_IP_PRI_NAT_SRC - 2) and LOCAL_OUT after nat OUTPUT
 * (NF_IP_PRI_NAT_DST + 1), and sends the packet it schedules back through
 * LOCAL_OUT and POSTROUTING (ip_vs_nat_xmit, net/netfilter/ipvs/ip_vs_xmit.c):
 *
 *   from outside the node: nat PREROUTING → filter INPUT → IPVS → filter OUTPUT → nat POSTROUTING
 *   from the node itself:  nat OUTPUT → IPVS → filter OUTPUT → nat POSTROUTING
 *
 * Packets from outside reach IPVS only when their destination is one of the
 * node's addresses (a ClusterIP bound on kube-ipvs0). The real servers and
 * their probabilities come from ipvs-schedule.ts.
 */
import type { ParsedChain, ParsedDump } from '../modes/iptables/parse.ts';
import { BUILTIN_CHAINS } from '../modes/iptables/parse.ts';
import { realServerKey } from '../modes/ipvs/desired.ts';
import type { SavedSet } from '../modes/ipvs/ipset.ts';
import type { KernelVirtualServer } from '../modes/ipvs/reconcile.ts';
import { ipvsSchedule } from '../modes/ipvs/schedule.ts';
import { parseRule, prefixContains, type Match, type Rule, type Target } from '../modes/iptables/rule.ts';

/** The first packet of a new connection. */
export interface Packet {
  readonly src: string;
  readonly dst: string;
  readonly dport: number;
  readonly proto: 'tcp' | 'udp' | 'sctp';
}

/** What the walker knows of the node. */
export interface TraceContext {
  /** The live filter and nat tables (iptables-save, parsed with line numbers). */
  readonly dump: ParsedDump;
  /** The node's own IPv4 addresses (for the hook choice and `-m addrtype --dst-type LOCAL`). */
  readonly localAddresses: ReadonlySet<string>;
  /** ipsets by name (`ipset save`, parsed); without them, a `-m set` match cannot be evaluated. */
  readonly ipsets?: ReadonlyMap<string, SavedSet>;
  /** IPVS mode: the kernel's virtual servers by virtualServerKey ("TCP/10.96.0.10:80"); without them IPVS is not traced. */
  readonly ipvs?: ReadonlyMap<string, KernelVirtualServer>;
}

/** One rule that matched. `line` is the rule's line in the iptables-save text. */
export interface Step {
  readonly table: string;
  readonly chain: string;
  readonly line: number;
  readonly rule: string;
  /** e.g. "taken with probability 0.3333", "assumed: no affinity entry yet". */
  readonly note?: string;
}

/** How a branch ended. */
export type Verdict =
  | { kind: 'dnat'; ip: string; port: number }
  | { kind: 'reject' | 'drop'; table: string; chain: string; line: number }
  | { kind: 'untouched' }
  /** IPVS refused the connection: `where` is the virtual server ("TCP 10.96.0.11:80 rr"). */
  | { kind: 'refused'; where: string; reason: string }
  | { kind: 'unknown'; table: string; chain: string; line: number; reason: string };

/** One possible outcome of the walk. */
export interface Outcome {
  /** Probability of this outcome for a new connection, 0-1. */
  readonly probability: number;
  readonly verdict: Verdict;
  /** Source NAT by MASQUERADE (or SNAT) in POSTROUTING. */
  readonly masqueraded: boolean;
  readonly steps: readonly Step[];
  /** Things the walker assumed (affinity state). */
  readonly notes: readonly string[];
}

/** The result of a trace. */
export interface TraceResult {
  readonly packet: Packet;
  /** "outside" (nat PREROUTING) or "node" (nat OUTPUT). */
  readonly origin: 'outside' | 'node';
  readonly outcomes: readonly Outcome[];
}

interface State {
  probability: number;
  mark: number;
  steps: Step[];
  notes: string[];
}

type End =
  | { how: 'return'; state: State }
  | { how: 'final'; state: State; target: Target | { kind: 'policy'; policy: string }; step?: Step }
  | { how: 'unknown'; state: State; at: { table: string; chain: string; line: number }; reason: string };

type Decision = { match: boolean; note?: string } | { split: number } | { unknown: string };

function decide(m: Match, pkt: Packet, mark: number, ctx: TraceContext): Decision {
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
      return neg(ctx.localAddresses.has(m.dir === 'dst' ? pkt.dst : pkt.src), m.negate);
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
      const set = ctx.ipsets?.get(m.name);
      if (!set) return { unknown: `-m set --match-set ${m.name} (ipset contents are not traced)` };
      const entry = setEntry(set.type, m.dirs, pkt);
      if (entry === undefined) return { unknown: `-m set --match-set ${m.name} ${m.dirs.join(',')} (a set of type ${set.type})` };
      return neg(set.entries.has(entry), m.negate);
    }
    case 'unknown':
      return { unknown: m.text };
  }
}

/** The dimensions of the set types whose entries the walker can build ("ip" and "proto:port"). */
const SET_DIMENSIONS: Readonly<Record<string, readonly ('ip' | 'port')[]>> = {
  'hash:ip': ['ip'],
  'hash:ip,port': ['ip', 'port'],
  'hash:ip,port,ip': ['ip', 'port', 'ip'],
};

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
    else if (dir === 'dst') parts.push(`${pkt.proto}:${pkt.dport}`);
    else return undefined;
  }
  return parts.join(',');
}

/** The walker over one table. */
class Walker {
  private readonly parsed = new Map<string, Array<{ rule: Rule; line: number }>>();

  constructor(
    private readonly ctx: TraceContext,
    private readonly table: string,
  ) {
    const chains: ReadonlyMap<string, ParsedChain> = this.ctx.dump.get(table) ?? new Map();
    const names = new Set(chains.keys());
    for (const [name, chain] of chains) {
      this.parsed.set(
        name,
        chain.rules.map((text, i) => ({ rule: parseRule(name, text, names), line: chain.lines[i] ?? 0 })),
      );
    }
  }

  /** Walk `chain` from rule `from`. */
  walk(chain: string, pkt: Packet, state: State, from = 0, depth = 0): End[] {
    if (depth > 64) return [{ how: 'unknown', state, at: { table: this.table, chain, line: 0 }, reason: 'jump depth over 64 (a loop?)' }];
    const rules = this.parsed.get(chain) ?? [];
    for (let i = from; i < rules.length; i++) {
      const { rule, line } = rules[i]!;
      let probability = 1;
      const notes: string[] = [];
      let matched = true;
      for (const m of rule.matches) {
        const d = decide(m, pkt, state.mark, this.ctx);
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
    if (BUILTIN_CHAINS.has(chain)) {
      const policy = this.ctx.dump.get(this.table)?.get(chain)?.policy ?? 'ACCEPT';
      return [{ how: 'final', state, target: { kind: 'policy', policy } }];
    }
    return [{ how: 'return', state }];
  }

  private apply(rule: Rule, step: Step, chain: string, i: number, pkt: Packet, state: State, depth: number): End[] {
    const next: State = { ...state, steps: [...state.steps, step] };
    const t = rule.target;
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
        return BUILTIN_CHAINS.has(chain)
          ? [{ how: 'final', state: next, target: { kind: 'policy', policy: this.ctx.dump.get(this.table)?.get(chain)?.policy ?? 'ACCEPT' } }]
          : [{ how: 'return', state: next }];
      case 'unknown':
        return [{ how: 'unknown', state: next, at: { table: this.table, chain, line: step.line }, reason: `cannot evaluate target ${t.text}` }];
      default:
        return [{ how: 'final', state: next, target: t, step }];
    }
  }
}

function isLocal(ctx: TraceContext, ip: string): boolean {
  return ctx.localAddresses.has(ip) || ip.startsWith('127.');
}

/** The IPVS virtual server a packet is addressed to, when IPVS is traced. */
function virtualServerFor(ctx: TraceContext, pkt: Packet): KernelVirtualServer | undefined {
  return ctx.ipvs?.get(`${pkt.proto.toUpperCase()}/${pkt.dst}:${pkt.dport}`);
}

/**
 * Trace a new connection through the live ruleset (and, with `ctx.ipvs`,
 * through IPVS; see the module comment).
 * @throws RuleSyntaxError when a rule in the dump cannot be tokenised.
 */
export function trace(ctx: TraceContext, packet: Packet): TraceResult {
  const origin = isLocal(ctx, packet.src) ? 'node' : 'outside';
  const nat = new Walker(ctx, 'nat');
  const filter = new Walker(ctx, 'filter');
  const start: State = { probability: 1, mark: 0, steps: [], notes: [] };
  const outcomes: Outcome[] = [];
  const done = (state: State, verdict: Verdict, masqueraded = false) =>
    outcomes.push({ probability: state.probability, verdict, masqueraded, steps: state.steps, notes: [...new Set(state.notes)] });
  const noted = (state: State, note: string): State => ({ ...state, notes: [...state.notes, note] });

  /** filter `hook`, then nat POSTROUTING; for INPUT, `local` (IPVS) or the end of the trace. */
  const deliver = (hook: 'INPUT' | 'FORWARD' | 'OUTPUT', pkt: Packet, state: State, verdict: Verdict, local?: (s: State) => void): void => {
    for (const f of filter.walk(hook, pkt, state)) {
      if (f.how === 'unknown') {
        done(f.state, { kind: 'unknown', ...f.at, reason: f.reason });
        continue;
      }
      if (f.how === 'final' && (f.target.kind === 'REJECT' || f.target.kind === 'DROP' || (f.target.kind === 'policy' && f.target.policy === 'DROP'))) {
        const at = f.step ?? { chain: hook, line: 0 };
        done(f.state, { kind: f.target.kind === 'REJECT' ? 'reject' : 'drop', table: 'filter', chain: at.chain, line: at.line });
        continue;
      }
      if (hook === 'INPUT') {
        if (local) local(f.state);
        else done(f.state, verdict);
        continue;
      }
      for (const p of nat.walk('POSTROUTING', pkt, f.state)) {
        if (p.how === 'unknown') done(p.state, { kind: 'unknown', ...p.at, reason: p.reason });
        else done(p.state, verdict, p.how === 'final' && (p.target.kind === 'MASQUERADE' || p.target.kind === 'SNAT'));
      }
    }
  };

  /** IPVS schedules a real server; its packet goes out through filter OUTPUT and nat POSTROUTING. */
  const viaIpvs = (vs: KernelVirtualServer, state: State): void => {
    const e = vs.entry;
    const where = `${e.protocol} ${e.address}:${e.port} ${e.scheduler}`;
    let s = state;
    if (e.persistent) s = noted(s, `virtual server ${where} is persistent (${e.persistent.timeoutSeconds} s): assumed no persistence template for this client yet (a returning client goes to the real server it used before)`);
    for (const d of vs.dests.filter((x) => x.weight === 0)) s = noted(s, `real server ${realServerKey(d)} has weight 0 (quiesced): no new connections`);
    const schedule = ipvsSchedule(e, vs.dests);
    if (schedule.kind === 'refused') return void done(s, { kind: 'refused', where, reason: schedule.reason });
    if (schedule.kind === 'unknown') return void done(s, { kind: 'unknown', table: 'ipvs', chain: where, line: 0, reason: `cannot evaluate: ${schedule.reason}` });
    for (const { dest, probability } of schedule.branches) {
      const step: Step = {
        table: 'ipvs',
        chain: where,
        line: 0,
        rule: `-> ${realServerKey(dest)} ${dest.forwarding === 'masq' ? 'Masq' : dest.forwarding} weight ${dest.weight}`,
        ...(probability < 1 ? { note: `taken with probability ${probability.toFixed(4)}` } : {}),
      };
      const branch: State = { ...s, probability: s.probability * probability, steps: [...s.steps, step] };
      if (dest.forwarding !== 'masq') {
        done(branch, { kind: 'unknown', table: 'ipvs', chain: where, line: 0, reason: `cannot evaluate forwarding method ${dest.forwarding} (only Masq is traced)` });
        continue;
      }
      deliver('OUTPUT', { ...packet, dst: dest.address, dport: dest.port }, branch, { kind: 'dnat', ip: dest.address, port: dest.port });
    }
  };

  for (const end of nat.walk(origin === 'node' ? 'OUTPUT' : 'PREROUTING', packet, start)) {
    if (end.how === 'unknown') {
      done(end.state, { kind: 'unknown', ...end.at, reason: end.reason });
      continue;
    }
    let after = packet;
    if (end.how === 'final' && end.target.kind === 'DNAT') {
      after = { ...packet, dst: end.target.ip, dport: end.target.port ?? packet.dport };
    } else if (end.how === 'final' && (end.target.kind === 'DROP' || end.target.kind === 'REJECT')) {
      done(end.state, { kind: end.target.kind === 'DROP' ? 'drop' : 'reject', table: 'nat', chain: end.step!.chain, line: end.step!.line });
      continue;
    }
    const verdict: Verdict = after === packet ? { kind: 'untouched' } : { kind: 'dnat', ip: after.dst, port: after.dport };
    // IPVS sees the packet as iptables left it; a packet iptables DNATed is not for a virtual server.
    const exact = after === packet ? virtualServerFor(ctx, packet) : undefined;
    // The kernel looks up the catch-all port 0 next (ip_vs_ctl.c ip_vs_service_find).
    const catchAll = after === packet && !exact ? virtualServerFor(ctx, { ...packet, dport: 0 }) : undefined;
    const vs = exact ?? catchAll;
    let state = end.state;
    const label = `${packet.proto.toUpperCase()} ${packet.dst}`;
    if (ctx.ipvs && after === packet && !vs) state = noted(state, `no IPVS virtual server for ${label}:${packet.dport}`);
    if (catchAll) state = noted(state, `no IPVS virtual server for ${label}:${packet.dport}; the catch-all virtual server ${label}:0 takes the connection`);
    if (origin === 'node') {
      if (vs) viaIpvs(vs, state);
      else deliver('OUTPUT', after, state, verdict);
      continue;
    }
    const hook = isLocal(ctx, after.dst) ? 'INPUT' : 'FORWARD';
    if (vs && hook === 'FORWARD') {
      state = noted(state, `${packet.dst} is not one of the node's addresses (not bound on kube-ipvs0), so IPVS does not see this packet from outside the node`);
    }
    deliver(hook, after, state, verdict, vs && hook === 'INPUT' ? (s) => viaIpvs(vs, s) : undefined);
  }
  return { packet, origin, outcomes };
}
