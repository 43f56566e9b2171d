/**
 * Text form of a trace: the path chain by chain (the rules every outcome
 * shares first, then each branch), the candidate endpoints with their
 * probability and masquerade verdict, and the overall verdict. An IPVS step
 * (IPVS mode) prints under the header `ipvs <virtual server> <scheduler>` as
 * the real server it picks: `-> 10.244.1.2:8080 Masq weight 1`.
 */
import type { Outcome, Step, TraceResult, Verdict } from './trace.ts';

function stepLines(steps: readonly Step[], indent: string): string[] {
  const out: string[] = [];
  let chain = '';
  for (const s of steps) {
    const where = `${s.table} ${s.chain}`;
    if (where !== chain) {
      out.push(`${indent}${where}`);
      chain = where;
    }
    const note = s.note ? `   [${s.note}]` : '';
    // An IPVS step is a real server of the virtual server in its header, not a rule.
    out.push(s.table === 'ipvs' ? `${indent}  ${s.rule}${note}` : `${indent}  line ${String(s.line).padEnd(4)} -A ${s.chain} ${s.rule}${note}`);
  }
  return out;
}

function sameStep(a: Step, b: Step): boolean {
  return a.table === b.table && a.chain === b.chain && a.line === b.line && a.rule === b.rule && a.note === b.note;
}

function percent(p: number): string {
  return `${(p * 100).toFixed(2)}%`;
}

function describe(v: Verdict): string {
  switch (v.kind) {
    case 'dnat':
      return `DNAT to ${v.ip}:${v.port}`;
    case 'reject':
      return `REJECTed (${v.table} ${v.chain} line ${v.line})`;
    case 'drop':
      return `DROPped (${v.table} ${v.chain}${v.line ? ` line ${v.line}` : ' policy'})`;
    case 'untouched':
      return "leaves drover's rules untouched (no DNAT)";
    case 'refused':
      return `refused by IPVS virtual server ${v.where}: ${v.reason}`;
    case 'unknown':
      return v.table === 'ipvs' ? `ipvs ${v.chain}: ${v.reason}` : `cannot evaluate: ${v.table} ${v.chain} line ${v.line}: ${v.reason}`;
  }
}

/** Format a trace for people. */
export function formatTrace(result: TraceResult): string {
  const { packet: p, outcomes } = result;
  const hook = result.origin === 'node' ? 'from the node itself: nat OUTPUT' : 'from outside the node: nat PREROUTING';
  const out = [`trace ${p.src} -> ${p.dst}:${p.dport}/${p.proto}, a new connection ${hook}`, ''];
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
  out.push(...stepLines(first.slice(0, common), ''));
  if (outcomes.length > 1) {
    out.push('', `then one of ${outcomes.length} branches:`);
    for (const o of outcomes) {
      out.push(`  (${percent(o.probability)}) ${describe(o.verdict)}${o.masqueraded ? ', masqueraded' : ''}`);
      out.push(...stepLines(o.steps.slice(common, o.steps.length - tail), '    '));
    }
    if (tail > 0) out.push('', 'then, in every branch:', ...stepLines(first.slice(first.length - tail), ''));
  } else if (first.length > common) {
    out.push(...stepLines(first.slice(common), ''));
  }
  out.push('', ...summary(outcomes));
  return `${out.join('\n')}\n`;
}

function summary(outcomes: readonly Outcome[]): string[] {
  const out: string[] = [];
  const dnat = outcomes.filter((o) => o.verdict.kind === 'dnat');
  // In IPVS mode a real server is picked by IPVS (masquerade forwarding), not by a DNAT rule.
  const ipvs = dnat.some((o) => o.steps.some((s) => s.table === 'ipvs'));
  const target = ipvs ? ['IPVS to', 'real server', 'real servers'] : ['DNAT to', 'endpoint', 'endpoints'];
  if (dnat.length > 0) {
    const byEndpoint = new Map<string, { p: number; masq: boolean[] }>();
    for (const o of dnat) {
      const v = o.verdict as Extract<Verdict, { kind: 'dnat' }>;
      const key = `${v.ip}:${v.port}`;
      const e = byEndpoint.get(key) ?? { p: 0, masq: [] };
      e.p += o.probability;
      e.masq.push(o.masqueraded);
      byEndpoint.set(key, e);
    }
    out.push(`${ipvs ? 'real servers' : 'endpoints'} (probability for a new connection):`);
    for (const [ep, e] of byEndpoint) {
      const masq = e.masq.every(Boolean) ? 'masqueraded' : e.masq.some(Boolean) ? 'sometimes masqueraded' : 'not masqueraded';
      out.push(`  ${ep.padEnd(22)} ${percent(e.p).padStart(7)}  ${masq}`);
    }
  }
  const notes = [...new Set(outcomes.flatMap((o) => o.notes))];
  for (const n of notes) out.push(`note: ${n}`);
  const masq = dnat.every((o) => o.masqueraded) ? ', masqueraded' : dnat.some((o) => o.masqueraded) ? ', masqueraded for some endpoints (hairpin)' : ', not masqueraded';
  const endpoints = new Set(dnat.map((d) => describe(d.verdict))).size;
  const verdicts = [...new Set(outcomes.map((o) => (o.verdict.kind === 'dnat' ? `${target[0]} ${endpoints === 1 ? `1 ${target[1]}` : `one of ${endpoints} ${target[2]}`}${masq}` : describe(o.verdict))))];
  out.push(`verdict: ${verdicts.join('; ')}`);
  return out;
}
