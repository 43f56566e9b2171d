/**
 * What a line drover hands to the kernel may hold: the check of the
 * hostile-input property test, for iptables-restore and ipset restore input,
 * `drover render` output and the fakes' logs of netlink and sysctl writes.
 */
import { isCanonicalIPv4 } from '../../src/model/addr.ts';
import { MARKER } from './hostile.ts';

/** A ServicePortName of validated names: DNS-1123 labels "namespace/name" with an optional ":port". */
const SERVICE_PORT_KEY = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?\/[a-z0-9]([-a-z0-9]*[a-z0-9])?(:[a-z0-9]([-a-z0-9]*[a-z0-9])?)?$/;
const COMMENT = /--comment "([^"]*)"/g;
/** Outside comments: the characters of options, chain names, addresses, ports, set entries and `[0:0]` counters. */
const PLAIN = /^[A-Za-z0-9 ._:/,!=+[\]-]*$/;

/** The `--comment` texts of `text`, e.g. those of the static rules of a mode. */
export function commentsOf(text: string): Set<string> {
  return new Set([...text.matchAll(COMMENT)].map((m) => m[1]!));
}

/**
 * Why `comment` is not one drover writes: a static rule's comment, or
 * "KEY", "KEY cluster IP", "KEY has no endpoints", "KEY -> IP:PORT" with KEY
 * a service port of `keys` made of DNS-1123 labels. Undefined when it is.
 */
function commentProblem(comment: string, keys: ReadonlySet<string>, statics: ReadonlySet<string>): string | undefined {
  if (statics.has(comment)) return undefined;
  const m = /^(\S+)(?: cluster IP| has no endpoints| -> ([0-9.]+):([1-9][0-9]{0,4}))?$/.exec(comment);
  if (!m) return `comment ${JSON.stringify(comment)} is not one drover writes`;
  if (!SERVICE_PORT_KEY.test(m[1]!) || !keys.has(m[1]!)) return `comment names ${JSON.stringify(m[1])}, no service port of the snapshot`;
  if (m[2] !== undefined && !isCanonicalIPv4(m[2])) return `comment holds endpoint ${JSON.stringify(m[2])}`;
  return undefined;
}

/**
 * Why `line` may not reach the kernel, or undefined when it may: it must be
 * printable ASCII without {@link MARKER}; a `#` line holds no quote,
 * backslash, backtick, `$` or `;`; any other line has double quotes only
 * around a `--comment` drover writes (see {@link commentProblem}) and
 * otherwise only the characters of options, names, addresses and ports.
 */
export function lineProblem(line: string, keys: ReadonlySet<string>, statics: ReadonlySet<string>): string | undefined {
  if (!/^[\x20-\x7e]*$/.test(line)) return 'not printable ASCII';
  if (line.includes(MARKER)) return 'holds a hostile string';
  if (line.startsWith('#')) return /["'`$;\\]/.test(line) ? 'a comment line with a quote or shell character' : undefined;
  for (const m of line.matchAll(COMMENT)) {
    const problem = commentProblem(m[1]!, keys, statics);
    if (problem !== undefined) return problem;
  }
  const rest = line.replace(COMMENT, '--comment C');
  if (/^\*(nat|filter)$/.test(rest)) return undefined;
  return PLAIN.test(rest) ? undefined : 'a character outside options, names, addresses and ports';
}

/** Every problem of the lines of `texts`, as "problem: line" (JSON-quoted). */
export function payloadProblems(texts: Iterable<string>, keys: ReadonlySet<string>, statics: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const text of texts) {
    for (const line of text.split('\n')) {
      const problem = lineProblem(line, keys, statics);
      if (problem !== undefined) out.push(`${problem}: ${JSON.stringify(line)}`);
    }
  }
  return out;
}

const NFT_COMMENT = /(^|\s)comment "([^"]*)"/g;
/** Comments of nftables mode whose numbers vary with the endpoint counts and affinity timeouts in use (layout.ts). */
const NFT_VARYING = [
  /^one of [1-9][0-9]* (local )?endpoints?$/,
  /^frontends with [1-9][0-9]*( of this node's)? endpoints?$/,
  /^frontends with ClientIP affinity of [1-9][0-9]* s$/,
  /^(tcp|udp|sctp) affinity of [1-9][0-9]* s$/,
];
/** Outside comments in an nft script: the characters of statements, set and chain names, addresses, ports and braces. */
const NFT_PLAIN = /^[\tA-Za-z0-9 ._:/,!=@|&^{};-]*$/;

/** The `comment "…"` texts of an nft script, e.g. nftables mode's render of an empty snapshot. */
export function nftCommentsOf(text: string): Set<string> {
  return new Set([...text.matchAll(NFT_COMMENT)].map((m) => m[2]!));
}

/**
 * Why a line of an nft script may not reach the kernel, or undefined when
 * it may: printable ASCII or tabs without {@link MARKER}; a `#` line as in
 * {@link lineProblem}; every `comment "…"` one of `statics` (nftables mode
 * writes no name from the source into its table) or of the varying ones;
 * otherwise only the characters of statements, names, addresses and ports.
 */
export function nftLineProblem(line: string, statics: ReadonlySet<string>): string | undefined {
  if (!/^[\t\x20-\x7e]*$/.test(line)) return 'not printable ASCII';
  if (line.includes(MARKER)) return 'holds a hostile string';
  if (line.startsWith('#')) return /["'`$;\\]/.test(line) ? 'a comment line with a quote or shell character' : undefined;
  for (const m of line.matchAll(NFT_COMMENT)) {
    const c = m[2]!;
    if (!statics.has(c) && !NFT_VARYING.some((re) => re.test(c))) return `comment ${JSON.stringify(c)} is not one drover writes`;
  }
  return NFT_PLAIN.test(line.replace(NFT_COMMENT, '$1comment C')) ? undefined : 'a character outside statements, names, addresses and ports';
}

/**
 * Every problem of the lines of `texts`, as "problem: line" (JSON-quoted),
 * for text of any mode: a line must pass {@link lineProblem} (restore
 * payloads, the fakes' logs) or {@link nftLineProblem} (nft scripts). Both
 * hold a line to printable ASCII without a hostile string, with quotes only
 * around comments drover writes.
 */
export function anyModeProblems(texts: Iterable<string>, keys: ReadonlySet<string>, statics: ReadonlySet<string>, nftStatics: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const text of texts) {
    for (const line of text.split('\n')) {
      const problem = lineProblem(line, keys, statics);
      if (problem === undefined) continue;
      const nft = nftLineProblem(line, nftStatics);
      if (nft !== undefined) out.push(`${problem} (as nft: ${nft}): ${JSON.stringify(line)}`);
    }
  }
  return out;
}
