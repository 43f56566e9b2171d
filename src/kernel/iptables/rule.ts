/**
 * Parsing one iptables rule (as iptables-save prints it, or as drover and
 * kube-proxy render it) into matches and a target, for `drover trace`.
 *
 * Understood (iptables(8), iptables-extensions(8)): `-s`/`-d` (with `!`),
 * `-p`, `-i`/`-o`, and the modules comment, tcp/udp/sctp (`--dport`,
 * `--sport`), statistic (random mode), mark, addrtype, recent, set,
 * conntrack and nfacct (which counts and always matches); targets: a jump to a chain, DNAT, MARK, MASQUERADE, SNAT,
 * REJECT, DROP, ACCEPT and RETURN. Anything else is kept as an `unknown`
 * match or target so that the evaluator can say it cannot evaluate it.
 *
 * Rules of both families read alike: ip6tables-save prints IPv6 prefixes
 * ("fd00:96::10/128") and DNAT destinations in brackets
 * ("[fd00:244:1::2]:8080"), ip6tables(8); addresses are read with the
 * model's address module (model/addr.ts).
 */
import { DroverError } from '../../errors.ts';

import { cidrContains, ipPrefix, parseCIDR, parseIP, type IPPrefix } from '../../model/addr.ts';

/** An IPv4 or IPv6 prefix of a rule (addr.ts IPPrefix: family, network and prefix length). */
export type Prefix = IPPrefix;

/** One match of a rule. `negate` is the `!` before it. */
export type Match =
  | { kind: 'src' | 'dst'; negate: boolean; prefix: Prefix }
  | { kind: 'proto'; negate: boolean; proto: string }
  | { kind: 'in-iface' | 'out-iface'; negate: boolean; name: string }
  | { kind: 'comment'; text: string }
  | { kind: 'dport' | 'sport'; negate: boolean; from: number; to: number }
  | { kind: 'statistic'; probability: number }
  | { kind: 'mark'; negate: boolean; value: number; mask: number }
  | { kind: 'addrtype'; negate: boolean; dir: 'src' | 'dst'; type: string }
  | { kind: 'recent'; mode: 'set' | 'rcheck' | 'update' | 'remove'; name: string }
  | { kind: 'set'; negate: boolean; name: string; dirs: Array<'src' | 'dst'> }
  | { kind: 'conntrack'; negate: boolean; states: string[] }
  | { kind: 'unknown'; text: string };

/** The target of a rule, or none (a rule without `-j` only counts packets). */
export type Target =
  | { kind: 'jump'; chain: string }
  | { kind: 'DNAT'; ip: string; port?: number }
  | { kind: 'MARK'; value: number; mask: number }
  | { kind: 'MASQUERADE' | 'REJECT' | 'DROP' | 'ACCEPT' | 'RETURN' }
  | { kind: 'SNAT'; ip: string }
  | { kind: 'unknown'; text: string }
  | { kind: 'none' };

/** A parsed rule. */
export interface Rule {
  readonly chain: string;
  /** The rule as written, without `-A CHAIN `. */
  readonly text: string;
  readonly matches: readonly Match[];
  readonly target: Target;
}

/** Thrown on text that is not a rule (unbalanced quotes, an option missing its value). */
export class RuleSyntaxError extends DroverError {
  constructor(rule: string, why: string) {
    super(`cannot parse rule "${rule}": ${why}`);
    this.name = 'RuleSyntaxError';
  }
}

/** Split a rule into words the way iptables-save quotes them: `"..."` with `\"` and `\\` escapes. */
export function tokenize(text: string): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < text.length) {
    if (text[i] === ' ') {
      i++;
      continue;
    }
    let word = '';
    if (text[i] === '"') {
      i++;
      while (i < text.length && text[i] !== '"') {
        if (text[i] === '\\' && i + 1 < text.length) i++;
        word += text[i++];
      }
      if (text[i] !== '"') throw new RuleSyntaxError(text, 'unbalanced quote');
      i++;
    } else {
      while (i < text.length && text[i] !== ' ') word += text[i++];
    }
    out.push(word);
  }
  return out;
}

const TRANSPORT = new Set(['tcp', 'udp', 'sctp']);
const PLAIN_TARGETS = new Set(['MASQUERADE', 'REJECT', 'DROP', 'ACCEPT', 'RETURN']);

/**
 * Parse "a.b.c.d[/n]" or "ipv6[/n]" as (ip6)iptables-save prints it into a
 * Prefix (a host address is /32 or /128, host bits are cleared); undefined
 * when it is no address or CIDR (addr.ts `parseCIDR`).
 */
export function parsePrefix(text: string): Prefix | undefined {
  if (text.includes('/')) return parseCIDR(text)?.prefix;
  const ip = parseIP(text);
  return ip === undefined ? undefined : ipPrefix(ip.family, ip.value, ip.family === 4 ? 32 : 128);
}

/** True when `ip` is inside `prefix` (addr.ts `cidrContains`); false when `ip` is no address or of the other family. */
export function prefixContains(prefix: Prefix, ip: string): boolean {
  return cidrContains(prefix, ip);
}

function parseNumber(text: string): number {
  return text.startsWith('0x') ? Number.parseInt(text, 16) : Number(text);
}

/**
 * Parse one rule of `chain`. `chains` are the user chains of the rule's
 * table: a `-j` to one of them is a jump.
 * @throws RuleSyntaxError on unbalanced quotes or an option without its value.
 */
export function parseRule(chain: string, text: string, chains: ReadonlySet<string>): Rule {
  const words = tokenize(text);
  const matches: Match[] = [];
  let target: Target = { kind: 'none' };
  let negate = false;
  let module = '';
  let i = 0;
  const value = (): string => {
    const v = words[++i];
    if (v === undefined) throw new RuleSyntaxError(text, `${words[i - 1]} needs a value`);
    return v;
  };
  const unknown = (w: string) => matches.push({ kind: 'unknown', text: module ? `-m ${module} ${w}` : w });
  for (; i < words.length; i++) {
    const w = words[i]!;
    if (w === '!') {
      negate = true;
      continue;
    }
    const neg = negate;
    negate = false;
    if (w === '-s' || w === '--source' || w === '-d' || w === '--destination') {
      const raw = value();
      const prefix = parsePrefix(raw);
      if (prefix) matches.push({ kind: w.startsWith('-s') || w === '--source' ? 'src' : 'dst', negate: neg, prefix });
      else unknown(`${w} ${raw}`);
    } else if (w === '-p' || w === '--protocol') {
      matches.push({ kind: 'proto', negate: neg, proto: value().toLowerCase() });
    } else if (w === '-i' || w === '-o') {
      matches.push({ kind: w === '-i' ? 'in-iface' : 'out-iface', negate: neg, name: value() });
    } else if (w === '-m' || w === '--match') {
      module = value();
    } else if (w === '-j' || w === '--jump') {
      const name = value();
      target = chains.has(name) ? { kind: 'jump', chain: name } : parseTarget(name, words.slice(i + 1));
      break;
    } else if (w === '--comment' && module === 'comment') {
      matches.push({ kind: 'comment', text: value() });
    } else if ((w === '--dport' || w === '--sport' || w === '--destination-port' || w === '--source-port') && TRANSPORT.has(module)) {
      const [from, to = from] = value().split(':').map(Number) as [number, number?];
      const kind = w === '--dport' || w === '--destination-port' ? 'dport' : 'sport';
      matches.push({ kind, negate: neg, from, to: to ?? from });
    } else if (module === 'statistic' && w === '--mode') {
      const mode = value();
      if (mode !== 'random') unknown(`--mode ${mode}`);
    } else if (module === 'statistic' && w === '--probability') {
      matches.push({ kind: 'statistic', probability: Number(value()) });
    } else if (module === 'mark' && w === '--mark') {
      const [v, m] = value().split('/');
      matches.push({ kind: 'mark', negate: neg, value: parseNumber(v!), mask: m === undefined ? 0xffffffff : parseNumber(m) });
    } else if (module === 'addrtype' && (w === '--dst-type' || w === '--src-type')) {
      matches.push({ kind: 'addrtype', negate: neg, dir: w === '--dst-type' ? 'dst' : 'src', type: value() });
    } else if (module === 'recent' && ['--set', '--rcheck', '--update', '--remove'].includes(w)) {
      matches.push({ kind: 'recent', mode: w.slice(2) as 'set' | 'rcheck' | 'update' | 'remove', name: 'DEFAULT' });
    } else if (module === 'recent' && w === '--name') {
      const name = value();
      const last = matches.findLast((m) => m.kind === 'recent');
      if (last && last.kind === 'recent') last.name = name;
    } else if (module === 'recent' && (w === '--seconds' || w === '--hitcount' || w === '--mask')) {
      value(); // affinity bookkeeping; the evaluator cannot know the table's state anyway
    } else if (module === 'recent' && ['--reap', '--rsource', '--rdest', '--rttl'].includes(w)) {
      // flags of the recent match
    } else if (module === 'set' && w === '--match-set') {
      const name = value();
      matches.push({ kind: 'set', negate: neg, name, dirs: value().split(',') as Array<'src' | 'dst'> });
    } else if (module === 'conntrack' && w === '--ctstate') {
      matches.push({ kind: 'conntrack', negate: neg, states: value().split(',') });
    } else if (module === 'nfacct' && w === '--nfacct-name') {
      value(); // the nfacct match counts the packet and always matches (net/netfilter/xt_nfacct.c, unless a quota is set, which drover never sets)
    } else {
      unknown(w);
    }
  }
  return { chain, text, matches, target };
}

function parseTarget(name: string, args: string[]): Target {
  const opt = (flag: string): string | undefined => {
    const at = args.indexOf(flag);
    return at >= 0 ? args[at + 1] : undefined;
  };
  if (name === 'DNAT') {
    // "10.244.1.2:8080", "10.244.1.2", "[fd00:244:1::2]:8080", "[fd00:244:1::2]" or "fd00:244:1::2" (ip6tables-save).
    const to = opt('--to-destination') ?? '';
    const m = /^(?:([0-9.]+)|\[([0-9a-fA-F:.]+)\]|([0-9a-fA-F]*:[0-9a-fA-F:.]*))(?::(\d+))?$/.exec(to);
    const ip = m ? parseIP((m[1] ?? m[2] ?? m[3])!) : undefined;
    // The family must fit the form: a dotted quad alone, IPv6 in brackets or bare (a bare one's last group is never a port).
    if (!m || ip === undefined || (ip.family === 4) !== (m[1] !== undefined) || (m[3] !== undefined && m[4] !== undefined)) return { kind: 'unknown', text: `DNAT ${args.join(' ')}` };
    return m[4] ? { kind: 'DNAT', ip: ip.text, port: Number(m[4]) } : { kind: 'DNAT', ip: ip.text };
  }
  if (name === 'SNAT') return { kind: 'SNAT', ip: opt('--to-source') ?? '' };
  if (name === 'MARK') {
    const xmark = opt('--set-xmark');
    if (xmark) {
      const [v, m] = xmark.split('/');
      return { kind: 'MARK', value: parseNumber(v!), mask: m === undefined ? 0xffffffff : parseNumber(m) };
    }
    const or = opt('--or-mark');
    if (or) return { kind: 'MARK', value: parseNumber(or), mask: parseNumber(or) };
    const xor = opt('--xor-mark');
    if (xor) return { kind: 'MARK', value: parseNumber(xor), mask: 0 };
    return { kind: 'unknown', text: `MARK ${args.join(' ')}` };
  }
  if (PLAIN_TARGETS.has(name)) return { kind: name as 'MASQUERADE' | 'REJECT' | 'DROP' | 'ACCEPT' | 'RETURN' };
  return { kind: 'unknown', text: [name, ...args].join(' ') };
}
