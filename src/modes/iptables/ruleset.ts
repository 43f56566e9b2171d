/**
 * Pure planning of iptables-mode syncs: which chains drover owns, what the
 * desired ruleset is, and the plans for a full sync, a partial sync and a
 * cleanup. No I/O here; backend.ts feeds it the kernel's read-back.
 */
import type { Snapshot } from '../../model/types.ts';
import { tokenize } from './rule.ts';
import type { KeptChain } from '../../proxier/backend.ts';
import { commentServicePort, hashSuffix, isServiceChain } from './names.ts';
import { BUILTIN_CHAINS, TABLES, type ParsedDump, type TableName } from './parse.ts';
import { appendAll, diffTable, emptyPlan, planToRestore, type Plan, type TableView } from './plan.ts';
import { renderServicePort, type ServiceRules } from './render.ts';
import type { RenderOptions } from '../../config/render.ts';
import { settleView } from '../../model/frontend-index.ts';
import { hookIdentities, hookIdentity, loadStaticRules, type StaticRuleset } from './static.ts';
import { LOCALNET_FIREWALL_CHAIN } from './localhost.ts';

/** The chain of every service port's ClusterIP entry (nat) or REJECT (filter). */
export const SERVICES_CHAIN = 'KUBE-SERVICES';

/**
 * The chains every service port has rules in, per table, compared as sets:
 * a rule that differs is deleted or appended on its own, so one service
 * change never rewrites the chain (render.ts SharedRule).
 */
export const SET_CHAINS: Readonly<Record<TableName, readonly string[]>> = {
  nat: [SERVICES_CHAIN, 'KUBE-NODEPORTS'],
  filter: [SERVICES_CHAIN, 'KUBE-EXTERNAL-SERVICES', 'KUBE-PROXY-FIREWALL', 'KUBE-NODEPORTS'],
};

/**
 * Owned chains that other programs write too, with the same rules, and jump
 * to from their own rules: filter KUBE-FIREWALL, whose anti-martian rule
 * kube-proxy's iptables proxier and older kubelets also keep
 * (localhost.ts). While a foreign rule jumps to one, cleanup leaves it as it
 * is, rules included: emptying it would drop the CVE-2020-8558 rule that
 * the other program's route_localnet=1 relies on.
 */
export const SHARED_CHAINS: Readonly<Record<TableName, readonly string[]>> = {
  nat: [],
  filter: [LOCALNET_FIREWALL_CHAIN],
};

/** True when `chain` of `table` is one of {@link SET_CHAINS}. */
export function isSetChain(table: TableName, chain: string): boolean {
  return SET_CHAINS[table].includes(chain);
}


/**
 * The payload a full sync writes onto empty tables: the complete ruleset, as
 * `drover render` prints it. Pure.
 * @param header comment lines printed first (without `# `).
 */
export function renderRestore(snapshot: Snapshot, opts: RenderOptions, header: readonly string[] = [], statics: StaticRuleset = loadStaticRules()): string {
  return planToRestore(fullPlan(statics, renderSnapshot(snapshot, opts), new Map()), header);
}

/**
 * Render every service port of a snapshot (of `opts.family`'s view), in
 * key order, each with the frontends it is served with
 * (model/frontend-index.ts settleView: a frontend two service ports want is
 * rendered for its owner only).
 */
export function renderSnapshot(snapshot: Snapshot, opts: RenderOptions): Map<string, ServiceRules> {
  const out = new Map<string, ServiceRules>();
  const served = settleView(snapshot, opts.family ?? 'IPv4').view;
  for (const [key, sp] of served.services) out.set(key, renderServicePort(sp, opts, served.node));
  return out;
}

/** True if drover owns `chain` in `table`: its static chains and every per-service chain (names.ts isServiceChain). */
export function isOwnedChain(statics: StaticRuleset, table: TableName, chain: string): boolean {
  return statics.chains.get(table)?.has(chain) === true || (table === 'nat' && isServiceChain(chain));
}

/**
 * A static chain of another mode (`retired`) that `statics` does not
 * declare: when this mode takes over a node, it is owned and stale.
 */
function isRetiredChain(statics: StaticRuleset, retired: StaticRuleset | undefined, table: TableName, chain: string): boolean {
  return retired?.chains.get(table)?.has(chain) === true && statics.chains.get(table)?.has(chain) !== true;
}

/** The service-specific part of a table view for a set of rendered service ports. */
function serviceView(table: TableName, services: Iterable<ServiceRules>, base: TableView): TableView {
  const chains = new Map(base.chains);
  const shared = new Map<string, string[]>(SET_CHAINS[table].map((c) => [c, [...(base.sets.get(c) ?? [])]]));
  for (const s of services) {
    for (const r of s.shared) if (r.table === table) shared.get(r.chain)!.push(r.rule);
    if (table === 'nat') for (const [chain, rules] of s.chains) chains.set(chain, rules);
  }
  const sets = new Map(base.sets);
  for (const [chain, rules] of shared) if (rules.length > 0 || sets.has(chain)) sets.set(chain, rules);
  return { chains, sets };
}

/** The whole desired table: static chains plus every service port's rules. */
export function desiredView(statics: StaticRuleset, table: TableName, services: Iterable<ServiceRules>): TableView {
  const chains = new Map<string, readonly string[]>();
  const sets = new Map<string, readonly string[]>();
  for (const [chain, rules] of statics.chains.get(table) ?? []) {
    (isSetChain(table, chain) ? sets : chains).set(chain, rules);
  }
  return serviceView(table, services, { chains, sets });
}

/**
 * The owned chains of a table as the kernel has them; with `retired`, also
 * that mode's static chains this one lacks (as ordinary chains, so that a
 * full sync deletes them).
 */
export function kernelView(statics: StaticRuleset, table: TableName, dump: ParsedDump, retired?: StaticRuleset): TableView {
  const chains = new Map<string, readonly string[]>();
  const sets = new Map<string, readonly string[]>();
  for (const [chain, parsed] of dump.get(table) ?? []) {
    if (isRetiredChain(statics, retired, table, chain)) chains.set(chain, parsed.rules);
    else if (isOwnedChain(statics, table, chain)) (isSetChain(table, chain) ? sets : chains).set(chain, parsed.rules);
  }
  return { chains, sets };
}

/**
 * Chains of `table` that a rule in a chain drover does not own jumps to
 * (`-j`/`-g`), e.g. leftovers of kube-proxy (KUBE-EXT-*, KUBE-NODEPORTS) or an
 * operator's rule. Such a chain cannot be deleted (`-X` fails while it is
 * referenced), so a full sync and cleanup only empty it. drover's own hook
 * rules do not count.
 * @returns each referenced chain → the rules that jump to it, as
 *   iptables-save prints them (`-A CHAIN …`), in the kernel's order.
 */
export function foreignReferences(statics: StaticRuleset, table: TableName, kernel: ParsedDump, retired?: StaticRuleset): Map<string, string[]> {
  const refs = new Map<string, string[]>();
  const hooks = new Set([...hookIdentities(statics), ...(retired ? hookIdentities(retired) : [])]);
  for (const [chain, parsed] of kernel.get(table) ?? []) {
    if (isOwnedChain(statics, table, chain) || isRetiredChain(statics, retired, table, chain)) continue;
    for (const rule of parsed.rules) {
      if (hooks.has(hookIdentity(table, chain, rule) ?? '')) continue;
      const target = / -[jg] (\S+)/.exec(` ${rule}`)?.[1];
      if (!target) continue;
      const by = refs.get(target) ?? [];
      by.push(`-A ${chain} ${rule}`);
      refs.set(target, by);
    }
  }
  return refs;
}

/**
 * The service port a rule belongs to, from its kube-proxy-style comment
 * ("ns/svc:port cluster IP", "ns/svc:port -> 10.244.1.2:8080", "ns/svc:port");
 * undefined for a rule without one or that cannot be split into words.
 */
export function ruleServicePort(rule: string): string | undefined {
  let words: string[];
  try {
    words = tokenize(rule);
  } catch {
    return undefined;
  }
  const at = words.indexOf('--comment');
  return at < 0 || at + 1 >= words.length ? undefined : commentServicePort(words[at + 1]!);
}

/** Options of {@link fullPlan}. */
export interface FullPlanOptions {
  /**
   * The source was not read whole: leave alone every KUBE-SERVICES rule and
   * service chain that no rendered service port claims (by the service port
   * its comments name), since it may belong to a service port in the part
   * that could not be read. Service ports that are rendered are repaired in
   * full. Default false.
   */
  readonly incomplete?: boolean;
  /**
   * The static rules of the mode this one replaces on the node (IPVS mode
   * passes iptables mode's): its static chains that this mode lacks are
   * deleted, and its hook jumps do not keep a chain alive. Default none.
   */
  readonly retired?: StaticRuleset;
}

/**
 * A full sync: everything that differs between the desired ruleset and the
 * kernel, including missing hook jumps and stale KUBE-SVC/KUBE-SEP chains
 * (deleted, or only emptied while a foreign rule still jumps to them; with
 * `incomplete`, only those of rendered service ports). Against an empty
 * kernel this is the complete ruleset (`drover render`).
 */
export function fullPlan(statics: StaticRuleset, services: ReadonlyMap<string, ServiceRules>, kernel: ParsedDump, opts: FullPlanOptions = {}): Plan {
  const plan = emptyPlan();
  const claimed = (rule: string): boolean => {
    const key = ruleServicePort(rule);
    return key !== undefined && services.has(key);
  };
  let named: Set<string> | undefined;
  for (const table of TABLES) {
    const ops = plan[table];
    const current = kernelView(statics, table, kernel, opts.retired);
    const retired = (chain: string) => isRetiredChain(statics, opts.retired, table, chain);
    if (opts.incomplete) {
      named ??= servicePortChainSuffixes(services.keys());
      const isStale = (chain: string) =>
        retired(chain) || (isServiceChain(chain) && (named!.has(chain.slice(chain.lastIndexOf('-') + 1)) || (current.chains.get(chain) ?? []).some(claimed)));
      diffTable(ops, desiredView(statics, table, services.values()), current, isStale, (rule) => !claimed(rule));
    } else {
      diffTable(ops, desiredView(statics, table, services.values()), current, (chain) => isServiceChain(chain) || retired(chain));
    }
    const refs = foreignReferences(statics, table, kernel, opts.retired);
    const pinned = ops.deleteChains.filter((c) => refs.has(c));
    const alreadyEmpty = new Set(pinned.filter((c) => (kernel.get(table)?.get(c)?.rules.length ?? 0) === 0));
    // Kept in place item by item: at 30,000 service ports these lists hold hundreds of thousands of chains, more than a spread can pass as arguments.
    const keptChains = ops.deleteChains.filter((c) => !refs.has(c));
    ops.deleteChains.length = 0;
    appendAll(ops.deleteChains, keptChains);
    const keptDeclared = ops.declare.filter((c) => !alreadyEmpty.has(c));
    ops.declare.length = 0;
    appendAll(ops.declare, keptDeclared);
    // A hook of drover's in another variant than the wanted one (the nodeports
    // hooks before and after --nodeport-addresses changed) is deleted.
    const stale = staleHooks(statics, table, kernel);
    appendAll(ops.deleteRules, stale);
    // When a built-in chain misses one of drover's hooks (or had a stale one),
    // all of drover's hooks of that chain are put back at its top in file
    // order, in the same transaction: their order matters (the nodeports hook
    // must follow the KUBE-SERVICES one), and a lone insert at position 1
    // would break it. The present copies are deleted first.
    const has = (chain: string, rule: string) => kernel.get(table)?.get(chain)?.rules.includes(rule) ?? false;
    const hooks = statics.hooks.filter((h) => h.table === table);
    const redo = new Set([...hooks.filter((h) => !has(h.chain, h.rule)).map((h) => h.chain), ...stale.map((r) => r.chain)]);
    for (const chain of redo) {
      const mine = hooks.filter((h) => h.chain === chain);
      for (const rule of kernel.get(table)?.get(chain)?.rules ?? []) if (mine.some((h) => h.rule === rule)) ops.deleteRules.push({ chain, rule });
      for (const hook of [...mine].reverse()) ops.insertRules.push({ chain, rule: hook.rule });
    }
  }
  return plan;
}

/**
 * A partial sync: only the chains and shared-chain rules (SET_CHAINS) of the service
 * ports in `changed`, from what was last applied (`before`) to the new
 * rendering (`after`; a key missing there was removed).
 */
export function partialPlan(
  changed: Iterable<string>,
  before: ReadonlyMap<string, ServiceRules>,
  after: ReadonlyMap<string, ServiceRules>,
): Plan {
  const plan = emptyPlan();
  const pick = (m: ReadonlyMap<string, ServiceRules>): ServiceRules[] =>
    [...changed].flatMap((k) => (m.has(k) ? [m.get(k)!] : []));
  for (const table of TABLES) {
    const empty = (): TableView => ({ chains: new Map(), sets: new Map(SET_CHAINS[table].map((c) => [c, []])) });
    diffTable(plan[table], serviceView(table, pick(after), empty()), serviceView(table, pick(before), empty()), isServiceChain);
  }
  return plan;
}

/**
 * The rules of built-in chains of `table` that are hooks of drover's by
 * their identity (static.ts hookIdentity) but none of `statics`' hooks:
 * the other variant of a hook, to delete. Every copy, in kernel order.
 */
export function staleHooks(statics: StaticRuleset, table: TableName, kernel: ParsedDump): Array<{ chain: string; rule: string }> {
  const ids = hookIdentities(statics);
  const wanted = new Set(statics.hooks.filter((h) => h.table === table).map((h) => `${h.chain} ${h.rule}`));
  return builtinChainRules(table, kernel, (id, chain, rule) => ids.has(id) && !wanted.has(`${chain} ${rule}`));
}

/**
 * The rules of the built-in chains of `table` in `kernel` that `pick`
 * takes, by their hook identity (static.ts hookIdentity; "" for a rule
 * that has none), every copy, in kernel order.
 */
export function builtinChainRules(table: TableName, kernel: ParsedDump, pick: (id: string, chain: string, rule: string) => boolean): Array<{ chain: string; rule: string }> {
  const out: Array<{ chain: string; rule: string }> = [];
  for (const [chain, parsed] of kernel.get(table) ?? []) {
    if (!BUILTIN_CHAINS.has(chain)) continue;
    for (const rule of parsed.rules) if (pick(hookIdentity(table, chain, rule) ?? '', chain, rule)) out.push({ chain, rule });
  }
  return out;
}

/**
 * The hash suffixes of the KUBE-SVC/SVL/EXT/FW chain names the service
 * ports `keys` would have, for each protocol (names.ts hashSuffix): a
 * stale chain with one of them belongs to a known service port, even when
 * none of its rules' comments names it (KUBE-EXT's do not).
 */
function servicePortChainSuffixes(keys: Iterable<string>): Set<string> {
  const out = new Set<string>();
  for (const key of keys) for (const proto of ['tcp', 'udp', 'sctp']) out.add(hashSuffix(key + proto));
  return out;
}

/** What a cleanup writes, and what it cannot remove. */
export interface CleanupPlan {
  readonly plan: Plan;
  /** Owned chains the plan only empties (or, those of {@link SHARED_CHAINS}, leaves as they are), because foreign rules jump to them (see {@link foreignReferences}); tables in {@link TABLES} order. */
  readonly kept: KeptChain[];
}

/**
 * Cleanup: flush and delete every chain drover owns and delete its hook
 * jumps (every copy), leaving every other rule and chain alone. A chain that
 * a foreign rule still jumps to is only flushed (deleting it would fail) and
 * listed in `kept` with those rules; one of {@link SHARED_CHAINS} is then
 * not even flushed (listed `untouched`). The other kept chains must be
 * emptied: their rules jump to chains the same transaction deletes, or
 * serve drover's Services (REJECT, DNAT), which must not outlive it. Pure.
 */
export function cleanupPlan(statics: StaticRuleset, kernel: ParsedDump): CleanupPlan {
  const plan = emptyPlan();
  const kept: KeptChain[] = [];
  for (const table of TABLES) {
    const ops = plan[table];
    const parsed = kernel.get(table);
    if (!parsed) continue;
    const ids = hookIdentities(statics);
    appendAll(ops.deleteRules, builtinChainRules(table, kernel, (id) => ids.has(id)));
    const refs = foreignReferences(statics, table, kernel);
    for (const chain of parsed.keys()) {
      if (!isOwnedChain(statics, table, chain)) continue;
      const referencedBy = refs.get(chain);
      if (referencedBy && SHARED_CHAINS[table].includes(chain)) {
        kept.push({ table, chain, referencedBy, untouched: true });
        continue;
      }
      ops.declare.push(chain);
      if (referencedBy) kept.push({ table, chain, referencedBy });
      else ops.deleteChains.push(chain);
    }
  }
  return { plan, kept };
}

/**
 * The `ip6tables` line of `drover status` for the IPv6 tables' drover-owned
 * rules (ownedRuleCounts), or none while they hold none.
 */
export function ip6tablesStatusLines(counts: Record<TableName, number>): Array<readonly [string, string]> {
  const total = counts.filter + counts.nat;
  return total > 0 ? [['ip6tables', `${total} drover-owned rules in the IPv6 tables (filter ${counts.filter}, nat ${counts.nat})`]] : [];
}

/** drover-owned rules in the kernel, per table: rules in owned chains plus hook jumps present. */
export function ownedRuleCounts(statics: StaticRuleset, dump: ParsedDump): Record<TableName, number> {
  const count = (table: TableName): number => {
    const view = kernelView(statics, table, dump);
    let n = 0;
    for (const rules of [...view.chains.values(), ...view.sets.values()]) n += rules.length;
    for (const hook of statics.hooks.filter((h) => h.table === table)) {
      n += (dump.get(table)?.get(hook.chain)?.rules ?? []).filter((r) => r === hook.rule).length;
    }
    return n;
  };
  return { filter: count('filter'), nat: count('nat') };
}
