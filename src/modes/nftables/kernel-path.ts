/**
 * `drover trace --kernel` in nftables mode, the pure part: the short-lived
 * chains that mark the probe for tracing (`meta nftrace set 1`) in drover's
 * table of the probe's family (`ip drover`, or `ip6 drover` for an IPv6
 * probe), the path the kernel reports for it (trace events,
 * netlink/trace-codec.ts) read as drover's steps and verdict, its
 * comparison with the evaluator's answer (trace.ts), and its text.
 *
 * The chains (all in that table, named `trace-TAG-*`, TAG unique to one
 * run):
 * - `trace-TAG-mark`, a filter chain at the probe's first hook
 *   (prerouting from outside the node, output from the node itself) at
 *   priority -300 (raw), before conntrack and every chain of drover's
 *   layout: one rule that matches the probe's addresses, protocol and ports
 *   and sets `meta nftrace`. nftrace stays with the packet through the
 *   later hooks, so every chain it meets reports it.
 * - `trace-TAG-in` (input) and `trace-TAG-out` (postrouting) at priority
 *   300, after source NAT, without rules: their policy event carries the
 *   packet as it leaves netfilter, which shows the destination a DNAT chose
 *   and the source a masquerade chose.
 *
 * The kernel's verdict: the first `drop` (a rule's, a `reject` rule's, or a
 * base chain's policy) ends the packet; otherwise the last headers seen say
 * whether the destination was rewritten (DNAT) and the source masqueraded.
 */
import type { Outcome, Packet, TraceResult } from '../../inspect/trace.ts';
import { joinHostPort, parseIP } from '../../model/addr.ts';
import type { IPFamily } from '../../model/types.ts';
import { nftFamily, tableRef } from './layout.ts';
import type { LiveRule } from './live.ts';
import { NFPROTO } from '../../kernel/nftables/constants.ts';
import type { TraceEvent, TracedPacket } from '../../kernel/nftables/trace-codec.ts';

/** The probe: one new connection's first packet. */
export interface KernelProbe extends Packet {
  readonly proto: 'tcp' | 'udp';
  readonly sport: number;
  /** Where it enters netfilter: from outside the node (prerouting) or from the node itself (output). */
  readonly origin: 'outside' | 'node';
}

/** The chain-name prefix of one run's trace chains (module comment); `tag` is [a-z0-9]{1,16}. */
export function traceChainPrefix(tag: string): string {
  if (!/^[a-z0-9]{1,16}$/.test(tag)) throw new Error(`trace tag ${JSON.stringify(tag)} is not 1-16 of [a-z0-9]`);
  return `trace-${tag}-`;
}

const IP_PROTO: Readonly<Record<KernelProbe['proto'], number>> = { tcp: 6, udp: 17 };

/** The IP family of a probe: its destination's (both addresses are of one family, checked by {@link addTraceScript}). */
export function probeFamily(p: Packet): IPFamily {
  return p.dst.includes(':') ? 'IPv6' : 'IPv4';
}

/** The probe's table as traces and outcomes name it: "ip drover", "ip6 drover". */
function probeTable(p: Packet): string {
  return tableRef(probeFamily(p));
}

function checkProbe(p: KernelProbe): void {
  const port = (n: number) => Number.isInteger(n) && n >= 1 && n <= 65535;
  const src = parseIP(p.src);
  const dst = parseIP(p.dst);
  if (src?.text !== p.src || dst?.text !== p.dst || src.family !== dst.family) throw new Error(`probe ${p.src} -> ${p.dst}: not two canonical addresses of one family`);
  if (!port(p.sport) || !port(p.dport)) throw new Error(`probe ports ${p.sport} -> ${p.dport}: not 1-65535`);
  if (!(p.proto in IP_PROTO)) throw new Error(`probe protocol ${JSON.stringify(p.proto)}: not tcp or udp`);
}

/**
 * The `nft -f` script that adds one run's trace chains (module comment) to
 * drover's table of the probe's family (`ip drover`, `ip6 drover`). `add
 * chain` of a table that does not exist fails, so the script never creates
 * the table.
 * @throws Error for a tag or probe that is not valid.
 */
export function addTraceScript(tag: string, p: KernelProbe): string {
  const prefix = traceChainPrefix(tag);
  checkProbe(p);
  const t = probeTable(p);
  const l3 = nftFamily(probeFamily(p)).l3;
  const hook = p.origin === 'node' ? 'output' : 'prerouting';
  return [
    `add chain ${t} ${prefix}mark { type filter hook ${hook} priority -300; policy accept; }`,
    `add rule ${t} ${prefix}mark ${l3} saddr ${p.src} ${l3} daddr ${p.dst} meta l4proto ${p.proto} th sport ${p.sport} th dport ${p.dport} meta nftrace set 1 comment "drover trace --kernel"`,
    `add chain ${t} ${prefix}in { type filter hook input priority 300; policy accept; }`,
    `add chain ${t} ${prefix}out { type filter hook postrouting priority 300; policy accept; }`,
    '',
  ].join('\n');
}

/**
 * The `nft -f` script that removes one run's trace chains from drover's
 * table of `family` (default IPv4), whichever of them exist (`names`: the
 * chains of the live table).
 */
export function removeTraceScript(tag: string, names: Iterable<string>, family: IPFamily = 'IPv4'): string {
  const prefix = traceChainPrefix(tag);
  const t = tableRef(family);
  const mine = [...names].filter((n) => n.startsWith(prefix)).sort();
  return mine.map((n) => `flush chain ${t} ${n}\ndelete chain ${t} ${n}\n`).join('');
}

/** One event of the kernel's path, as drover prints it. */
export interface KernelStep {
  /** "ip drover" ("ip6 drover"), or the family and table of another table the packet met. */
  readonly table: string;
  readonly chain: string;
  readonly kind: 'rule' | 'return' | 'policy';
  /** For a rule: its handle, its place in the chain (absent when the listing no longer has it) and its comment. */
  readonly handle?: number;
  readonly line?: number;
  readonly comment?: string | null;
  /** "continue", "accept", "drop", "jump services", "return", … */
  readonly verdict: string;
}

/** The kernel's verdict on the probe. */
export type KernelVerdict =
  | { readonly kind: 'dnat'; readonly ip: string; readonly port: number }
  | { readonly kind: 'untouched' }
  | { readonly kind: 'reject' | 'drop'; readonly table: string; readonly chain: string; readonly line: number }
  /** No verdict and no headers after the last step: the packet left netfilter's view (routing, a socket, …). */
  | { readonly kind: 'unseen'; readonly after: string };

/** The path the kernel reported for the probe. */
export interface KernelPath {
  readonly probe: KernelProbe;
  /** The trace id of the probe's events. */
  readonly id: number;
  readonly steps: readonly KernelStep[];
  readonly verdict: KernelVerdict;
  readonly masqueraded: boolean;
  /** The packet as last seen (after every NAT), when any event carried it. */
  readonly last?: TracedPacket;
}

function familyName(family: number): string {
  return family === 2 ? 'ip' : family === 10 ? 'ip6' : family === 1 ? 'inet' : family === 5 ? 'netdev' : family === 3 ? 'arp' : family === 7 ? 'bridge' : `family ${family}`;
}

function verdictText(e: TraceEvent): string {
  const v = e.verdict;
  if (!v) return e.type === 'return' ? 'return' : 'continue';
  return v.chain ? `${v.code} ${v.chain}` : v.code;
}

/** Whether event `e` is of drover's table of the probe's family. */
function inOurTable(e: TraceEvent, p: Packet): boolean {
  const f = probeFamily(p);
  return e.table === nftFamily(f).table.name && e.family === (f === 'IPv6' ? NFPROTO.IPV6 : NFPROTO.IPV4);
}

/** Whether `pkt` is the probe itself, as it entered. */
function isProbe(pkt: TracedPacket | undefined, p: KernelProbe): boolean {
  return pkt !== undefined && pkt.src === p.src && pkt.dst === p.dst && pkt.protocol === IP_PROTO[p.proto] && pkt.sport === p.sport && pkt.dport === p.dport;
}

/**
 * The events of the probe's first packet: from the first event of the mark
 * chain that carries the probe's headers, the events of its trace id up to
 * the mark chain's next packet (a retransmission, or the connection's next
 * packet, which may get the same id).
 */
export function probeEvents(events: readonly TraceEvent[], tag: string, p: KernelProbe): TraceEvent[] {
  const mark = `${traceChainPrefix(tag)}mark`;
  const start = events.findIndex((e) => inOurTable(e, p) && e.chain === mark && isProbe(e.packet, p));
  if (start < 0) return [];
  const id = events[start]!.id;
  const out: TraceEvent[] = [events[start]!];
  for (const e of events.slice(start + 1)) {
    if (e.id !== id) continue;
    if (e.chain === mark && inOurTable(e, p) && e.packet) break;
    out.push(e);
  }
  return out;
}

/**
 * Read the probe's events as drover's path: every rule event with a handle,
 * every return and every policy event, but those of this run's own trace
 * chains, named by `rules` (the live table's rules by handle, live.ts); and
 * the kernel's verdict (module comment).
 * @returns undefined when no event is the probe's.
 */
export function kernelPath(events: readonly TraceEvent[], tag: string, p: KernelProbe, rules: ReadonlyMap<number, LiveRule>): KernelPath | undefined {
  const mine = probeEvents(events, tag, p);
  if (mine.length === 0) return undefined;
  const prefix = traceChainPrefix(tag);
  const steps: KernelStep[] = [];
  let verdict: KernelVerdict | undefined;
  let last: TracedPacket | undefined;
  for (const e of mine) {
    if (e.packet) last = e.packet;
    const ours = inOurTable(e, p);
    if (ours && e.chain.startsWith(prefix)) continue;
    if (e.type === 'rule' && e.handle === undefined) continue; // a packet dump, not a rule (see trace-codec.ts)
    const table = `${familyName(e.family)} ${e.table}`;
    const rule = ours && e.handle !== undefined ? rules.get(e.handle) : undefined;
    const known = rule && rule.chain === e.chain ? rule : undefined;
    steps.push({
      table,
      chain: e.chain,
      kind: e.type,
      ...(e.handle !== undefined ? { handle: e.handle } : {}),
      ...(known ? { line: known.line, comment: known.comment } : {}),
      verdict: verdictText(e),
    });
    if (!verdict && e.verdict?.code === 'drop') {
      const reject = known?.statements.includes('reject') ?? false;
      verdict = { kind: reject ? 'reject' : 'drop', table, chain: e.chain, line: e.type === 'policy' ? 0 : (known?.line ?? -1) };
    }
  }
  const seenAfter = mine.slice(1).some((e) => inOurTable(e, p) && (e.chain === `${prefix}in` || e.chain === `${prefix}out`));
  const masqueraded = !verdict && seenAfter && last !== undefined && last.src !== p.src;
  if (!verdict) {
    if (!seenAfter) {
      const at = steps.length > 0 ? `${steps[steps.length - 1]!.table} ${steps[steps.length - 1]!.chain}` : `${probeTable(p)} ${prefix}mark`;
      verdict = { kind: 'unseen', after: at };
    } else if (last && (last.dst !== p.dst || last.dport !== p.dport) && last.dport !== undefined) verdict = { kind: 'dnat', ip: last.dst, port: last.dport };
    else verdict = { kind: 'untouched' };
  }
  return { probe: p, id: mine[0]!.id, steps, verdict, masqueraded, ...(last ? { last } : {}) };
}

/** The kernel's answer against the evaluator's. */
export interface KernelComparison {
  readonly match: boolean;
  /** The index in the evaluator's outcomes of the branch the kernel took (match), or of the closest one (mismatch). */
  readonly branch?: number;
  /** Why they differ; absent on a match. */
  readonly reason?: string;
}

/** A rule step as both sides name it: "CHAIN rule N". */
function stepKey(chain: string, line: number | string): string {
  return `${chain} rule ${line}`;
}

function kernelKeys(path: KernelPath): string[] {
  const table = probeTable(path.probe);
  return path.steps.filter((s) => s.table === table && s.kind === 'rule').map((s) => stepKey(s.chain, s.line ?? `handle ${s.handle}`));
}

function outcomeKeys(o: Outcome, table: string): string[] {
  return o.steps.filter((s) => s.table === table).map((s) => stepKey(s.chain, s.line));
}

/** The verdict in words, the same for both sides when they agree. */
export function kernelVerdictText(v: KernelVerdict | Outcome['verdict'], masqueraded: boolean): string {
  switch (v.kind) {
    case 'dnat':
      return `DNAT to ${joinHostPort(v.ip, v.port)}${masqueraded ? ', masqueraded' : ', not masqueraded'}`;
    case 'reject':
      return `REJECTed (${v.table} ${v.chain} rule ${v.line})`;
    case 'drop':
      return `DROPped (${v.table} ${v.chain} ${v.line ? `rule ${v.line}` : 'policy'})`;
    case 'untouched':
      return `untouched by drover's rules${masqueraded ? ', masqueraded' : ''}`;
    case 'unseen':
      return `not seen after ${v.after} (no verdict of nf_tables ended it)`;
    case 'refused':
      return `refused by ${v.where}`;
    case 'unknown':
      return `cannot evaluate (${v.table} ${v.chain} line ${v.line}: ${v.reason})`;
  }
}

function commonPrefix(a: readonly string[], b: readonly string[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

/**
 * Compare the kernel's path with the evaluator's outcomes: a match is an
 * outcome with the same rules of drover's table (of the probe's family) in the same order, the
 * same verdict and the same masquerade. Otherwise the closest outcome (the
 * longest run of the same rules) and the first difference.
 */
export function compareWithEvaluator(result: TraceResult, path: KernelPath): KernelComparison {
  const table = probeTable(path.probe);
  const k = kernelKeys(path);
  const kv = kernelVerdictText(path.verdict, path.masqueraded);
  let best: { i: number; common: number } | undefined;
  for (const [i, o] of result.outcomes.entries()) {
    const e = outcomeKeys(o, table);
    const common = commonPrefix(k, e);
    const same = common === k.length && common === e.length;
    if (same && kernelVerdictText(o.verdict, o.masqueraded) === kv) return { match: true, branch: i };
    if (!best || common > best.common) best = { i, common };
  }
  if (!best) return { match: false, reason: 'the evaluator has no outcome' };
  const o = result.outcomes[best.i]!;
  const e = outcomeKeys(o, table);
  let reason: string;
  if (best.common < k.length || best.common < e.length) {
    const kk = k[best.common] ?? 'no further rule';
    const ee = e[best.common] ?? 'no further rule';
    reason = `after ${best.common} rule(s) in common, the kernel took ${kk === 'no further rule' ? kk : `${table} ${kk}`} where the evaluator's closest branch takes ${ee === 'no further rule' ? ee : `${table} ${ee}`}`;
  } else {
    reason = `the same rules, but the kernel's verdict is ${kv} and the evaluator's ${kernelVerdictText(o.verdict, o.masqueraded)}`;
  }
  return { match: false, branch: best.i, reason };
}

/** How the probe was sent, for the text. */
export interface ProbeReport {
  /** The namespace the probe was sent from, undefined for drover's own. */
  readonly from?: string;
  /** What the sender saw: connected, sent, timeout, ECONNREFUSED, … */
  readonly result: string;
}

/**
 * The kernel's part of `drover trace --kernel` for people: the probe, the
 * path chain by chain (rule N, its handle, its comment, its verdict), the
 * kernel's verdict, and MATCH or MISMATCH with the evaluator.
 */
export function formatKernelPath(path: KernelPath, sent: ProbeReport, cmp: KernelComparison, result: TraceResult): string {
  const p = path.probe;
  const out = [
    `kernel: one ${p.proto} probe ${joinHostPort(p.src, p.sport)} -> ${joinHostPort(p.dst, p.dport)}, sent from ${sent.from ? `namespace ${sent.from}` : "the node's namespace"} (${sent.result}); nft trace id ${path.id.toString(16).padStart(8, '0')}`,
    '',
  ];
  let chain = '';
  for (const s of path.steps) {
    const where = `${s.table} ${s.chain}`;
    if (where !== chain) {
      out.push(where);
      chain = where;
    }
    if (s.kind === 'rule') {
      const place = s.line !== undefined ? `rule ${String(s.line).padEnd(3)}` : 'rule ?  ';
      const comment = s.comment ? `  comment ${JSON.stringify(s.comment)}` : '';
      out.push(`  ${place} handle ${String(s.handle ?? '?').padEnd(4)} ${s.verdict}${comment}`);
    } else out.push(`  ${s.kind === 'policy' ? `policy ${s.verdict}` : 'end of chain: return'}`);
  }
  const end = (ip: string, port: number | undefined) => (port ? joinHostPort(ip, port) : ip);
  if (path.last) out.push('', `last seen: ${end(path.last.src, path.last.sport)} -> ${end(path.last.dst, path.last.dport)}`);
  out.push(`kernel verdict: ${kernelVerdictText(path.verdict, path.masqueraded)}`, '');
  const o = cmp.branch !== undefined ? result.outcomes[cmp.branch] : undefined;
  const share = o && result.outcomes.length > 1 ? ` (${(o.probability * 100).toFixed(2)}% of new connections)` : '';
  const taken = `${result.outcomes.length > 1 ? 'branch' : 'path'}: ${kernelVerdictText(path.verdict, path.masqueraded)}`;
  out.push(cmp.match ? `MATCH: the kernel took the evaluator's ${taken}${share}` : `MISMATCH: ${cmp.reason}`);
  return `${out.join('\n')}\n`;
}
