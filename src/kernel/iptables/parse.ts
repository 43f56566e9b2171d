/**
 * Parser for the iptables-save / iptables-restore text format
 * (iptables-save(8), iptables-restore(8)): `*table`, `:CHAIN POLICY [p:b]`,
 * `-A CHAIN rule...`, `COMMIT`, `#` comments.
 *
 * Rules are kept as text, without the leading `-A CHAIN `, exactly as
 * iptables-save prints them; comparison with rendered rules is textual
 * (see canonical.ts).
 */
import { DroverError } from '../../errors.ts';

/** Tables drover reads and writes. */
export type TableName = 'filter' | 'nat';

/** A table of the IPv6 ruleset as the inspect commands name it beside the IPv4 one: "nat (IPv6)". */
export type ShownTable = TableName | `${TableName} (IPv6)`;

/**
 * The tables in the order drover commits them: nat first, so that a service
 * that gets its first endpoint has its DNAT before its REJECT is removed
 * (and one that loses its last endpoint has no DNAT before the REJECT
 * appears; a packet in between is neither rejected nor translated, never
 * translated to a removed endpoint).
 */
export const TABLES: readonly TableName[] = ['nat', 'filter'];

/** Built-in chains of the filter and nat tables (hook chains). */
export const BUILTIN_CHAINS: ReadonlySet<string> = new Set(['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING']);

/** One chain: its policy (`-` for user chains) and its rules in order. */
export interface ParsedChain {
  readonly policy: string;
  readonly rules: string[];
  /** 1-based line of each rule in the parsed text, parallel to `rules`. */
  readonly lines: number[];
}

/** One table: chains in the order they were declared. */
export type ParsedTable = Map<string, ParsedChain>;

/** A parsed dump: tables by name. */
export type ParsedDump = Map<string, ParsedTable>;

/** Thrown on text that is not in iptables-save format; names the line. */
export class IptablesParseError extends DroverError {
  constructor(readonly line: number, message: string) {
    super(`iptables-save text, line ${line}: ${message}`);
    this.name = 'IptablesParseError';
  }
}

/** True when `line` has an odd number of unescaped double quotes. */
function unbalancedQuotes(line: string): boolean {
  let open = false;
  for (let i = 0; i < line.length; i++) {
    if (line[i] === '\\') i++;
    else if (line[i] === '"') open = !open;
  }
  return open;
}

/**
 * Parse iptables-save output (or a static rules file in the same format).
 * Only `-A` rule lines are accepted; counters (`[p:b]` before `-A`, as
 * `iptables-save -c` prints) are dropped.
 * Rules on an undeclared built-in chain are accepted (static rules files need not declare them).
 * @throws IptablesParseError on a line outside a table, an unknown line, or a rule on an undeclared user chain.
 */
export function parseSave(text: string): ParsedDump {
  const dump: ParsedDump = new Map();
  let table: ParsedTable | undefined;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const lineNo = i + 1;
    let line = lines[i]!.trimEnd();
    // A quoted string (a rule comment) may hold a newline: iptables-save
    // prints it as it is, so the rule continues on the next line.
    while (unbalancedQuotes(line) && i + 1 < lines.length) line = `${line}\n${lines[++i]!.trimEnd()}`;
    if (line === '' || line.startsWith('#')) continue;
    if (line.startsWith('*')) {
      const name = line.slice(1);
      table = dump.get(name) ?? new Map();
      dump.set(name, table);
      continue;
    }
    if (!table) throw new IptablesParseError(lineNo, `"${line}" outside a table`);
    if (line === 'COMMIT') {
      table = undefined;
      continue;
    }
    if (line.startsWith(':')) {
      const [chain, policy = '-'] = line.slice(1).split(' ');
      if (!chain) throw new IptablesParseError(lineNo, 'empty chain name');
      if (!table.has(chain)) table.set(chain, { policy, rules: [], lines: [] });
      continue;
    }
    const rule = line.replace(/^\[\d+:\d+\] /, '');
    const m = /^-A (\S+) ([\s\S]*)$/.exec(rule);
    if (!m) throw new IptablesParseError(lineNo, `not a rule: "${line}"`);
    const name = m[1]!;
    let chain = table.get(name);
    if (!chain && BUILTIN_CHAINS.has(name)) {
      chain = { policy: 'ACCEPT', rules: [], lines: [] };
      table.set(name, chain);
    }
    if (!chain) throw new IptablesParseError(lineNo, `rule on undeclared chain ${name}`);
    chain.rules.push(m[2]!);
    chain.lines.push(lineNo);
  }
  return dump;
}
