/**
 * The static part of the iptables-mode ruleset, loaded from
 * `rules/iptables/static.rules`: drover's fixed chains (KUBE-SERVICES,
 * KUBE-MARK-MASQ, KUBE-POSTROUTING, KUBE-FORWARD) and the hook jumps from the
 * built-in chains.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseIP } from '../../../model/addr.ts';
import type { IPFamily } from '../../../model/types.ts';
import { BUILTIN_CHAINS, parseSave, type TableName } from '../../../kernel/iptables/parse.ts';
import { LOCALNET_FIREWALL_CHAIN, LOCALNET_FIREWALL_JUMP, LOCALNET_FIREWALL_RULE } from './localnet.ts';

/** A jump from a built-in chain into drover's chains. */
export interface HookRule {
  readonly table: TableName;
  readonly chain: string;
  readonly rule: string;
}

/** Static chains and hooks, per table. */
export interface StaticRuleset {
  /** Owned static chains and their rules, per table, in file order. */
  readonly chains: ReadonlyMap<TableName, ReadonlyMap<string, readonly string[]>>;
  /** Hook jumps in file order. */
  readonly hooks: readonly HookRule[];
  /**
   * The identities ({@link hookIdentity}) a sync and cleanup take for
   * drover's hooks, when more than those of `hooks`: a ruleset with the
   * nodeports hooks for `--nodeport-addresses` keeps the identities of the
   * shipped ones, so that every variant is replaced, also by an empty list.
   */
  readonly hookIds?: ReadonlySet<string>;
}

/** Path of the static rules file shipped with drover. */
export const STATIC_RULES_PATH = fileURLToPath(new URL('../../../../rules/iptables/static.rules', import.meta.url));

/** Path of the IPv6 static rules file (ip6tables-restore), the same layout as {@link STATIC_RULES_PATH}. */
export const STATIC6_RULES_PATH = fileURLToPath(new URL('../../../../rules/iptables/static6.rules', import.meta.url));

/**
 * Parse a static rules text.
 * @throws IptablesParseError on bad syntax; Error on a table other than filter/nat.
 */
export function parseStaticRules(text: string): StaticRuleset {
  const chains = new Map<TableName, Map<string, string[]>>();
  const hooks: HookRule[] = [];
  for (const [tableName, table] of parseSave(text)) {
    if (tableName !== 'filter' && tableName !== 'nat') throw new Error(`static rules: unsupported table ${tableName}`);
    const owned = new Map<string, string[]>();
    for (const [chain, parsed] of table) {
      if (BUILTIN_CHAINS.has(chain)) {
        for (const rule of parsed.rules) hooks.push({ table: tableName, chain, rule });
      } else {
        owned.set(chain, parsed.rules);
      }
    }
    chains.set(tableName, owned);
  }
  return { chains, hooks };
}

let cached: StaticRuleset | undefined;
let cached6: StaticRuleset | undefined;

/**
 * The shipped IPv6 static ruleset (read once, rules/iptables/static6.rules):
 * NodePorts on every local IPv6 address but ::1. With `nodePortIPs`
 * (`--nodeport-addresses`, resolved to this node's IPv6 addresses in its
 * IPv6 CIDRs), each nodeports hook becomes one hook per address, `-d
 * IP/128`, as in {@link loadStaticRules}.
 * @throws Error when an address is not an IPv6 address.
 */
export function loadStatic6Rules(nodePortIPs?: readonly string[]): StaticRuleset {
  cached6 ??= parseStaticRules(readFileSync(STATIC6_RULES_PATH, 'utf8'));
  return nodePortIPs === undefined ? cached6 : withNodePortAddresses(cached6, nodePortIPs, 'IPv6');
}

/**
 * The shipped static ruleset (read once): NodePorts on every local address
 * but 127.0.0.0/8 (its nodeports hooks match `--dst-type LOCAL`). With
 * `nodePortIPs` (`--nodeport-addresses`, resolved to this node's IPv4
 * addresses in those CIDRs), each nodeports hook becomes one hook per
 * address, `-d IP/32`, in place, as kube-proxy writes one nodeports rule
 * per address (pkg/proxy/iptables/proxier.go); an empty list leaves no
 * NodePort reachable, as in kube-proxy. With `localhost` (localhost.ts:
 * `--nodeport-localhost` in effect), the nodeports hooks without
 * `nodePortIPs` take 127.0.0.0/8 too, and filter KUBE-FIREWALL with the
 * anti-martian rule is added, jumped to from INPUT and OUTPUT (see
 * {@link withLocalnetFirewall}).
 * @throws Error when an address is not a canonical IPv4 address.
 */
export function loadStaticRules(nodePortIPs?: readonly string[], localhost = false): StaticRuleset {
  cached ??= parseStaticRules(readFileSync(STATIC_RULES_PATH, 'utf8'));
  const statics = nodePortIPs === undefined ? cached : withNodePortAddresses(cached, nodePortIPs);
  return localhost ? withLocalnetFirewall(statics, nodePortIPs === undefined) : statics;
}

/**
 * The drop of forwarded conntrack-INVALID packets, the first rule of filter
 * KUBE-FORWARD in the shipped rules of iptables and IPVS modes (both
 * families), as kube-proxy writes it without nfacct
 * (pkg/proxy/iptables/proxier.go and pkg/proxy/ipvs/proxier.go).
 */
export const INVALID_DROP_RULE = '-m conntrack --ctstate INVALID -j DROP';

/** The chain that holds {@link INVALID_DROP_RULE}. */
export const FORWARD_CHAIN = 'KUBE-FORWARD';

/**
 * `statics` as `tcpBeLiberal` (RenderOptions) asks: without
 * {@link INVALID_DROP_RULE} when true (kube-proxy leaves it out when
 * nf_conntrack_tcp_be_liberal is set), else `statics` itself. Pure.
 */
export function withInvalidDrop(statics: StaticRuleset, tcpBeLiberal: boolean | undefined): StaticRuleset {
  if (tcpBeLiberal !== true) return statics;
  const filter = statics.chains.get('filter');
  const forward = filter?.get(FORWARD_CHAIN);
  if (filter === undefined || forward === undefined) return statics;
  const chains = new Map(statics.chains);
  chains.set('filter', new Map([...filter, [FORWARD_CHAIN, forward.filter((r) => r !== INVALID_DROP_RULE)]]));
  return { ...statics, chains };
}

/** The part of a shipped nodeports hook that keeps 127.0.0.0/8 out. */
const NOT_LOOPBACK = '! -d 127.0.0.0/8 ';

/**
 * `statics` with localhost NodePorts (localhost.ts): with `allLocal` (no
 * `--nodeport-addresses`), the nodeports hooks lose `! -d 127.0.0.0/8`, as
 * kube-proxy's KUBE-NODEPORTS jump with localhostNodePorts; and filter
 * KUBE-FIREWALL holds the anti-martian rule of CVE-2020-8558, jumped to
 * from INPUT and OUTPUT (kube-proxy's jumps have no comment; drover's carry
 * the rule's, so that they have an identity, hookIdentity, that a sync
 * and cleanup find).
 */
function withLocalnetFirewall(statics: StaticRuleset, allLocal: boolean): StaticRuleset {
  const hooks = statics.hooks.map((h) =>
    allLocal && h.table === 'nat' && h.rule.startsWith(NOT_LOOPBACK) && h.rule.endsWith('-j KUBE-NODEPORTS') ? { ...h, rule: h.rule.slice(NOT_LOOPBACK.length) } : h,
  );
  hooks.push({ table: 'filter', chain: 'INPUT', rule: LOCALNET_FIREWALL_JUMP }, { table: 'filter', chain: 'OUTPUT', rule: LOCALNET_FIREWALL_JUMP });
  const chains = new Map(statics.chains);
  chains.set('filter', new Map([...(statics.chains.get('filter') ?? []), [LOCALNET_FIREWALL_CHAIN, [LOCALNET_FIREWALL_RULE]]]));
  return { chains, hooks, hookIds: hookIdentities(statics) };
}

/** The comment of the hooks that lead to nat KUBE-NODEPORTS. */
export const NODEPORTS_HOOK_COMMENT = 'kubernetes service nodeports';

function withNodePortAddresses(statics: StaticRuleset, ips: readonly string[], family: IPFamily = 'IPv4'): StaticRuleset {
  const [version, bits] = family === 'IPv4' ? [4, 32] : [6, 128];
  // Canonical text only (addr.ts parseIP), as ip6tables-save prints it back.
  for (const ip of ips) if (parseIP(ip)?.family !== version || parseIP(ip)?.text !== ip) throw new Error(`refusing to render NodePort address ${JSON.stringify(ip)}: not a canonical ${family} address`);
  const hooks = statics.hooks.flatMap((h) =>
    h.table === 'nat' && h.rule.endsWith('-j KUBE-NODEPORTS')
      ? ips.map((ip) => ({ table: h.table, chain: h.chain, rule: `-d ${ip}/${bits} -m comment --comment "${NODEPORTS_HOOK_COMMENT}" -j KUBE-NODEPORTS` }))
      : [h],
  );
  return { chains: statics.chains, hooks, hookIds: hookIdentities(statics) };
}

/**
 * What identifies a hook of drover's whatever its matches: its table,
 * built-in chain, target chain and comment, e.g. "nat PREROUTING
 * KUBE-NODEPORTS kubernetes service nodeports". Two variants of a hook
 * (the nodeports hooks with and without `--nodeport-addresses`) share it,
 * so a sync can replace one by the other and cleanup removes either.
 * Undefined for a rule without a `-j` target or a comment.
 */
export function hookIdentity(table: TableName, chain: string, rule: string): string | undefined {
  const target = / -j (\S+)/.exec(` ${rule}`)?.[1];
  const comment = /--comment (?:"([^"]*)"|(\S+))/.exec(rule);
  if (target === undefined || comment === null) return undefined;
  return `${table} ${chain} ${target} ${comment[1] ?? comment[2]}`;
}

/** The identities ({@link hookIdentity}) of the hooks of `statics`, and its {@link StaticRuleset.hookIds}. */
export function hookIdentities(statics: StaticRuleset): Set<string> {
  return new Set([...(statics.hookIds ?? []), ...statics.hooks.flatMap((h) => hookIdentity(h.table, h.chain, h.rule) ?? [])]);
}
