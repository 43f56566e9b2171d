/**
 * nftables mode's table as the kernel has it, read from
 * `nft -j list table ip drover` (libnftables-json(5)): each set's key and
 * value types and its elements as element texts (elements.ts), each
 * chain's hook and its rules' comments, and each rule by its handle.
 */
import { DroverError } from '../../errors.ts';

/** A set or map of the live table. */
export interface LiveSet {
  /** Key type, parts joined by " . " (e.g. "ipv4_addr . inet_proto . inet_service"). */
  readonly keyType: string;
  /** Value type of a map, joined the same way; undefined for a set. */
  readonly mapType?: string;
  /** Element texts ("10.96.0.10 . tcp . 80"); for a map, key text → value text. */
  readonly elements: ReadonlyMap<string, string | undefined>;
}

/** A chain of the live table. */
export interface LiveChain {
  readonly base?: { readonly type: string; readonly hook: string; readonly priority: number; readonly policy: string };
  /** Each rule's comment, null for a rule without one, in order. */
  readonly comments: readonly (string | null)[];
}

/** A rule of the live table, as `drover trace --kernel` names the rules the kernel reports by handle. */
export interface LiveRule {
  readonly chain: string;
  /** Its place in the chain, from 1. */
  readonly line: number;
  readonly comment: string | null;
  /** The kind of each of its expressions, as nft's JSON keys them: "match", "mangle", "dnat", "masquerade", "reject", "jump", … */
  readonly statements: readonly string[];
}

/** The live table; `exists: false` when the kernel has none. */
export interface LiveTable {
  readonly exists: boolean;
  readonly sets: ReadonlyMap<string, LiveSet>;
  readonly chains: ReadonlyMap<string, LiveChain>;
  /** Its rules by handle (nft's JSON lists every rule's handle); absent from tables built by hand. */
  readonly rules?: ReadonlyMap<number, LiveRule>;
}

/** The live table of a node without one. */
export const NO_TABLE: LiveTable = Object.freeze({ exists: false, sets: new Map(), chains: new Map() });

/** `nft -j` printed something drover cannot read. */
export class NftJsonError extends DroverError {
  constructor(message: string) {
    super(`cannot read nft's JSON listing: ${message}`);
    this.name = 'NftJsonError';
  }
}

type Json = unknown;

function typeText(t: Json): string {
  if (typeof t === 'string') return t;
  if (Array.isArray(t) && t.every((x) => typeof x === 'string')) return t.join(' . ');
  throw new NftJsonError(`unexpected set type ${JSON.stringify(t)}`);
}

/** One element value (a concatenation or a single value) as element text. */
function valueText(v: Json): string {
  if (typeof v === 'string' || typeof v === 'number') return String(v);
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, Json>;
    if (Array.isArray(o.concat)) return o.concat.map(valueText).join(' . ');
    // An interval of an interval set: {"prefix": {"addr": "10.0.0.0", "len": 8}}; a /32 as the bare address.
    if (o.prefix !== undefined && typeof o.prefix === 'object' && o.prefix !== null) {
      const p = o.prefix as Record<string, Json>;
      return p.len === 32 ? String(p.addr) : `${String(p.addr)}/${String(p.len)}`;
    }
    if (Array.isArray(o.range) && o.range.length === 2) return `${valueText(o.range[0])}-${valueText(o.range[1])}`;
    // An element with a timeout or a comment: {"elem": {"val": …, "comment": …}}.
    if (o.elem !== undefined && typeof o.elem === 'object' && o.elem !== null) return valueText((o.elem as Record<string, Json>).val);
  }
  throw new NftJsonError(`unexpected element ${JSON.stringify(v)}`);
}

/**
 * Parse `nft -j list table ip drover`.
 * @throws NftJsonError for output that is not nft's JSON.
 */
export function parseNftJson(text: string): LiveTable {
  let doc: Json;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new NftJsonError((err as Error).message);
  }
  const items = (doc as { nftables?: Json }).nftables;
  if (!Array.isArray(items)) throw new NftJsonError('no "nftables" array');
  const sets = new Map<string, LiveSet>();
  const chains = new Map<string, { base?: LiveChain['base']; comments: (string | null)[] }>();
  const rules = new Map<number, LiveRule>();
  let exists = false;
  for (const item of items as Record<string, Json>[]) {
    if (item.table) exists = true;
    const set = (item.set ?? item.map) as Record<string, Json> | undefined;
    if (set) {
      const isMap = item.map !== undefined;
      const elements = new Map<string, string | undefined>();
      for (const e of (set.elem as Json[] | undefined) ?? []) {
        if (isMap) {
          if (!Array.isArray(e) || e.length !== 2) throw new NftJsonError(`unexpected map element ${JSON.stringify(e)}`);
          elements.set(valueText(e[0]), valueText(e[1]));
        } else {
          elements.set(valueText(e), undefined);
        }
      }
      sets.set(String(set.name), { keyType: typeText(set.type), ...(isMap ? { mapType: typeText(set.map) } : {}), elements });
    }
    const chain = item.chain as Record<string, Json> | undefined;
    if (chain) {
      const base =
        chain.hook !== undefined
          ? { type: String(chain.type), hook: String(chain.hook), priority: Number(chain.prio), policy: String(chain.policy ?? 'accept') }
          : undefined;
      chains.set(String(chain.name), { ...(base ? { base } : {}), comments: [] });
    }
    const rule = item.rule as Record<string, Json> | undefined;
    if (rule) {
      const c = chains.get(String(rule.chain));
      if (!c) throw new NftJsonError(`rule of unknown chain ${JSON.stringify(rule.chain)}`);
      const comment = typeof rule.comment === 'string' ? rule.comment : null;
      c.comments.push(comment);
      if (typeof rule.handle === 'number') {
        const statements = Array.isArray(rule.expr) ? rule.expr.flatMap((e) => (e !== null && typeof e === 'object' ? Object.keys(e as object) : [])) : [];
        rules.set(rule.handle, { chain: String(rule.chain), line: c.comments.length, comment, statements });
      }
    }
  }
  return { exists, sets, chains, rules };
}
