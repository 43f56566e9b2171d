/**
 * The nft(8) rule syntax drover's layout writes (layout.ts), parsed and
 * evaluated for the first packet of a new connection, for `drover trace`.
 * Pure. Only what the layout uses is known (in the IPv6 table `ip6 saddr`,
 * `ip6 daddr`, `ct original ip6 daddr` and `dnat ip6 to` stand for the
 * same fields and statement as their `ip` forms, with IPv6 addresses):
 *
 * - matches: a concatenation of `ip saddr`, `ip daddr`, `meta l4proto`,
 *   `th dport`, `ct original ip daddr`, `ct original proto-dst` looked up
 *   in a set (`@set`, `!= @set`; interval sets match by prefix or range);
 *   a field against a value (`ip saddr != 10.244.0.0/16`, `meta l4proto
 *   tcp`); `meta mark & 0x4000 == 0`; `fib saddr type local`; `ct state
 *   new` (always true: the trace is of a new connection); `ct state
 *   invalid` (always false, for the same reason); `ct status dnat`;
 * - statements: `meta mark set meta mark | X` (or `^ X`, or `set X`);
 *   `dnat ip to EXPR map @m`, whose key may hold `numgen random mod N`
 *   (N branches of probability 1/N; nft_numgen.c), and which does not
 *   match when the map has no such key (the lookup breaks the rule, as
 *   nft_lookup/nft_map do); `masquerade` with its flags; `update @m { KEY
 *   timeout Ns : VALUE }` (recorded as a note: it changes nothing for
 *   this packet); the verdicts `accept`, `drop`, `reject`, `return`,
 *   `jump C`, `goto C`.
 *
 * Also what kube-proxy's nftables mode writes (pkg/proxy/nftables/
 * proxier.go), for `drover takeover`'s check of its table: chain and set
 * names with capitals, `_`, `.` and `/`; a verdict map, named (`vmap
 * @m`) or anonymous (`numgen random mod 2 vmap { 0 : goto A, 1 : goto B
 * }`), whose value is the rule's verdict and which does not match when it
 * has no such key; `dnat to IP:PORT`; `dnat ip to EXPR map { K : IP .
 * PORT, … }`; `update @s { ip saddr }` (a set, no value).
 *
 * Anything else throws {@link NftEvalError}, so that a trace says it
 * cannot evaluate a rule instead of guessing.
 */
import { cidrContains, ipv4ToUint32, isCanonicalIPv4, parseIP } from '../../model/addr.ts';
import { DroverError } from '../../errors.ts';

/** A rule, or a set it looks up, that this evaluator does not know. */
export class NftEvalError extends DroverError {
  constructor(message: string) {
    super(message);
    this.name = 'NftEvalError';
  }
}

/** What a rule sees of a packet and its connection. */
export interface PacketFacts {
  readonly saddr: string;
  readonly daddr: string;
  /** `meta l4proto` as nft prints it: tcp, udp, sctp. */
  readonly proto: string;
  readonly dport: number;
  /** conntrack's original destination (`ct original ip daddr`, `ct original proto-dst`): the packet's own until a DNAT. */
  readonly original: { readonly daddr: string; readonly dport: number };
  /** `ct status dnat`: a DNAT rewrote the connection's destination. */
  readonly dnatted: boolean;
  /** `fib saddr type local`: the source is one of this node's addresses. */
  readonly saddrLocal: boolean;
  /** `meta mark`. */
  readonly mark: number;
}

/** The sets and maps of the table, by element text (elements.ts). */
export interface Lookups {
  /** Whether set or map `name` holds `key`. @throws NftEvalError when the table has no such set. */
  has(name: string, key: string): boolean;
  /** The value of `key` in map `name`, undefined when it has none. @throws NftEvalError when the table has no such map. */
  get(name: string, key: string): string | undefined;
}

/** How a rule ends a branch it matched; none for a rule of statements only (the next rule follows). */
export type NftVerdict =
  | { readonly kind: 'accept' | 'drop' | 'reject' | 'return' | 'masquerade' }
  | { readonly kind: 'jump' | 'goto'; readonly chain: string }
  /** A DNAT: the connection is accepted with destination `facts.daddr:dport`. */
  | { readonly kind: 'dnat' };

/** One branch of a rule's evaluation. */
export interface RuleBranch {
  /** Of this branch, given the rule was reached (0-1; below 1 only with numgen). */
  readonly probability: number;
  /** False when the rule does not match (a match failed, or a map lookup found nothing): the next rule follows. */
  readonly matched: boolean;
  /** The packet after the rule's statements (mark, DNAT). */
  readonly facts: PacketFacts;
  readonly verdict?: NftVerdict;
  /** What the branch depended on: the slot numgen drew, an affinity entry, an update. */
  readonly notes: readonly string[];
}

type Field = 'ip saddr' | 'ip daddr' | 'meta l4proto' | 'th dport' | 'ct original ip daddr' | 'ct original proto-dst' | 'meta mark';
type Selector = { readonly field: Field } | { readonly numgen: number };
type Expr = readonly Selector[];

type Item =
  | { readonly kind: 'lookup'; readonly expr: Expr; readonly set: string; readonly negate: boolean }
  | { readonly kind: 'compare'; readonly expr: Expr; readonly value: string; readonly negate: boolean }
  | { readonly kind: 'mask'; readonly expr: Expr; readonly mask: number; readonly value: number; readonly negate: boolean }
  | { readonly kind: 'fib-local' | 'ct-new' | 'ct-invalid' | 'ct-dnat' | 'masquerade' }
  | { readonly kind: 'mark-set'; readonly op: '|' | '^' | '='; readonly value: number }
  | { readonly kind: 'dnat'; readonly expr: Expr; readonly map: MapRef }
  | { readonly kind: 'dnat-to'; readonly ip: string; readonly port: number }
  | { readonly kind: 'vmap'; readonly expr: Expr; readonly map: MapRef }
  | { readonly kind: 'update'; readonly map: string; readonly key: Expr; readonly value?: Expr; readonly timeout?: string }
  | { readonly kind: 'verdict'; readonly verdict: NftVerdict };

/** A map a rule looks up: a named one of the table, or one written in the rule (its elements by key). */
type MapRef = { readonly name: string } | { readonly inline: ReadonlyMap<string, string> };

/** A chain or set name: drover's (lower case, digits, `-`) or kube-proxy's (also capitals, `_`, `.` and `/`). */
const NAME = /^[A-Za-z0-9_./-]+$/;

/** A parsed rule. */
export interface ParsedRule {
  readonly text: string;
  readonly items: readonly Item[];
}

const FIELDS: readonly (readonly [string[], Field])[] = [
  [['ct', 'original', 'ip', 'daddr'], 'ct original ip daddr'],
  [['ct', 'original', 'proto-dst'], 'ct original proto-dst'],
  [['ip', 'saddr'], 'ip saddr'],
  [['ip', 'daddr'], 'ip daddr'],
  // The IPv6 table's rules (layout.ts, family IPv6) read the same packet fields.
  [['ct', 'original', 'ip6', 'daddr'], 'ct original ip daddr'],
  [['ip6', 'saddr'], 'ip saddr'],
  [['ip6', 'daddr'], 'ip daddr'],
  [['meta', 'l4proto'], 'meta l4proto'],
  [['meta', 'mark'], 'meta mark'],
  [['th', 'dport'], 'th dport'],
];

const LITERAL = /^(?:[0-9][0-9./-]*|[0-9a-f]*:[0-9a-f:.]*(?:\/[0-9]+)?|0x[0-9a-f]+|tcp|udp|sctp)$/;

function num(token: string | undefined, text: string): number {
  if (token === undefined || !/^(?:0x[0-9a-f]+|[0-9]+)$/.test(token)) throw new NftEvalError(`cannot evaluate rule "${text}": expected a number, found ${JSON.stringify(token)}`);
  return Number(token);
}

/**
 * Parse one rule's text (without its comment).
 * @throws NftEvalError for syntax outside the layout's subset (module comment).
 */
export function parseRule(text: string): ParsedRule {
  const t = text.trim().split(/\s+/);
  let i = 0;
  const fail = (what: string): never => {
    throw new NftEvalError(`cannot evaluate rule "${text}": ${what} at ${JSON.stringify(t.slice(i).join(' ') || '(end)')}`);
  };
  const eat = (...words: string[]): boolean => {
    if (!words.every((w, k) => t[i + k] === w)) return false;
    i += words.length;
    return true;
  };
  const expect = (...words: string[]): void => void (eat(...words) || fail(`expected "${words.join(' ')}"`));
  const selector = (): Selector | undefined => {
    if (eat('numgen', 'random', 'mod')) return { numgen: num(t[i++], text) };
    for (const [words, field] of FIELDS) if (eat(...words)) return { field };
    return undefined;
  };
  const expr = (): Expr => {
    const parts: Selector[] = [];
    do {
      const s = selector();
      if (!s) fail('expected a field');
      parts.push(s!);
    } while (eat('.'));
    return parts;
  };
  const setRef = (): string => {
    const tok = t[i] ?? '';
    if (!tok.startsWith('@') || !NAME.test(tok.slice(1))) fail('expected @set');
    i++;
    return tok.slice(1);
  };
  /** `@name`, or `{ KEY : VALUE, … }` with each KEY and VALUE one or more words (`10.180.0.1 . 8080`, `goto C`). */
  const mapRef = (): MapRef => {
    if (!eat('{')) return { name: setRef() };
    const inline = new Map<string, string>();
    for (;;) {
      const key: string[] = [];
      while (i < t.length && t[i] !== ':') key.push(t[i++]!);
      expect(':');
      const value: string[] = [];
      while (i < t.length && t[i] !== '}' && !t[i]!.endsWith(',')) value.push(t[i++]!);
      if (i >= t.length) fail('expected }');
      if (t[i] === '}') {
        i++;
        inline.set(key.join(' '), value.join(' '));
        return { inline };
      }
      value.push(t[i++]!.slice(0, -1));
      inline.set(key.join(' '), value.join(' '));
    }
  };
  const items: Item[] = [];
  while (i < t.length) {
    const w = t[i]!;
    if (w === 'accept' || w === 'drop' || w === 'reject' || w === 'return') {
      i++;
      items.push({ kind: 'verdict', verdict: { kind: w } });
    } else if (w === 'jump' || w === 'goto') {
      i++;
      const chain = t[i++];
      if (!chain || !NAME.test(chain)) fail('expected a chain');
      items.push({ kind: 'verdict', verdict: { kind: w, chain: chain! } });
    } else if (eat('fib', 'saddr', 'type', 'local')) items.push({ kind: 'fib-local' });
    else if (eat('ct', 'state', 'new')) items.push({ kind: 'ct-new' });
    else if (eat('ct', 'state', 'invalid')) items.push({ kind: 'ct-invalid' });
    else if (eat('ct', 'status', 'dnat')) items.push({ kind: 'ct-dnat' });
    else if (eat('masquerade')) {
      while (eat('fully-random') || eat('random') || eat('persistent'));
      items.push({ kind: 'masquerade' });
    } else if (eat('dnat', 'ip', 'to') || eat('dnat', 'ip6', 'to')) {
      const e = expr();
      expect('map');
      items.push({ kind: 'dnat', expr: e, map: mapRef() });
    } else if (eat('dnat', 'to')) {
      const target = /^(\d+\.\d+\.\d+\.\d+|\[[0-9a-f:.]+\]):(\d+)$/.exec(t[i] ?? '');
      if (!target) fail('expected IP:PORT');
      i++;
      items.push({ kind: 'dnat-to', ip: target![1]!.replace(/^\[|\]$/g, ''), port: Number(target![2]) });
    } else if (eat('update')) {
      const map = setRef();
      expect('{');
      const key = expr();
      let timeout: string | undefined;
      if (eat('timeout')) timeout = t[i++];
      const value = eat(':') ? expr() : undefined;
      expect('}');
      items.push({ kind: 'update', map, key, ...(value ? { value } : {}), ...(timeout !== undefined ? { timeout } : {}) });
    } else if (eat('meta', 'mark', 'set')) {
      if (eat('meta', 'mark')) {
        const op = t[i++];
        if (op !== '|' && op !== '^') fail('expected | or ^');
        items.push({ kind: 'mark-set', op: op as '|' | '^', value: num(t[i++], text) });
      } else items.push({ kind: 'mark-set', op: '=', value: num(t[i++], text) });
    } else {
      const e = expr();
      if (eat('vmap')) {
        items.push({ kind: 'vmap', expr: e, map: mapRef() });
        continue;
      }
      const negate = eat('!=');
      if (t[i]?.startsWith('@')) items.push({ kind: 'lookup', expr: e, set: setRef(), negate });
      else if (!negate && eat('&')) {
        const mask = num(t[i++], text);
        const neg = eat('!=');
        if (!neg) expect('==');
        items.push({ kind: 'mask', expr: e, mask, value: num(t[i++], text), negate: neg });
      } else if (e.length === 1 && LITERAL.test(t[i] ?? '')) items.push({ kind: 'compare', expr: e, value: t[i++]!, negate });
      else fail('expected @set, a value or &');
    }
  }
  return { text, items };
}

function field(f: Field, p: PacketFacts): string {
  switch (f) {
    case 'ip saddr':
      return p.saddr;
    case 'ip daddr':
      return p.daddr;
    case 'meta l4proto':
      return p.proto;
    case 'th dport':
      return String(p.dport);
    case 'ct original ip daddr':
      return p.original.daddr;
    case 'ct original proto-dst':
      return String(p.original.dport);
    case 'meta mark':
      return String(p.mark);
  }
}

/** The values of a concatenation, one per numgen draw (with its probability and slot). */
function values(e: Expr, p: PacketFacts): { text: string; probability: number; slot?: { n: number; of: number } }[] {
  let out: { parts: string[]; probability: number; slot?: { n: number; of: number } }[] = [{ parts: [], probability: 1 }];
  for (const s of e) {
    if ('field' in s) {
      const v = field(s.field, p);
      out = out.map((o) => ({ ...o, parts: [...o.parts, v] }));
    } else {
      const of = s.numgen;
      out = out.flatMap((o) => Array.from({ length: of }, (_, n) => ({ parts: [...o.parts, String(n)], probability: o.probability / of, slot: { n, of } })));
    }
  }
  return out.map((o) => ({ text: o.parts.join(' . '), probability: o.probability, ...(o.slot ? { slot: o.slot } : {}) }));
}

/** Whether value `v` of a single field equals or falls in `literal` (an address, prefix, range, protocol or number). */
function compare(v: string, literal: string): boolean {
  if (literal.includes('/')) return parseIP(v) !== undefined && cidrContains(literal, v);
  return v === literal || (/^(?:0x[0-9a-f]+|[0-9]+)$/.test(literal) && /^[0-9]+$/.test(v) && Number(v) === Number(literal));
}

/** Whether one part of an interval set's element (a value, `a.b.c.d/len` or `a-b`) holds `v`. */
export function partHolds(part: string, v: string): boolean {
  if (part === v) return true;
  if (part.includes('/')) return parseIP(v) !== undefined && cidrContains(part, v);
  const dash = part.indexOf('-');
  if (dash < 0) return false;
  const [lo, hi] = [part.slice(0, dash), part.slice(dash + 1)];
  if (isCanonicalIPv4(lo) && isCanonicalIPv4(hi) && isCanonicalIPv4(v)) return ipv4ToUint32(lo) <= ipv4ToUint32(v) && ipv4ToUint32(v) <= ipv4ToUint32(hi);
  return /^[0-9]+$/.test(v) && Number(lo) <= Number(v) && Number(v) <= Number(hi);
}

interface Open {
  probability: number;
  facts: PacketFacts;
  notes: string[];
  /** The verdict a verdict map gave (it ends the rule). */
  verdict?: NftVerdict;
}

/** The value of `key` in map `ref`: a named map of the table, or the rule's own. @throws NftEvalError when the table has no such map. */
function mapGet(ref: MapRef, key: string, sets: Lookups): string | undefined {
  return 'name' in ref ? sets.get(ref.name, key) : ref.inline.get(key);
}

/**
 * Each draw of a map lookup by `e` (one per numgen slot, else one): its
 * probability, the value the map holds for it (undefined: none), the
 * slot's words for notes, and the note of a hit.
 */
function mapDraws(e: Expr, ref: MapRef, f: PacketFacts, sets: Lookups, probability: number): { key: string; probability: number; value: string | undefined; slot?: string; hit: string }[] {
  return values(e, f).map((v) => {
    const value = mapGet(ref, v.text, sets);
    const slot = v.slot ? `slot ${v.slot.n} of ${v.slot.of}` : undefined;
    const hit = slot ? `${slot}${v.probability < 1 ? `, taken with probability ${v.probability.toFixed(4)}` : ''}` : `${mapName(ref)} entry ${v.text} : ${value}`;
    return { key: v.text, probability: probability * v.probability, value, ...(slot ? { slot } : {}), hit };
  });
}

/** A map's name for notes: `@m`, or "the rule's map". */
function mapName(ref: MapRef): string {
  return 'name' in ref ? `@${ref.name}` : "the rule's map";
}

/** A verdict map's value as a verdict (`goto C`, `jump C`, `accept`, `drop`, `return`); `continue` is none. @throws NftEvalError for anything else. */
function verdictValue(value: string, text: string): NftVerdict | undefined {
  const w = value.trim().split(/\s+/);
  if (w.length === 1 && w[0] === 'continue') return undefined;
  if (w.length === 1 && (w[0] === 'accept' || w[0] === 'drop' || w[0] === 'return')) return { kind: w[0] };
  if (w.length === 2 && (w[0] === 'goto' || w[0] === 'jump') && NAME.test(w[1]!)) return { kind: w[0], chain: w[1]! };
  throw new NftEvalError(`cannot evaluate rule "${text}": the verdict ${JSON.stringify(value)} of its verdict map`);
}

/**
 * Evaluate `rule` for a packet: one branch per numgen draw (all of
 * probability 1 otherwise), each matched or not, with the packet after the
 * rule's statements and its verdict.
 * @throws NftEvalError for a set or map the table does not have.
 */
export function evalRule(rule: ParsedRule, facts: PacketFacts, sets: Lookups): RuleBranch[] {
  let open: Open[] = [{ probability: 1, facts, notes: [] }];
  const out: RuleBranch[] = [];
  const miss = (o: Open, probability = o.probability): void => void out.push({ probability, matched: false, facts: o.facts, notes: o.notes });
  for (const item of rule.items) {
    const next: Open[] = [];
    for (const o of open) {
      const f = o.facts;
      switch (item.kind) {
        case 'lookup': {
          for (const v of values(item.expr, f)) {
            const p = o.probability * v.probability;
            if (sets.has(item.set, v.text) !== item.negate) next.push({ ...o, probability: p });
            else miss(o, p);
          }
          break;
        }
        case 'compare':
          if (compare(values(item.expr, f)[0]!.text, item.value) !== item.negate) next.push(o);
          else miss(o);
          break;
        case 'mask': {
          const ok = ((Number(values(item.expr, f)[0]!.text) & item.mask) === item.value) !== item.negate;
          if (ok) next.push(o);
          else miss(o);
          break;
        }
        case 'fib-local':
          if (f.saddrLocal) next.push(o);
          else miss(o);
          break;
        case 'ct-new':
          next.push(o);
          break;
        case 'ct-invalid':
          miss(o);
          break;
        case 'ct-dnat':
          if (f.dnatted) next.push(o);
          else miss(o);
          break;
        case 'mark-set': {
          const mark = item.op === '|' ? f.mark | item.value : item.op === '^' ? f.mark ^ item.value : item.value;
          next.push({ ...o, facts: { ...f, mark: mark >>> 0 } });
          break;
        }
        case 'dnat': {
          const name = mapName(item.map);
          for (const d of mapDraws(item.expr, item.map, f, sets, o.probability)) {
            if (d.value === undefined) {
              // A key the map lacks breaks the rule: it does not match, the next rule follows.
              out.push({ probability: d.probability, matched: false, facts: f, notes: d.slot ? [...o.notes, `${d.slot} of ${d.key.split(' . ').slice(0, -1).join(' . ')} is empty in ${name}: that draw goes on to the next rule`] : o.notes });
              continue;
            }
            const parts = d.value.split(' . ');
            if (parts.length !== 2 || parseIP(parts[0]!)?.text !== parts[0] || !/^[0-9]+$/.test(parts[1]!)) throw new NftEvalError(`${name} maps ${d.key} to ${JSON.stringify(d.value)}, not ip . port`);
            next.push({ ...o, probability: d.probability, notes: [...o.notes, d.hit], facts: { ...f, daddr: parts[0]!, dport: Number(parts[1]), dnatted: true } });
          }
          break;
        }
        case 'dnat-to':
          next.push({ ...o, facts: { ...f, daddr: item.ip, dport: item.port, dnatted: true } });
          break;
        case 'vmap': {
          for (const d of mapDraws(item.expr, item.map, f, sets, o.probability)) {
            // A key the verdict map lacks: the rule does not match.
            if (d.value === undefined) {
              miss(o, d.probability);
              continue;
            }
            const verdict = verdictValue(d.value, rule.text);
            next.push({ ...o, probability: d.probability, notes: [...o.notes, d.hit], ...(verdict ? { verdict } : {}) });
          }
          break;
        }
        case 'masquerade':
          next.push(o);
          break;
        case 'update': {
          const key = values(item.key, f)[0]!.text;
          const value = item.value ? ` : ${values(item.value, f)[0]!.text}` : '';
          sets.has(item.map, key); // throws for a map the table lacks; the entry itself is the kernel's to write
          next.push({ ...o, notes: [...o.notes, `records ${key}${value} in @${item.map}${item.timeout ? ` for ${item.timeout}` : ''}`] });
          break;
        }
        case 'verdict':
          next.push(o);
          break;
      }
    }
    open = next;
  }
  const ruleVerdict = verdictOf(rule);
  for (const o of open) {
    const verdict = o.verdict ?? ruleVerdict;
    out.push({ probability: o.probability, matched: true, facts: o.facts, notes: o.notes, ...(verdict ? { verdict } : {}) });
  }
  return out;
}

/** A rule's verdict: its last verdict item, or DNAT, or masquerade. */
function verdictOf(rule: ParsedRule): NftVerdict | undefined {
  for (let k = rule.items.length - 1; k >= 0; k--) {
    const it = rule.items[k]!;
    if (it.kind === 'verdict') return it.verdict;
    if (it.kind === 'dnat' || it.kind === 'dnat-to') return { kind: 'dnat' };
    if (it.kind === 'masquerade') return { kind: 'masquerade' };
  }
  return undefined;
}
