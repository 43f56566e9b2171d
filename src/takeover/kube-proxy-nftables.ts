/**
 * kube-proxy's nftables mode as `drover takeover` checks it: its table
 * (`table ip kube-proxy`, `table ip6 kube-proxy`; pkg/proxy/nftables/
 * proxier.go), read with `nft list table` and walked by the trace engine
 * as drover's own nftables table is (modes/nftables/trace.ts, with the
 * rule syntax of rule-eval.ts), so that the takeover can check that
 * every frontend goes to the same endpoints through kube-proxy's table
 * as through drover's before it deletes the table.
 *
 * {@link parseNftListing} reads nft(8)'s text listing of one table: its
 * sets and maps with their elements (an element's `comment "…"` dropped,
 * a map's key and value split at ` : `), and its chains with their hook,
 * priority (a number, or a standard priority name with an offset, as
 * nft prints it: `dstnat - 10`) and policy, and their rules as text (a
 * rule's trailing `comment "…"` dropped). Pure. Anything it cannot read
 * throws; a rule it reads but rule-eval.ts does not know makes that
 * branch of a walk "cannot evaluate", which fails the check (never delete
 * on doubt).
 */
import { DroverError } from '../errors.ts';
import { runCommand } from '../kernel/exec.ts';
import { localAddresses } from '../kernel/iptables/live.ts';
import type { TraceContext } from '../inspect/trace.ts';
import { NFT } from '../modes/nftables/exec.ts';
import { walkTraceContext, type WalkChain, type WalkRule, type WalkTable } from '../modes/nftables/trace.ts';
import type { IPFamily } from '../model/types.ts';

/** An nft listing drover cannot read. */
export class NftListingError extends DroverError {
  constructor(message: string) {
    super(`cannot read nft's listing: ${message}`);
    this.name = 'NftListingError';
  }
}

/** The standard priority names of nft(8) ("PRIORITY" in the chain section), by value, for the hooks of the ip and ip6 families. */
const PRIORITIES: Readonly<Record<string, number>> = { raw: -300, mangle: -150, dstnat: -100, filter: 0, security: 50, srcnat: 100 };

/** A table as {@link parseNftListing} reads it: its family and name ("ip kube-proxy"), and what the walker takes. */
export interface ListedTable extends WalkTable {
  readonly name: string;
}

/** `text` without a trailing `comment "…"`. */
function withoutComment(text: string): string {
  return text.replace(/\s+comment "(?:[^"\\]|\\.)*"\s*$/, '').trim();
}

/** A priority as nft prints it: `-110`, `dstnat`, `dstnat - 10`, `srcnat + 5`. @throws NftListingError for another. */
function priorityOf(text: string): number {
  const m = /^(-?\d+)$|^([a-z]+)(?:\s*([+-])\s*(\d+))?$/.exec(text.trim());
  if (m?.[1] !== undefined) return Number(m[1]);
  const base = m?.[2] !== undefined ? PRIORITIES[m[2]] : undefined;
  if (base === undefined) throw new NftListingError(`priority ${JSON.stringify(text)}`);
  return base + (m![3] === '-' ? -1 : 1) * Number(m![4] ?? 0);
}

/** The items of an `elements = { … }` body, split at the commas outside quotes. */
function elementItems(body: string): string[] {
  const items: string[] = [];
  let cur = '';
  let quoted = false;
  for (const ch of body) {
    if (ch === '"') quoted = !quoted;
    if (ch === ',' && !quoted) {
      items.push(cur);
      cur = '';
    } else cur += ch;
  }
  items.push(cur);
  return items.map((i) => i.replace(/\s+/g, ' ').trim()).filter((i) => i !== '');
}

/**
 * Read nft's text listing of one table (`nft list table FAMILY NAME`).
 * @throws NftListingError when it is not one table's listing, or a set, map
 *   or chain line cannot be read.
 */
export function parseNftListing(listing: string): ListedTable {
  const lines = listing.split('\n');
  const head = /^table (ip6?|inet) (\S+) \{$/.exec(lines[0]?.trim() ?? '');
  if (!head) throw new NftListingError(`expected "table FAMILY NAME {", found ${JSON.stringify(lines[0] ?? '')}`);
  type Block = { kind: 'set' | 'map' | 'chain'; name: string; rules: WalkRule[]; base?: WalkChain['base']; elements: Map<string, string | undefined> };
  const sets = new Map<string, { elements: Map<string, string | undefined> }>();
  const chains = new Map<string, WalkChain>();
  /** The elements of `text` (`elements = { … }`) into `b`. */
  const addElements = (b: Block, text: string): void => {
    for (const item of elementItems(text.replace(/^elements = \{/, '').replace(/\}$/, ''))) {
      const plain = item.replace(/ comment "(?:[^"\\]|\\.)*"/, '');
      if (b.kind === 'set') {
        b.elements.set(plain, undefined);
        continue;
      }
      const at = plain.indexOf(' : ');
      if (at < 0) throw new NftListingError(`map ${b.name}: element ${JSON.stringify(item)} has no value`);
      b.elements.set(plain.slice(0, at).trim(), plain.slice(at + 3).trim());
    }
  };
  let block: Block | undefined;
  /** An `elements = {` line not closed yet, with the lines after it. */
  let collecting: string | undefined;
  let closed = false;
  for (let n = 1; n < lines.length && !closed; n++) {
    const line = lines[n]!.trim();
    if (block === undefined) {
      if (line === '}') closed = true;
      else if (line !== '' && !line.startsWith('comment ') && !line.startsWith('flags ')) {
        const open = /^(set|map|chain) (\S+) \{$/.exec(line);
        if (!open) throw new NftListingError(`line ${n + 1}: ${JSON.stringify(line)}`);
        block = { kind: open[1] as Block['kind'], name: open[2]!, rules: [], elements: new Map() };
      }
    } else if (collecting !== undefined) {
      collecting += ` ${line}`;
      if (line.endsWith('}')) {
        addElements(block, collecting);
        collecting = undefined;
      }
    } else if (line === '}') {
      if (block.kind === 'chain') chains.set(block.name, { ...(block.base ? { base: block.base } : {}), rules: block.rules });
      else sets.set(block.name, { elements: block.elements });
      block = undefined;
    } else if (block.kind === 'chain') {
      if (line === '' || line.startsWith('comment "')) continue;
      const base = /^type (\S+) hook (\S+)(?: device \S+)? priority ([^;]+); policy (\S+);$/.exec(line);
      if (base) block.base = { hook: base[2]!, priority: priorityOf(base[3]!), policy: base[4]! };
      else block.rules.push({ text: withoutComment(line), shown: line });
    } else if (line.startsWith('elements = {')) {
      if (line.endsWith('}')) addElements(block, line);
      else collecting = line;
    }
    // Any other line of a set or map (type, flags, size, timeout, comment) is not needed.
  }
  if (!closed || block !== undefined) throw new NftListingError('the listing ends inside a block');
  return { name: `${head[1]} ${head[2]}`, chains, sets };
}

/** kube-proxy's table of `family`, as nft names it. */
export function kubeProxyTable(family: IPFamily): string {
  return family === 'IPv4' ? 'ip kube-proxy' : 'ip6 kube-proxy';
}

/** A table with nothing in it: what a family without kube-proxy's table walks through (nothing takes the connection). */
const EMPTY: WalkTable = { chains: new Map(), sets: new Map() };

/**
 * The trace contexts of kube-proxy's nftables tables in the namespace of
 * `netns` (this process's without it), for `families`: each family's
 * table read with `nft list table`, or, where `present` does not list it,
 * an empty table (kube-proxy did not serve that family: no DNAT).
 * @throws NftListingError when a listing cannot be read; Error when nft fails.
 */
export async function kubeProxyTraceContexts(netns: string | undefined, families: Iterable<IPFamily>, present: readonly string[]): Promise<Partial<Record<IPFamily, TraceContext>>> {
  const out: Partial<Record<IPFamily, TraceContext>> = {};
  for (const family of new Set(families)) {
    const name = kubeProxyTable(family);
    let table: WalkTable = EMPTY;
    if (present.includes(name)) {
      const res = await runCommand(NFT, ['list', 'table', ...name.split(' ')], netns !== undefined ? { netns } : {});
      if (res.code !== 0) throw new Error(`nft list table ${name} failed: ${res.stderr.trim()}`);
      table = parseNftListing(res.stdout);
    }
    out[family] = walkTraceContext(table, await localAddresses(netns, family), name);
  }
  return out;
}
