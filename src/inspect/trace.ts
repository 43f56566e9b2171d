/**
 * `drover trace`: walk the live state of the node the way the kernel walks
 * a new connection's first packet through the netfilter hooks:
 *
 *   from outside the node: nat PREROUTING → filter FORWARD (or INPUT) → nat POSTROUTING
 *   from the node itself:  nat OUTPUT → filter OUTPUT → nat POSTROUTING
 *
 * This engine is mode-neutral. It knows the order of the hooks and what the
 * verdicts mean (DNAT, DROP, REJECT, masquerade); the rules of each hook are
 * evaluated by the context's {@link TraceRuleset} (the iptables evaluator is
 * in src/modes/iptables/trace.ts), and a mode whose dataplane takes packets
 * beside the rules (IPVS, src/modes/ipvs/trace.ts) plugs in as the
 * context's {@link TraceDataplane}.
 *
 * A ruleset can split the walk (e.g. `-m statistic --mode random`), so the
 * result is the set of outcomes (endpoint, masquerade or not, REJECT...) with
 * the probability of each. What an evaluator cannot decide ends that branch
 * as "cannot evaluate" instead of guessing.
 *
 * A dataplane sees the packet as nat PREROUTING or OUTPUT left it and may
 * take it at the local hook: after filter INPUT for a packet from outside
 * that is for one of the node's addresses (LOCAL_IN), right after nat OUTPUT
 * for a packet from the node (LOCAL_OUT). What it sends on goes through
 * filter OUTPUT and nat POSTROUTING:
 *
 *   from outside the node: nat PREROUTING → filter INPUT → dataplane → filter OUTPUT → nat POSTROUTING
 *   from the node itself:  nat OUTPUT → dataplane → filter OUTPUT → nat POSTROUTING
 */

/** The first packet of a new connection; `src` and `dst` are of one family, in canonical form (addr.ts parseIP). */
export interface Packet {
  readonly src: string;
  readonly dst: string;
  readonly dport: number;
  readonly proto: 'tcp' | 'udp' | 'sctp';
}

/** A place in a ruleset: a table, a chain and a line (0 for a chain's policy). */
export interface RulePlace {
  readonly table: string;
  readonly chain: string;
  readonly line: number;
}

/** One rule that matched (or one step of a dataplane). `line` is the rule's line in the ruleset's text. */
export interface Step extends RulePlace {
  readonly rule: string;
  /** e.g. "taken with probability 0.3333", "assumed: no affinity entry yet". */
  readonly note?: string;
}

/** How a branch ended. */
export type Verdict =
  | { kind: 'dnat'; ip: string; port: number }
  | { kind: 'reject' | 'drop'; table: string; chain: string; line: number }
  | { kind: 'untouched' }
  /** A dataplane refused the connection: `where` is what refused it (e.g. an IPVS virtual server, "TCP 10.96.0.11:80 rr"). */
  | { kind: 'refused'; where: string; reason: string }
  | { kind: 'unknown'; table: string; chain: string; line: number; reason: string };

/** What one branch of the walk has gathered. */
export interface Branch {
  /** Probability of this branch for a new connection, 0-1. */
  readonly probability: number;
  /** The rules and dataplane steps taken, in order. */
  readonly steps: readonly Step[];
  /** Things the walker assumed (affinity state). */
  readonly notes: readonly string[];
}

/** One possible outcome of the walk: a branch and how it ended. */
export interface Outcome extends Branch {
  readonly verdict: Verdict;
  /** Source NAT by MASQUERADE (or SNAT) in POSTROUTING. */
  readonly masqueraded: boolean;
}

/** The result of a trace. */
export interface TraceResult {
  readonly packet: Packet;
  /** "outside" (nat PREROUTING) or "node" (nat OUTPUT). */
  readonly origin: 'outside' | 'node';
  readonly outcomes: readonly Outcome[];
}

/** One branch of the walk so far, with the packet's mark. */
export interface TraceState extends Branch {
  readonly mark: number;
  /**
   * The packet as it came in, once a ruleset's DNAT rewrote its destination:
   * conntrack's original direction (nftables' `ct status dnat`, `ct original
   * ip daddr`), for the hooks after nat PREROUTING or OUTPUT. Set by the
   * ruleset that did the DNAT (nftables mode); the engine passes it on.
   */
  readonly original?: Packet;
}

/** A verdict a rule ends a hook's walk with, in netfilter's terms. */
export type RuleVerdict =
  | { readonly kind: 'dnat'; readonly ip: string; readonly port?: number }
  | { readonly kind: 'accept' | 'drop' | 'reject' | 'masquerade' | 'snat' };

/** How the walk of one hook ends, branch by branch. */
export type HookEnd =
  /** No rule decided: the hook's policy (e.g. "ACCEPT", "DROP") at `at` (line 0). */
  | { readonly how: 'policy'; readonly state: TraceState; readonly policy: string; readonly at: RulePlace }
  /** The rule at `at` (the last of `state.steps`) ended the walk. */
  | { readonly how: 'verdict'; readonly state: TraceState; readonly verdict: RuleVerdict; readonly at: RulePlace }
  /** The rule at `at` cannot be evaluated. */
  | { readonly how: 'unknown'; readonly state: TraceState; readonly at: RulePlace; readonly reason: string };

/** The stages of the walk a ruleset evaluates: destination NAT, filtering, source NAT. */
export type TraceStage = 'dnat' | 'filter' | 'snat';

/** The netfilter hooks of the walk. */
export type TraceHook = 'PREROUTING' | 'INPUT' | 'FORWARD' | 'OUTPUT' | 'POSTROUTING';

/**
 * The rules of a mode, as the engine walks them: `walk` evaluates the rules
 * of one stage at one hook (iptables: the nat or filter table's built-in
 * chain) for `packet`, starting from `state`, and returns how each branch
 * ends. Steps it takes are appended to the states it returns.
 */
export interface TraceRuleset {
  walk(stage: TraceStage, hook: TraceHook, packet: Packet, state: TraceState): readonly HookEnd[];
}

/** A new connection as nat PREROUTING or OUTPUT left it, as a {@link TraceDataplane} sees it. */
export interface NatExit {
  readonly origin: 'outside' | 'node';
  /** The packet as it came in. */
  readonly packet: Packet;
  /** Whether the ruleset rewrote its destination (DNAT). */
  readonly dnatted: boolean;
  /** Whether the destination (after DNAT) is one of the node's addresses (filter INPUT rather than FORWARD). */
  readonly local: boolean;
}

/** One way a dataplane sends a connection on (filter OUTPUT, nat POSTROUTING) or ends it. */
export type DataplaneBranch =
  /** Sent on to `sends` (the verdict is a DNAT to its destination). */
  | { readonly probability: number; readonly step?: Step; readonly sends: Packet }
  /** Ended by the dataplane. */
  | { readonly probability: number; readonly step?: Step; readonly ends: Verdict };

/** What a dataplane does with a connection it takes. */
export interface DataplaneTake {
  /** Assumptions that hold for every branch (state the trace does not see). */
  readonly notes: readonly string[];
  /** The branches; their probabilities add up to 1. */
  readonly branches: readonly DataplaneBranch[];
}

/** A dataplane's answer for one connection. */
export interface DataplaneClaim {
  /** Notes added to the branch whether or not the dataplane takes it. */
  readonly notes: readonly string[];
  /** Set when the dataplane takes the connection at the local hook (see the module comment). */
  readonly takes?: DataplaneTake;
}

/**
 * A mode's dataplane beside its rules (e.g. IPVS). `afterNat` is asked once
 * per branch that leaves nat PREROUTING or OUTPUT. Pure.
 */
export interface TraceDataplane {
  afterNat(exit: NatExit): DataplaneClaim;
}

/** What the walker knows of the node. */
export interface TraceContext {
  /** The node's own addresses of the packet's family, canonical (where a connection comes from, and whether it is for the node). */
  readonly localAddresses: ReadonlySet<string>;
  /** The mode's rules. */
  readonly ruleset: TraceRuleset;
  /** The mode's dataplane beside its rules; without it only the rules are walked. */
  readonly dataplane?: TraceDataplane;
}

/** Whether `ip` is the node's: one of its addresses, or loopback (127.0.0.0/8, ::1). */
function isLocal(ctx: TraceContext, ip: string): boolean {
  return ctx.localAddresses.has(ip) || ip.startsWith('127.') || ip === '::1';
}

/**
 * Trace a new connection through the node's rules (and its dataplane; see
 * the module comment).
 * @throws whatever the context's ruleset throws for rules it cannot read (iptables: RuleSyntaxError).
 */
export function trace(ctx: TraceContext, packet: Packet): TraceResult {
  const origin = isLocal(ctx, packet.src) ? 'node' : 'outside';
  const rules = ctx.ruleset;
  const start: TraceState = { probability: 1, mark: 0, steps: [], notes: [] };
  const outcomes: Outcome[] = [];
  const done = (state: TraceState, verdict: Verdict, masqueraded = false) =>
    outcomes.push({ probability: state.probability, verdict, masqueraded, steps: state.steps, notes: [...new Set(state.notes)] });
  const noted = (state: TraceState, notes: readonly string[]): TraceState => (notes.length ? { ...state, notes: [...state.notes, ...notes] } : state);

  /** filter `hook`, then nat POSTROUTING; for INPUT, `local` (a dataplane) or the end of the trace. */
  const deliver = (hook: 'INPUT' | 'FORWARD' | 'OUTPUT', pkt: Packet, state: TraceState, verdict: Verdict, local?: (s: TraceState) => void): void => {
    for (const f of rules.walk('filter', hook, pkt, state)) {
      if (f.how === 'unknown') {
        done(f.state, { kind: 'unknown', ...f.at, reason: f.reason });
        continue;
      }
      if ((f.how === 'verdict' && (f.verdict.kind === 'reject' || f.verdict.kind === 'drop')) || (f.how === 'policy' && f.policy === 'DROP')) {
        done(f.state, { kind: f.how === 'verdict' && f.verdict.kind === 'reject' ? 'reject' : 'drop', ...f.at });
        continue;
      }
      if (hook === 'INPUT') {
        if (local) local(f.state);
        else done(f.state, verdict);
        continue;
      }
      for (const p of rules.walk('snat', 'POSTROUTING', pkt, f.state)) {
        if (p.how === 'unknown') done(p.state, { kind: 'unknown', ...p.at, reason: p.reason });
        else done(p.state, verdict, p.how === 'verdict' && (p.verdict.kind === 'masquerade' || p.verdict.kind === 'snat'));
      }
    }
  };

  /** The dataplane's branches; what it sends on goes out through filter OUTPUT and nat POSTROUTING. */
  const viaDataplane = (take: DataplaneTake, state: TraceState): void => {
    const s = noted(state, take.notes);
    for (const b of take.branches) {
      const branch: TraceState = { ...s, probability: s.probability * b.probability, steps: b.step ? [...s.steps, b.step] : s.steps };
      if ('ends' in b) done(branch, b.ends);
      else deliver('OUTPUT', b.sends, branch, { kind: 'dnat', ip: b.sends.dst, port: b.sends.dport });
    }
  };

  for (const end of rules.walk('dnat', origin === 'node' ? 'OUTPUT' : 'PREROUTING', packet, start)) {
    if (end.how === 'unknown') {
      done(end.state, { kind: 'unknown', ...end.at, reason: end.reason });
      continue;
    }
    let after = packet;
    if (end.how === 'verdict' && end.verdict.kind === 'dnat') {
      after = { ...packet, dst: end.verdict.ip, dport: end.verdict.port ?? packet.dport };
    } else if (end.how === 'verdict' && (end.verdict.kind === 'drop' || end.verdict.kind === 'reject')) {
      done(end.state, { kind: end.verdict.kind, ...end.at });
      continue;
    }
    const verdict: Verdict = after === packet ? { kind: 'untouched' } : { kind: 'dnat', ip: after.dst, port: after.dport };
    const local = isLocal(ctx, after.dst);
    const claim = ctx.dataplane?.afterNat({ origin, packet, dnatted: after !== packet, local });
    const state = noted(end.state, claim?.notes ?? []);
    const takes = claim?.takes;
    if (origin === 'node') {
      if (takes) viaDataplane(takes, state);
      else deliver('OUTPUT', after, state, verdict);
      continue;
    }
    const hook = local ? 'INPUT' : 'FORWARD';
    deliver(hook, after, state, verdict, takes && hook === 'INPUT' ? (s) => viaDataplane(takes, s) : undefined);
  }
  return { packet, origin, outcomes };
}
