/**
 * nft(8) scripts of nftables mode: the whole table (what `drover render
 * --mode nftables` prints and a first sync writes) and the structural
 * changes of later syncs, each with element operations, as one
 * `nft -f` transaction, for the table of one IP family (`ip drover` or
 * `ip6 drover`, default IPv4). Pure: the same plan gives the same text.
 */
import type { IPFamily } from '../../model/types.ts';
import { chainHeader, ruleText, tableRef, type ChainDecl, type Layout, type RuleDecl, type SetDecl } from './layout.ts';
import type { ElementOp, TableModel } from './model.ts';
import type { StructurePlan } from './plan.ts';

function setBlock(s: SetDecl, indent: string): string[] {
  const kind = s.mapType !== undefined ? 'map' : 'set';
  return [`${indent}${kind} ${s.name} {`, ...s.body.map((l) => `${indent}\t${l}`), `${indent}}`];
}

/** What a script says of a rule nft cannot write (layout.ts RuleDecl `netlink`): a comment line, as it follows the script over netlink. */
export const NETLINK_RULE_NOTE = '# appended over netlink (nft 1.0.6 cannot compile it):';

/**
 * A rule as a script line, `prefix` (`add rule … `, or nothing inside a chain block) before it: its text and comment;
 * for an affinity record rule (appended over netlink) a comment line, which nft reads as nothing; for a pick rule its
 * TCP-only text with the comment `replaces`, the rule the netlink rule replaces once the script went through.
 */
function ruleLine(r: RuleDecl, prefix: string): string {
  if (r.netlink?.kind === 'pick') return `${prefix}${ruleText({ text: r.text, comment: r.netlink.replaces })}`;
  return r.netlink ? `${NETLINK_RULE_NOTE} ${prefix}${ruleText(r)}` : `${prefix}${ruleText(r)}`;
}

function chainBlock(c: ChainDecl, indent: string): string[] {
  const header = chainHeader(c);
  return [`${indent}chain ${c.name} {`, ...(header ? [`${indent}\t${header}`] : []), ...c.rules.map((r) => `${indent}\t${ruleLine(r, '')}`), `${indent}}`];
}

/** Most elements on one `add element` line. */
const ELEMENTS_PER_LINE = 1000;

/** `add element`/`delete element` lines for `ops` (already ordered): one line per run of the same kind and set, of at most 1000 elements, in the order given. */
export function elementLines(ops: readonly ElementOp[], family: IPFamily = 'IPv4'): string[] {
  const T = tableRef(family);
  const lines: string[] = [];
  let i = 0;
  while (i < ops.length) {
    const { op, set } = ops[i]!;
    const items: string[] = [];
    while (i < ops.length && ops[i]!.op === op && ops[i]!.set === set && items.length < ELEMENTS_PER_LINE) {
      const o = ops[i]!;
      items.push(op === 'add' && o.value !== undefined ? `${o.key} : ${o.value}` : o.key);
      i++;
    }
    lines.push(`${op} element ${T} ${set} { ${items.join(', ')} }`);
  }
  return lines;
}

/** The whole table of `l` as one `table ip drover { … }` block (`ip6 drover` for IPv6). */
export function tableBlock(l: Layout, family: IPFamily = 'IPv4'): string[] {
  return [`table ${tableRef(family)} {`, ...l.sets.flatMap((s) => setBlock(s, '\t')), ...l.chains.flatMap((c) => chainBlock(c, '\t')), '}'];
}

/**
 * The script of one transaction: the structural changes of `plan` (for a
 * table `model` describes) around the element operations `ops` (ordered:
 * deletes, then adds). A rebuild deletes the table first when it exists
 * (`ops` must then be planned from an empty table). Rules nft cannot
 * write as meant (RuleDecl `netlink`) are comment lines here, or for pick
 * rules their TCP-only form: the caller appends or puts them in place over
 * netlink once the script went through (backend.ts).
 */
export function transactionScript(plan: StructurePlan, want: Layout, model: TableModel, ops: readonly ElementOp[], family: IPFamily = 'IPv4'): string {
  const T = tableRef(family);
  const lines: string[] = [];
  if (plan.rebuild) {
    if (model.exists) lines.push(`delete table ${T}`);
    lines.push(...tableBlock(want, family), ...elementLines(ops, family));
    return `${lines.join('\n')}\n`;
  }
  for (const s of plan.addSets) lines.push(`add ${s.mapType !== undefined ? 'map' : 'set'} ${T} ${s.name} { ${s.body.join('; ')}; }`);
  for (const c of plan.writeChains) {
    if (model.chains.has(c.name)) lines.push(`flush chain ${T} ${c.name}`);
    else {
      const header = chainHeader(c);
      lines.push(`add chain ${T} ${c.name}${header ? ` { ${header} }` : ''}`);
    }
  }
  for (const name of plan.deleteChains) lines.push(`flush chain ${T} ${name}`);
  lines.push(...elementLines(ops, family));
  for (const c of plan.writeChains) for (const r of c.rules) lines.push(ruleLine(r, `add rule ${T} ${c.name} `));
  for (const name of plan.deleteChains) lines.push(`delete chain ${T} ${name}`);
  for (const name of plan.deleteSets) lines.push(`delete ${model.types.get(name)?.mapType !== undefined ? 'map' : 'set'} ${T} ${name}`);
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}
