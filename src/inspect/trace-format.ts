/**
 * Text form of a trace: the path chain by chain (the rules every outcome
 * shares first, then each branch), the candidate endpoints with their
 * probability and masquerade verdict, and the overall verdict. A rule
 * prints as `line N -A CHAIN rule` under its `table chain` header; the
 * steps and verdicts of a mode's dataplane print as its {@link TraceFormat}
 * says (IPVS: src/modes/ipvs/trace.ts).
 */
import { joinHostPort } from '../model/addr.ts';
import type { Outcome, Step, TraceResult, Verdict } from './trace.ts';

/** How a mode prints the steps and verdicts of its dataplane (trace.ts TraceDataplane). */
export interface TraceFormat {
  /** The `table` of the steps and verdicts it prints. */
  readonly table: string;
  /** One of its steps, under the `table chain` header, without the note. */
  step(step: Step): string;
  /** A `refused` verdict, or a `reject`, `drop` or `unknown` one of its table; undefined for the default text. */
  describe(verdict: Verdict): string | undefined;
  /** How the summary names a DNAT through its steps, e.g. "IPVS to", "real server", "real servers". */
  readonly target: { readonly verb: string; readonly one: string; readonly many: string };
}

/** The summary's words for a DNAT by a rule. */
const DNAT_TARGET: TraceFormat['target'] = { verb: 'DNAT to', one: 'endpoint', many: 'endpoints' };

function stepLines(steps: readonly Step[], indent: string, format: TraceFormat | undefined): string[] {
  const out: string[] = [];
  let chain = '';
  for (const s of steps) {
    const where = `${s.table} ${s.chain}`;
    if (where !== chain) {
      out.push(`${indent}${where}`);
      chain = where;
    }
    const note = s.note ? `   [${s.note}]` : '';
    // A dataplane's step is not a rule: the mode prints it.
    out.push(s.table === format?.table ? `${indent}  ${format.step(s)}${note}` : `${indent}  line ${String(s.line).padEnd(4)} -A ${s.chain} ${s.rule}${note}`);
  }
  return out;
}

function sameStep(a: Step, b: Step): boolean {
  return a.table === b.table && a.chain === b.chain && a.line === b.line && a.rule === b.rule && a.note === b.note;
}

function percent(p: number): string {
  return `${(p * 100).toFixed(2)}%`;
}

function describe(v: Verdict, format: TraceFormat | undefined): string {
  if (format && (v.kind === 'refused' || ('table' in v && v.table === format.table))) {
    const text = format.describe(v);
    if (text !== undefined) return text;
  }
  switch (v.kind) {
    case 'dnat':
      return `DNAT to ${joinHostPort(v.ip, v.port)}`;
    case 'reject':
      return `REJECTed (${v.table} ${v.chain} line ${v.line})`;
    case 'drop':
      return `DROPped (${v.table} ${v.chain}${v.line ? ` line ${v.line}` : ' policy'})`;
    case 'untouched':
      return "leaves drover's rules untouched (no DNAT)";
    case 'refused':
      return `refused by ${v.where}: ${v.reason}`;
    case 'unknown':
      return `cannot evaluate: ${v.table} ${v.chain} line ${v.line}: ${v.reason}`;
  }
}

/**
 * Format a trace for people.
 * @param format how the steps and verdicts of the mode's dataplane print (the driver's ModeTrace.format); without it they print as rules.
 */
export function formatTrace(result: TraceResult, format?: TraceFormat): string {
  const { packet: p, outcomes } = result;
  const hook = result.origin === 'node' ? 'from the node itself: nat OUTPUT' : 'from outside the node: nat PREROUTING';
  const out = [`trace ${p.src} -> ${joinHostPort(p.dst, p.dport)}/${p.proto}, a new connection ${hook}`, ''];
  const first = outcomes[0]?.steps ?? [];
  let common = first.length;
  for (const o of outcomes) {
    let i = 0;
    while (i < common && i < o.steps.length && sameStep(o.steps[i]!, first[i]!)) i++;
    common = i;
  }
  // The steps every branch ends with (filter and POSTROUTING, usually), printed once after the branches.
  let tail = Math.min(...outcomes.map((o) => o.steps.length - common));
  for (const o of outcomes) {
    let k = 0;
    while (k < tail && sameStep(o.steps[o.steps.length - 1 - k]!, first[first.length - 1 - k]!)) k++;
    tail = k;
  }
  if (outcomes.length <= 1) tail = 0;
  out.push(...stepLines(first.slice(0, common), '', format));
  if (outcomes.length > 1) {
    out.push('', `then one of ${outcomes.length} branches:`);
    for (const o of outcomes) {
      out.push(`  (${percent(o.probability)}) ${describe(o.verdict, format)}${o.masqueraded ? ', masqueraded' : ''}`);
      out.push(...stepLines(o.steps.slice(common, o.steps.length - tail), '    ', format));
    }
    if (tail > 0) out.push('', 'then, in every branch:', ...stepLines(first.slice(first.length - tail), '', format));
  } else if (first.length > common) {
    out.push(...stepLines(first.slice(common), '', format));
  }
  out.push('', ...summary(outcomes, format));
  return `${out.join('\n')}\n`;
}

function summary(outcomes: readonly Outcome[], format: TraceFormat | undefined): string[] {
  const out: string[] = [];
  const dnat = outcomes.filter((o) => o.verdict.kind === 'dnat');
  // An endpoint a dataplane picked (e.g. an IPVS real server) goes by the dataplane's name, not a DNAT rule's.
  const target = format && dnat.some((o) => o.steps.some((s) => s.table === format.table)) ? format.target : DNAT_TARGET;
  if (dnat.length > 0) {
    const byEndpoint = new Map<string, { p: number; masq: boolean[] }>();
    for (const o of dnat) {
      const v = o.verdict as Extract<Verdict, { kind: 'dnat' }>;
      const key = joinHostPort(v.ip, v.port);
      const e = byEndpoint.get(key) ?? { p: 0, masq: [] };
      e.p += o.probability;
      e.masq.push(o.masqueraded);
      byEndpoint.set(key, e);
    }
    out.push(`${target.many} (probability for a new connection):`);
    for (const [ep, e] of byEndpoint) {
      const masq = e.masq.every(Boolean) ? 'masqueraded' : e.masq.some(Boolean) ? 'sometimes masqueraded' : 'not masqueraded';
      out.push(`  ${ep.padEnd(22)} ${percent(e.p).padStart(7)}  ${masq}`);
    }
  }
  const notes = [...new Set(outcomes.flatMap((o) => o.notes))];
  for (const n of notes) out.push(`note: ${n}`);
  const masq = dnat.every((o) => o.masqueraded) ? ', masqueraded' : dnat.some((o) => o.masqueraded) ? ', masqueraded for some endpoints (hairpin)' : ', not masqueraded';
  const endpoints = new Set(dnat.map((d) => describe(d.verdict, format))).size;
  const verdicts = [...new Set(outcomes.map((o) => (o.verdict.kind === 'dnat' ? `${target.verb} ${endpoints === 1 ? `1 ${target.one}` : `one of ${endpoints} ${target.many}`}${masq}` : describe(o.verdict, format))))];
  out.push(`verdict: ${verdicts.join('; ')}`);
  return out;
}
