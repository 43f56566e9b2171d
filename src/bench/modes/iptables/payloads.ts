/**
 * Hand-built iptables-restore payloads for the benchmark's baselines, one
 * service port changing from `before` to `after` (undefined: absent). Pure;
 * built off the clock, so a baseline's time is the kernel transaction alone.
 *
 * - minimalPayload: only what the change needs (the physical limit): the new
 *   or changed KUBE-SVC/KUBE-SEP chains, the deleted ones, and the one
 *   KUBE-SERVICES rule that comes or goes.
 * - kubeProxyPayload: what kube-proxy's partial sync (MinimizeIPTablesRestore)
 *   writes for the same change: every static chain declared and rewritten,
 *   including the whole KUBE-SERVICES chain of both tables with one rule per
 *   service port, plus the changed chains.
 * - fullRerenderPayload: the whole ruleset re-sent with every chain declared
 *   (kube-proxy's full sync, or a proxy without partial syncs).
 *
 * Every payload is meant for `iptables-restore --noflush`. Within a table the
 * order is: chain declarations, rule deletions, rule appends, chain deletions.
 */
import { sharedRule, type ServiceRules } from '../../../modes/shared/kube-chains/service-rules.ts';
import { SERVICES_CHAIN } from '../../../modes/shared/kube-chains/ruleset.ts';
import type { StaticRuleset } from '../../../modes/shared/kube-chains/static.ts';

interface TableText {
  declare: string[];
  remove: string[];
  append: string[];
  drop: string[];
}

const newTable = (): TableText => ({ declare: [], remove: [], append: [], drop: [] });

function print(tables: ReadonlyArray<[string, TableText]>): string {
  const out: string[] = [];
  for (const [name, t] of tables) {
    if (t.declare.length + t.remove.length + t.append.length + t.drop.length === 0) continue;
    out.push(`*${name}`, ...t.declare.map((c) => `:${c} - [0:0]`), ...t.remove, ...t.append, ...t.drop.map((c) => `-X ${c}`), 'COMMIT');
  }
  return out.length === 0 ? '' : `${out.join('\n')}\n`;
}

function sameRules(a: readonly string[] | undefined, b: readonly string[]): boolean {
  return a !== undefined && a.length === b.length && a.every((r, i) => r === b[i]);
}

/** The chains of `after` that are new or differ from `before`, and the chains of `before` that `after` lacks. */
function chainDelta(before: ServiceRules | undefined, after: ServiceRules | undefined): {
  written: Array<[string, readonly string[]]>;
  deleted: string[];
} {
  const written = [...(after?.chains ?? new Map<string, readonly string[]>())].filter(([c, rules]) => !sameRules(before?.chains.get(c), rules));
  const deleted = [...(before?.chains.keys() ?? [])].filter((c) => !after?.chains.has(c));
  return { written, deleted };
}

/** Write the changed service chains into `nat`: declarations and rules of the written ones, declaration and `-X` of the deleted ones. */
function writeDelta(nat: TableText, delta: ReturnType<typeof chainDelta>): void {
  for (const [chain, rules] of delta.written) {
    nat.declare.push(chain);
    for (const r of rules) nat.append.push(`-A ${chain} ${r}`);
  }
  for (const chain of delta.deleted) {
    nat.declare.push(chain);
    nat.drop.push(chain);
  }
}

/**
 * The smallest payload for one service port going from `before` to `after`:
 * its new or changed chains, its deleted chains, and its KUBE-SERVICES rule
 * in nat (or REJECT in filter) deleted or appended when it changed. "" when
 * nothing changes.
 */
export function minimalPayload(before: ServiceRules | undefined, after: ServiceRules | undefined): string {
  const nat = newTable();
  const filter = newTable();
  writeDelta(nat, chainDelta(before, after));
  const jump = (table: TableText, was: string | null | undefined, now: string | null | undefined): void => {
    if (was === now) return;
    if (was) table.remove.push(`-D ${SERVICES_CHAIN} ${was}`);
    if (now) table.append.push(`-A ${SERVICES_CHAIN} ${now}`);
  };
  jump(nat, before && sharedRule(before, 'nat'), after && sharedRule(after, 'nat'));
  jump(filter, before && sharedRule(before, 'filter'), after && sharedRule(after, 'filter'));
  return print([
    ['nat', nat],
    ['filter', filter],
  ]);
}

/** Every static chain of both tables declared and rewritten, KUBE-SERVICES holding one rule per service port of `services`. */
function staticTables(statics: StaticRuleset, services: Iterable<ServiceRules>): { nat: TableText; filter: TableText } {
  const nat = newTable();
  const filter = newTable();
  const all = [...services];
  for (const [name, table] of [
    ['nat', nat],
    ['filter', filter],
  ] as const) {
    for (const [chain, rules] of statics.chains.get(name) ?? []) {
      table.declare.push(chain);
      for (const r of rules) table.append.push(`-A ${chain} ${r}`);
      for (const s of all) {
        for (const r of s.shared) if (r.table === name && r.chain === chain) table.append.push(`-A ${chain} ${r.rule}`);
      }
    }
  }
  return { nat, filter };
}

/**
 * kube-proxy's partial restore for one service port going from `before` to
 * `after`: the static chains of both tables declared and rewritten (the
 * whole KUBE-SERVICES chain with the rules of every port in `services`,
 * the desired state after the change), plus the changed chains.
 */
export function kubeProxyPayload(
  statics: StaticRuleset,
  services: Iterable<ServiceRules>,
  before: ServiceRules | undefined,
  after: ServiceRules | undefined,
): string {
  const { nat, filter } = staticTables(statics, services);
  writeDelta(nat, chainDelta(before, after));
  return print([
    ['nat', nat],
    ['filter', filter],
  ]);
}

/**
 * The whole ruleset for `services` (the desired state after the change),
 * every chain declared, plus the deletion of the chains `before` had and
 * `after` lacks. The hook jumps from the built-in chains are not repeated
 * (they are in place already).
 */
export function fullRerenderPayload(
  statics: StaticRuleset,
  services: Iterable<ServiceRules>,
  before: ServiceRules | undefined,
  after: ServiceRules | undefined,
): string {
  const all = [...services];
  const { nat, filter } = staticTables(statics, all);
  for (const s of all) {
    for (const [chain, rules] of s.chains) {
      nat.declare.push(chain);
      for (const r of rules) nat.append.push(`-A ${chain} ${r}`);
    }
  }
  for (const chain of chainDelta(before, after).deleted) {
    nat.declare.push(chain);
    nat.drop.push(chain);
  }
  return print([
    ['nat', nat],
    ['filter', filter],
  ]);
}
